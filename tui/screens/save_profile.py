"""The modal that names a profile to save: Enter saves, Esc cancels.

It returns the name through `dismiss` (None: cancelled), so the app's action stays a plain
callback; a name core.profile refuses is said in the dialog, as text, and the dialog stays.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from core.errors import UserError
from tui.widgets.inline_keys import InlineBindings


class NameInput(InlineBindings, Input):
    """The name's line, its editing keys applied in the order typed (tui/widgets/inline_keys.py)."""


class SaveProfileScreen(ModalScreen[str | None]):
    """Ask for a profile name; Enter saves, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, suggestion: str) -> None:
        super().__init__()
        self._suggestion = suggestion

    def compose(self) -> ComposeResult:
        with Vertical(id="save-box", classes="modal-box"):
            yield Label("Save the current settings and recorded rounds as profile:")
            yield NameInput(value=self._suggestion, id="profile-name-input",
                            placeholder="name (letters, digits, . _ + -)")
            yield Label("", id="save-error", classes="error")
            yield Label("enter saves · esc cancels", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        from core.profile import validate_name

        name = event.value.strip()
        try:
            validate_name(name)
        except UserError as exc:
            self.query_one("#save-error", Label).update(Text(str(exc)))  # the name is text
            return
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)
