"""What a terminal sends, through Textual's own input parser (textual._xterm_parser.XTermParser)
and the driver's process_message, as the Linux driver does: the pilot's `press` skips both,
so a key the parser misreads (alt+m in tmux, shift+F3) would pass a pilot test."""

from __future__ import annotations

from typing import Any

from textual._xterm_parser import XTermParser

ESC = "\x1b"


def parse(data: str) -> list[Any]:
    """Textual's parser over `data` as one read from the terminal, then its end (a lone ESC
    or an alt+key at the end of a read waits for the escape delay; EOF stands for it)."""
    parser = XTermParser()
    return [*parser.feed(data), *parser.feed("")]


async def send(pilot: Any, data: str) -> None:
    """Deliver what the parser makes of `data` the way the Linux driver does."""
    for message in parse(data):
        pilot.app._driver.process_message(message)
    await pilot.pause()
    await pilot.pause()
