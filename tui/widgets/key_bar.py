"""The key bar at the bottom: the keys that work while typing, wrapped to the screen's width."""

from __future__ import annotations

from textual import events
from textual.widgets import Static

from tui.keys import key_bar


class KeyBar(Static):
    """The key bar: the keys that work while typing, wrapped to the screen's width (Textual's
    Footer scrolled sideways and cut them at 80 columns, and glued grouped keys together)."""

    def on_mount(self) -> None:
        # The first Resize can arrive before the screen's layout settles: wrapped then, the
        # bar kept one line at 80x24 until the terminal was resized. Fit again once laid out.
        self.call_after_refresh(self._fit)

    def on_resize(self, event: events.Resize) -> None:
        self.update(key_bar(max(event.size.width - 2, 20)))
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        self.update(key_bar(max(self.size.width - 2, 20)))
