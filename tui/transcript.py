"""Transcript: one assistant message as text pieces, each tagged with the model that decided it.

Tokens arrive as ids per round; their text only exists in context (byte-level BPE splits
multi-byte characters across tokens), so each piece is the growth of the decoded message,
holding back a trailing replacement character until the bytes that complete it arrive.
Rejected draft tokens are kept where they were proposed, so the view can show them struck out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text

from core.chat.palette import (
    ORIGIN_HELP,
    ORIGIN_STYLES,
    REJECTED,
    REJECTED_COPY,
    REJECTED_KINDS,
)
from core.events import RoundEvent

# The one origin palette (core/chat/palette.py), shared with `chat`; importable from here.
__all__ = ["ORIGIN_HELP", "ORIGIN_STYLES", "REJECTED", "REJECTED_COPY", "REJECTED_KINDS",
           "COPY_SOURCES", "Decode", "Piece", "Transcript"]
# Sources whose drafts are copies of the conversation (core.drafting.lookup).
COPY_SOURCES = frozenset({"lookup", "tree"})
BRANCH_SEP = "¦"  # between a tree's rejected branches, where `r` shows them

Decode = Callable[[Sequence[int]], str]
_HOLD = "\ufffd"


@dataclass
class Piece:
    """A run of text and the origin of the token(s) behind it."""

    text: str
    origin: str


class Transcript:
    """The growing text of one assistant message, coloured by token origin."""

    def __init__(self, decode: Decode, eos_ids: frozenset[int] = frozenset()) -> None:
        self._decode = decode
        self._eos = eos_ids
        self.ids: list[int] = []  # committed, visible ids (EOS excluded)
        self.pieces: list[Piece] = []
        self.text = ""  # stable decoded text of `ids`
        self.rejected_count = 0

    def _stable(self, ids: Sequence[int]) -> str:
        return self._decode(list(ids)).rstrip(_HOLD)

    def _grow(self, tid: int) -> str:
        self.ids.append(tid)
        full = self._stable(self.ids)
        if full.startswith(self.text):
            piece = full[len(self.text):]
        else:  # the tokenizer rewrote earlier text; attribute the whole change to this token
            common = 0
            for a, b in zip(full, self.text, strict=False):
                if a != b:
                    break
                common += 1
            piece = full[common:]
        self.text = full
        return piece

    def _rejected_text(self, rejected: Sequence[int]) -> str:
        if not rejected:
            return ""
        full = self._stable([*self.ids, *rejected])
        return full[len(self.text):] if full.startswith(self.text) else self._decode(list(rejected))

    def add_round(self, event: RoundEvent) -> None:
        """Append a round: accepted drafts, then the thrown-away drafts, then the correction."""
        pending = [list(b) for b in event.branches] or ([list(event.rejected)]
                                                         if event.rejected else [])
        kind = REJECTED_COPY if event.source in COPY_SOURCES else REJECTED
        for tok in event.tokens:
            if pending and tok.origin == "corrected":
                self._add_rejected(pending, kind)
                pending = []
            if tok.id in self._eos:
                continue
            self._add(self._grow(tok.id), tok.origin)
        if pending:
            self._add_rejected(pending, kind)

    def _add_rejected(self, branches: list[list[int]], kind: str = REJECTED) -> None:
        """The thrown-away drafts: one chain, or a tree's branches at the fork, each after
        the committed text and set apart by BRANCH_SEP."""
        self.rejected_count += sum(len(b) for b in branches)
        self._add(BRANCH_SEP.join(self._rejected_text(b) for b in branches), kind)

    def _add(self, text: str, origin: str) -> None:
        if not text:
            return
        if self.pieces and self.pieces[-1].origin == origin:
            self.pieces[-1].text += text
        else:
            self.pieces.append(Piece(text, origin))

    def render(self, show_rejected: bool) -> Text:
        """Rich text with one span per piece; rejected pieces only when asked for."""
        out = Text()
        for piece in self.pieces:
            if piece.origin in REJECTED_KINDS and not show_rejected:
                continue
            out.append(piece.text, ORIGIN_STYLES.get(piece.origin))
        return out

    def origin_counts(self) -> dict[str, int]:
        """Characters per origin (for tests and the legend's counts)."""
        counts: dict[str, int] = {}
        for piece in self.pieces:
            counts[piece.origin] = counts.get(piece.origin, 0) + len(piece.text)
        return counts
