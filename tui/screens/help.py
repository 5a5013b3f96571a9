"""The help screen: every key, its while-typing form, and what the colours mean.

It returns nothing through `dismiss`; the key table it shows is built by tui/keys.py.
"""

from __future__ import annotations

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class HelpScreen(ModalScreen[None]):
    """Every key, its while-typing form, and what the colours mean."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "close", show=False)]

    def __init__(self, content: RenderableType) -> None:
        super().__init__()
        self._content = content

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box", classes="modal-box"):
            with VerticalScroll(id="help-scroll"):
                yield Static(self._content)
            yield Label("esc closes", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)
