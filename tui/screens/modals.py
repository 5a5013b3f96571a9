"""Modal screens: help, naming a profile to save, picking a profile to switch to.

Each returns its answer through `dismiss`, so the app's action stays a plain callback.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from core.errors import UserError


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


class SaveProfileScreen(ModalScreen[str | None]):
    """Ask for a profile name; Enter saves, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, suggestion: str) -> None:
        super().__init__()
        self._suggestion = suggestion

    def compose(self) -> ComposeResult:
        with Vertical(id="save-box", classes="modal-box"):
            yield Label("Save the current settings and recorded rounds as profile:")
            yield Input(value=self._suggestion, id="profile-name-input",
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


class ProfilePickerScreen(ModalScreen[str | None]):
    """Pick one of the saved profiles; Enter switches, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, names: list[str], active: str | None) -> None:
        super().__init__()
        self._names = names
        self._active = active

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box", classes="modal-box"):
            yield Label("Switch to profile:")
            options = [
                Option(Text(("● " if n == self._active else "  ") + n), id=n)
                for n in self._names
            ] or [Option("no saved profiles yet: ctrl+s saves one", disabled=True)]
            yield OptionList(*options, id="picker-list")
            yield Label("enter switches · esc cancels", classes="hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self._active in self._names:
            options.highlighted = self._names.index(self._active)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


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
