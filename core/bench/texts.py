"""Every text a bench row timed, as the reading page needs it: per seed (and per invocation
where one wrote another text), the token ids, each token's origin and each token's text.

Why kept: a TV budget's cost is read, not only measured (the seed compared the texts of one
seed side by side), and the reading must need no re-run (`specdec-tui sweep --read`). Why
this shape: origins are one letter per token (`ORIGIN_CODES`), a string as long as the
text; each token's text ("pieces") is the growth of the decoded prefix, so the pieces join
to the whole text and a renderer colours them without a tokenizer. A file saved before these
fields existed loads with none (`from_dicts` of nothing is an empty list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.events import ORIGINS

# One letter per origin (core/events.py ORIGINS); "?" reads back as an unknown origin.
ORIGIN_CODES: dict[str, str] = {
    "accepted": "a",
    "copied": "c",
    "corrected": "x",
    "bonus": "b",
    "target": "t",
    "draft": "d",
}
CODE_ORIGINS: dict[str, str] = {v: k for k, v in ORIGIN_CODES.items()}
assert set(ORIGIN_CODES) == set(ORIGINS), "every origin needs a code"
UNKNOWN = "?"
_HOLD = "\ufffd"  # a decoded prefix that ends inside a multi-byte character ends with this


def encode_origins(origins: Iterable[str]) -> str:
    """Origins as one letter each ('?' for a name outside ORIGINS)."""
    return "".join(ORIGIN_CODES.get(o, UNKNOWN) for o in origins)


def decode_origins(codes: str) -> list[str]:
    """The origin names of `encode_origins`'s letters ("" where a letter is unknown)."""
    return [CODE_ORIGINS.get(c, "") for c in codes]


def token_pieces(ids: Sequence[int], decode: Callable[[list[int]], str]) -> list[str]:
    """Each token's text: the growth of the decoded prefix up to it, so the pieces join to
    `decode(ids)` exactly. A token that ends inside a multi-byte character gets nothing and
    the token that completes it the character; a tokenizer that rewrites earlier text
    (rare) gives the rewrite to the token that caused it. Quadratic in the length: a few
    milliseconds for the bench's few hundred tokens, after the timing."""
    ids = list(ids)
    if not ids:
        return []
    full = decode(ids)
    ends: list[int] = []
    prev = 0
    for i in range(1, len(ids)):
        s = decode(ids[:i]).rstrip(_HOLD)
        n = len(s) if full.startswith(s) else _common(s, full)
        prev = max(prev, n)
        ends.append(prev)
    ends.append(len(full))
    starts = [0, *ends[:-1]]
    return [full[a:b] for a, b in zip(starts, ends, strict=True)]


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class TimedText:
    """One text a row timed: its seed, the invocations (0-based) that wrote exactly it, its
    ids, its origin letters ("" when the engine gave none: a peer's row) and, once decoded,
    each token's text."""

    seed: int
    invocations: list[int]
    ids: list[int]
    origins: str = ""
    pieces: list[str] | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces or [])

    def origin_names(self) -> list[str]:
        """One origin name per token ("" where unknown)."""
        names = decode_origins(self.origins)
        return names + [""] * (len(self.ids) - len(names))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"seed": self.seed, "invocations": list(self.invocations),
                             "ids": list(self.ids), "origins": self.origins}
        if self.pieces is not None:
            d["pieces"] = list(self.pieces)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TimedText:
        pieces = d.get("pieces")
        return cls(int(d.get("seed") or 0), [int(i) for i in d.get("invocations") or []],
                   [int(i) for i in d.get("ids") or []], str(d.get("origins") or ""),
                   [str(p) for p in pieces] if isinstance(pieces, list) else None)


@dataclass
class TimedTexts:
    """A row's timed texts, one entry per distinct (seed, ids, origins): a later invocation
    that wrote the same text with the same origins adds its number to the entry, one that
    wrote another (greedy on a GPU is not bit-stable; a guard that learned may draft
    otherwise) gets its own."""

    items: list[TimedText] = field(default_factory=list)

    def keep(self, seed: int, invocation: int, ids: Sequence[int], origins: str) -> None:
        ids = list(ids)
        for t in self.items:
            if t.seed == seed and t.ids == ids and t.origins == origins:
                if invocation not in t.invocations:
                    t.invocations.append(invocation)
                return
        self.items.append(TimedText(seed, [invocation], ids, origins))

    def decode(self, decode: Callable[[list[int]], str]) -> None:
        """Each text's pieces (`token_pieces`), once per distinct id sequence."""
        done: dict[tuple[int, ...], list[str]] = {}
        for t in self.items:
            if t.pieces is None:
                key = tuple(t.ids)
                if key not in done:
                    done[key] = token_pieces(t.ids, decode)
                t.pieces = list(done[key])

    def ordered(self) -> list[TimedText]:
        """By seed, then by the first invocation that wrote it."""
        return sorted(self.items, key=lambda t: (t.seed, min(t.invocations, default=0)))

    def to_dicts(self) -> list[dict[str, Any]]:
        return [t.to_dict() for t in self.ordered()]


def from_dicts(items: Any) -> list[TimedText]:
    """The texts of a saved row (an old file's row has none: an empty list)."""
    if not isinstance(items, list):
        return []
    return [TimedText.from_dict(d) for d in items if isinstance(d, dict)]


_COMPACT = ("invocations", "ids", "pieces")


def dumps(data: Any, indent: int = 1) -> str:
    """`data` as indented JSON (NaN refused), with each timed text's lists on one line: an
    indented list puts every token on a line of its own, which made a sweep's texts 1.8
    times as large (measured on the default pair's, 48 tokens a text)."""
    import json
    import secrets

    kept: list[str] = []
    # a placeholder no text can hold by chance (a model's text may hold anything)
    nonce = secrets.token_hex(8)

    def swap(obj: Any) -> Any:
        if isinstance(obj, dict):
            timed = "ids" in obj and "origins" in obj and "seed" in obj
            out = {}
            for k, v in obj.items():
                if timed and k in _COMPACT and isinstance(v, list):
                    kept.append(json.dumps(v, separators=(",", ":"), allow_nan=False))
                    out[k] = f"\x00{nonce}:{len(kept) - 1}\x00"
                else:
                    out[k] = swap(v)
            return out
        if isinstance(obj, list):
            return [swap(v) for v in obj]
        return obj

    text = json.dumps(swap(data), indent=indent, allow_nan=False)
    pattern = r'"\\u0000' + nonce + r':(\d+)\\u0000"'
    return re.sub(pattern, lambda m: kept[int(m[1])], text)
