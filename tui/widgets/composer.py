"""The message box: a multi-line composer, so pasted code keeps every line.

An `Input` holds one line: a pasted function became its first line, and the lookup's headline
use (paste the code you want edited) could not be typed at all. This is Textual's TextArea
with chat keys: Enter sends; ctrl+j and shift+Enter add a line (ctrl+j is a line feed in every
terminal; shift+Enter and alt+Enter arrive as plain Enter unless the terminal speaks the kitty
keyboard protocol: Textual reads ESC CR as Enter). The box grows with its text up to
a few lines (app.tcss: max-height), then scrolls. A paste keeps every line whatever line
endings the terminal sent (tmux's paste-buffer turns LF into CR).
"""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea

from tui.widgets.inline_keys import InlineBindings

NEWLINE_KEYS = ("shift+enter", "alt+enter", "ctrl+j")


def normalise_newlines(text: str) -> str:
    """CRLF and lone CR (tmux's paste-buffer, old Mac files) as LF, one line each."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Composer(InlineBindings, TextArea):
    """Where the user writes a message; posts `Composer.Submitted` on Enter."""

    class Submitted(Message):
        """Enter was pressed: `value` is the whole text, every line of it."""

        def __init__(self, composer: Composer, value: str) -> None:
            super().__init__()
            self.composer, self.value = composer, value

        @property
        def control(self) -> Composer:
            return self.composer

    def __init__(self, *, placeholder: str = "", id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         placeholder=placeholder, compact=True, highlight_cursor_line=False)

    @property
    def value(self) -> str:
        """The text, as Input called it (the tests, the screenshot script and the app set it)."""
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    def clear(self) -> None:  # type: ignore[override]  # TextArea.clear returns an EditResult
        """Empty the box after a message was sent."""
        self.load_text("")

    async def _on_key(self, event: events.Key) -> None:
        # Textual runs TextArea._on_key after this one unless the default is prevented (it
        # walks the classes' handlers), so the keys not handled here need no call to it.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self, self.text))
            return
        if event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")

    async def _on_paste(self, event: events.Paste) -> None:
        """Every pasted line kept, in the document's own line ending (TextArea's handler is
        skipped: prevent_default)."""
        event.prevent_default()
        event.stop()
        if self.read_only:
            return
        text = normalise_newlines(event.text)
        if result := self._replace_via_keyboard(text, *self.selection):
            self.move_cursor(result.end_location)
            self.focus()
