"""The modal that asks before ctrl+q drops a message typed but not sent.

A 30-line paste was gone on ctrl+q without a word. It returns the answer through `dismiss`
(True: quit), so the app's action stays a plain callback.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class ConfirmQuitScreen(ModalScreen[bool]):
    """The message box holds an unsent message: quit and drop it, or stay?"""

    BINDINGS = [
        Binding("enter,y,ctrl+q", "answer(True)", "quit", show=False, priority=True),
        Binding("escape,n", "answer(False)", "stay", show=False),
    ]

    def __init__(self, lines: int) -> None:
        super().__init__()
        self._lines = lines

    def compose(self) -> ComposeResult:
        size = f"{self._lines} lines" if self._lines != 1 else "1 line"
        with Vertical(id="quit-box", classes="modal-box"):
            yield Static(Text(f"The message box holds an unsent message ({size}). "
                              "Quit and drop it?"))
            yield Label("enter / ctrl+q quits · esc stays (the message is kept)", classes="hint")

    def action_answer(self, quit_: bool) -> None:
        self.dismiss(quit_)
