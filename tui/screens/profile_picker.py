"""The modal that picks a saved profile to switch to: Enter switches, Esc cancels.

It returns the chosen name through `dismiss` (None: cancelled), so the app's action stays a
plain callback.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


class ProfilePickerScreen(ModalScreen[str | None]):
    """Pick one of the saved profiles; Enter switches, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(self, names: list[str], active: str | None,
                 presets: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self._names = names
        self._active = active
        self._presets = presets  # the shipped ones; the rest are the user's saves

    def compose(self) -> ComposeResult:
        width = max((len(n) for n in self._names), default=0)
        with Vertical(id="picker-box", classes="modal-box"):
            yield Label("Switch to profile (shipped presets, and yours: ctrl+s saves one):")
            options = [
                Option(Text.assemble(("● " if n == self._active else "  ") + n.ljust(width),
                                     ("  preset" if n in self._presets else "  yours", "dim")),
                       id=n)
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
