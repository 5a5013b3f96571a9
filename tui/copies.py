"""Where a copied run came from: a position in the conversation's token ids, back to a chat message.

A lookup draft copies what followed an earlier repeat of the conversation, and its round says
where (RoundEvent.copied_from, an index into the prompt ids plus the answer so far). The user
thinks in messages, not token indices, so the Acceptance panel names the message that holds
the copy and shows a few of its words.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Decode = Callable[[Sequence[int]], str]


@dataclass(frozen=True)
class PromptLayout:
    """The prompt ids a run sent, and where each chat message lies in them."""

    ids: tuple[int, ...]
    spans: tuple[tuple[int, int], ...] = ()  # per message: [start, end) in ids
    roles: tuple[str, ...] = ()  # per message: "system" | "user" | "assistant"

    def message_at(self, position: int) -> int | None:
        """The index of the message whose span holds `position`, if one does."""
        starts = [start for start, _ in self.spans]
        i = bisect.bisect_right(starts, position) - 1
        if 0 <= i < len(self.spans) and self.spans[i][0] <= position < self.spans[i][1]:
            return i
        return None


@dataclass(frozen=True)
class CopyOrigin:
    """A copied run's source: the message, the token offset in it, and its words."""

    message: int | None  # index into the conversation; None: the answer being written
    role: str  # the message's role, "answer" for the answer being written, "" if unknown
    offset: int  # tokens from the start of the message (or of the answer)
    before: str  # a few words just before the copied run, for context
    text: str  # the start of the copied run itself
    length: int  # tokens the target kept from the copy

    def where(self) -> str:
        """'your message 3', 'the assistant's message 2', 'this answer' ..."""
        if self.role == "answer":
            return "this answer"
        number = "" if self.message is None else f" {self.message + 1}"
        owner = {"user": "your message", "assistant": "the assistant's message",
                 "system": "the system prompt"}.get(self.role, "message")
        return owner + (number if self.role != "system" else "")


def locate_copy(
    position: int,
    length: int,
    layout: PromptLayout | None,
    answer_ids: Sequence[int],
    decode: Decode | None,
    *,
    context: int = 4,
    shown: int = 10,
) -> CopyOrigin:
    """Map a copy's start (an index into prompt ids + answer ids) to its message and words.

    Positions past the prompt are in the answer being written (a copy of itself: a repeated
    line of code, a list); a prompt without a layout still gives the words, not the message.
    """
    ids: Sequence[int]
    n_prompt = len(layout.ids) if layout is not None else 0
    if layout is not None and position < n_prompt:
        ids = layout.ids
        message = layout.message_at(position)
        if message is not None:
            start, end = layout.spans[message]
            role = layout.roles[message] if message < len(layout.roles) else ""
        else:  # the chat template's header for the answer
            start, end, role = 0, n_prompt, ""
    else:
        ids = answer_ids
        message, role = None, "answer"
        position -= n_prompt
        start, end = 0, len(answer_ids)
    lo = max(start, position - context)
    hi = min(end, position + max(1, min(length, shown)))
    before, text = "", ""
    if decode is not None and 0 <= position < len(ids):
        try:
            before, both = decode(list(ids[lo:position])), decode(list(ids[lo:hi]))
        except Exception:  # ids from another vocabulary: no words rather than a failure
            before, both = "", ""
        text = both[len(before):] if both.startswith(before) else both
    return CopyOrigin(message, role, position - start, before, text, length)
