"""Chat pane: the conversation, each assistant token coloured by the model that decided it.

Messages are widgets of their own (tui/widgets/user_message.py, assistant_message.py; the
legend in legend.py), imported from where they live; this one is the scroll view, anchored to
the newest text, that keeps the latest MAX_SHOWN.
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

# Messages (and notes) the chat keeps on screen. Every layout of the screen walks all of
# them, so an unbounded chat slowed every keypress and round as a session grew (a 200-turn
# soak went from 0.3 s to 1.5 s of CPU a turn) and held every message's widgets forever.
MAX_SHOWN = 60


class ChatView(VerticalScroll):
    """The scrolling conversation, anchored to the bottom while text streams in.

    It keeps the newest MAX_SHOWN messages; older ones leave the screen (not the model's
    context, which core.models.context trims on its own terms) and one line says how many.
    """

    can_focus = True

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.hidden = 0  # messages no longer shown

    def on_mount(self) -> None:
        self.anchor()

    def add(self, *widgets: Widget, before: Widget | None = None) -> None:
        """Mount messages (before `before` when given), then drop the oldest beyond MAX_SHOWN."""
        self.mount(*widgets, before=before)
        shown = [c for c in self.children if not c.has_class("hidden-note")]
        extra = len(shown) - MAX_SHOWN
        if extra <= 0:
            return
        for widget in shown[:extra]:
            widget.remove()
        self.hidden += extra
        text = Text(f"{self.hidden} earlier messages are no longer shown (the chat keeps the "
                    f"last {MAX_SHOWN}).", "dim italic")
        notes = self.query(".hidden-note")
        if notes:
            notes.first(Static).update(text)
        else:
            self.mount(Static(text, classes="hidden-note"), before=0)
