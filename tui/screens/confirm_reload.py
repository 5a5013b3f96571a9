"""The modal that asks, when a profile names other models than the loaded ones, whether to load
them or keep these.

It returns the answer through `dismiss` (True: load), so the app's action stays a plain
callback.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static


class ConfirmReloadScreen(ModalScreen[bool]):
    """A profile names other models than the loaded ones: load them, or keep these?

    Switching a profile is for settings; a reload costs a load (minutes for a big GGUF) and
    leaves the conversation on screen with a pair that never saw it, so it is asked, not done.
    """

    BINDINGS = [
        Binding("enter,y,l", "answer(True)", "load", show=False),
        Binding("escape,n,k", "answer(False)", "keep", show=False),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self._question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="reload-box", classes="modal-box"):
            yield Static(Text(self._question))  # model specs are text, never markup
            yield Label("enter / l loads them · esc / k keeps the loaded models (only the "
                        "settings change)", classes="hint")

    def action_answer(self, load: bool) -> None:
        self.dismiss(load)
