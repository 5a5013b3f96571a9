"""A user turn in the chat: the text as typed (Rich text, never markup)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class UserMessage(Static):
    """A user turn."""

    def __init__(self, content: str) -> None:
        super().__init__(Text(content), classes="user-message")
        self.content_text = content
        self.border_title = "you"
