"""specdec-tui core: the engine and everything headless; never imports Textual."""

import logging

# A library's loggers stay silent unless the program shows them: the CLI prints its own
# sentences, and the app forwards WARNINGs as notifications (tui/bridge.py).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__: list[str] = []
