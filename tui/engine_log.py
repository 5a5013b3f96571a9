"""core's warnings and compile notices, while the engine thread runs a command, as app messages.

Why a module of its own: the CLI prints core's sentences itself; in the app nobody else would
show them, so the engine thread (tui/bridge.py) forwards them as EngineNotice and
KernelsCompiling messages for the duration of a command.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from textual.message import Message

from tui.messages import EngineNotice, KernelsCompiling


class _Forward(logging.Handler):
    def __init__(self, post: Callable[[Message], None]) -> None:
        super().__init__(logging.WARNING)
        self.post = post

    def emit(self, record: logging.LogRecord) -> None:
        notice = getattr(record, "compile_notice", None)  # from core.runtime.compile_watch's timer thread
        self.post(KernelsCompiling(notice) if notice is not None
                  else EngineNotice(record.getMessage()))


@contextlib.contextmanager
def core_warnings_to(post: Callable[[Message], None]) -> Iterator[None]:
    """While the block runs, core's WARNINGs become EngineNotice messages, and its compile
    notices KernelsCompiling (the CLI prints its own sentences; in the app nobody else would
    show them)."""
    handler, logger = _Forward(post), logging.getLogger("core")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
