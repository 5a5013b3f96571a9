"""Textual's Footer without its leak: every recompose left the old keys alive.

Footer.compose binds each FooterKey to the footer's `compact` reactive (data_bind), which
stores a watcher on the footer; Textual prunes those only when `compact` changes
(Textualize/textual#6666). The footer recomposes on every focus or binding change, so a long
session kept every key it ever showed (the soak test counted 60 a chat turn). After each
recompose, the watchers of keys that are gone are dropped here.
"""

from __future__ import annotations

from textual.widgets import Footer as TextualFooter


class Footer(TextualFooter):
    """The key bar; see the module docstring for the one thing it adds."""

    async def recompose(self) -> None:
        await super().recompose()
        for watchers in getattr(self, "__watchers", {}).values():
            watchers[:] = [
                (node, callback)
                for node, callback in watchers
                if not getattr(node, "_closing", False) and getattr(node, "is_attached", True)
            ]
