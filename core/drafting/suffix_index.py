"""An online suffix automaton over token ids: the longest earlier repeat of the text's end.

Appending a token costs amortised O(1) (Blumer et al.'s construction), and after it the
longest suffix of the text that also occurs earlier is the suffix link of the last state:
no scan, so a lookup's host cost per round stays flat as the conversation grows. Each state
also keeps one end position of its strings, refreshed lazily towards the most recent
occurrence, which says where to copy the continuation from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Match:
    """The longest suffix of the text that occurred before: `length` tokens ending at `end`."""

    length: int
    end: int  # index in the text of the earlier occurrence's last token (< len(text) - 1)


class SuffixIndex:
    """A suffix automaton of one growing token sequence (truncation rebuilds it)."""

    __slots__ = ("tokens", "_next", "_link", "_len", "_end", "_last")

    def __init__(self, tokens: Iterable[int] = ()) -> None:
        self.tokens: list[int] = []
        self._next: list[dict[int, int]] = [{}]
        self._link: list[int] = [-1]
        self._len: list[int] = [0]
        self._end: list[int] = [-1]
        self._last = 0
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        for t in tokens:
            self.append(t)

    def append(self, token: int) -> None:
        """Add one token at the end (amortised O(1))."""
        nxt, link, ln, end = self._next, self._link, self._len, self._end
        i = len(self.tokens)
        # Lazy recency: the previous end's longest earlier repeat also ends at i - 1 now.
        if link[self._last] > 0:
            end[link[self._last]] = i - 1
        self.tokens.append(token)
        cur = len(ln)
        nxt.append({})
        link.append(0)
        ln.append(ln[self._last] + 1)
        end.append(i)
        p = self._last
        while p != -1 and token not in nxt[p]:
            nxt[p][token] = cur
            p = link[p]
        if p != -1:
            q = nxt[p][token]
            if ln[p] + 1 == ln[q]:
                link[cur] = q
            else:
                clone = len(ln)
                nxt.append(dict(nxt[q]))
                link.append(link[q])
                ln.append(ln[p] + 1)
                end.append(end[q])
                while p != -1 and nxt[p].get(token) == q:
                    nxt[p][token] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        self._last = cur

    def longest_repeat(self) -> Match | None:
        """The longest suffix that occurred earlier, with one earlier end, or None."""
        s = self._link[self._last]
        if s <= 0:
            return None
        return Match(self._len[s], self._end[s])

    def continuation(self, match: Match, k: int) -> list[int]:
        """Up to k tokens that followed the earlier occurrence. Where they run into the end of
        the text, the copy continues with the same period (a loop keeps looping)."""
        start, n = match.end + 1, len(self.tokens)
        period = n - start
        toks = self.tokens
        return [toks[start + (j % period)] for j in range(k)] if period > 0 else []

    def truncate(self, n: int) -> None:
        """Keep the first n tokens (a suffix automaton cannot shrink: rebuild, O(n))."""
        if n < len(self.tokens):
            kept = self.tokens[:n]
            self.__init__(kept)  # type: ignore[misc]

    def sync(self, committed: Sequence[int], start: int = 0) -> int:
        """Make the index equal to `committed` (its first `start` tokens are known to agree):
        truncate where they part, then append the rest. Returns the tokens appended.
        One token past what is indexed, the `start` the lookup passes after every plain step,
        is one append (no slice, no scan)."""
        if start == len(self.tokens) == len(committed) - 1:
            self.append(committed[-1])
            return 1
        n = min(len(self.tokens), len(committed))
        i = min(start, n)
        toks = self.tokens
        while i < n and toks[i] == committed[i]:
            i += 1
        self.truncate(i)
        todo = committed[len(self.tokens) :]
        self.extend(todo)
        return len(todo)


def scan_longest_repeat(tokens: Sequence[int], n_max: int, n_min: int = 1) -> Match | None:
    """The baseline the index replaces: for n from n_max down to n_min, scan backwards for an
    earlier occurrence of the last n tokens (O(len) per call). Used by tests and benchmarks."""
    size = len(tokens)
    for n in range(min(n_max, size - 1), n_min - 1, -1):
        tail = list(tokens[size - n :])
        for end in range(size - 2, n - 2, -1):
            if list(tokens[end - n + 1 : end + 1]) == tail:
                return Match(n, end)
    return None


class Occurrences:
    """Every earlier end of each token pair, most recent last, for the tree source: the
    automaton gives one occurrence of the longest repeat, a tree wants all of them.

    Bounded: a pair keeps its `keep` most recent ends (older ones are dropped in halves, so
    appending stays amortised O(1)), and the tokens live in a growing NumPy buffer, so match
    lengths against many candidates are one gather, not a Python loop per token.
    """

    __slots__ = ("_ends", "_buf", "_n", "keep")

    def __init__(self, tokens: Iterable[int] = (), keep: int = 256) -> None:
        self.keep = keep
        self._ends: dict[tuple[int, int], list[int]] = {}
        self._buf = np.zeros(1024, dtype=np.int64)
        self._n = 0
        self.extend(tokens)

    def __len__(self) -> int:
        return self._n

    @property
    def tokens(self) -> np.ndarray:
        return self._buf[: self._n]

    def extend(self, tokens: Iterable[int]) -> None:
        for t in tokens:
            self.append(t)

    def append(self, token: int) -> None:
        n = self._n
        if n == self._buf.shape[0]:
            self._buf = np.concatenate([self._buf, np.zeros_like(self._buf)])
        self._buf[n] = token
        self._n = n + 1
        if n >= 1:
            ends = self._ends.setdefault((int(self._buf[n - 1]), int(token)), [])
            ends.append(n)
            if len(ends) > 2 * self.keep:
                del ends[: self.keep]

    def truncate(self, n: int) -> None:
        """Keep the first n tokens (rebuilt, O(n), as the automaton is)."""
        if n < self._n:
            kept = self.tokens[:n].tolist()
            self.__init__(kept, self.keep)  # type: ignore[misc]

    def sync(self, committed: Sequence[int], start: int = 0) -> int:
        """As SuffixIndex.sync: truncate where `committed` parts from what is held, append
        the rest; the tokens appended."""
        if start == self._n == len(committed) - 1:
            self.append(committed[-1])
            return 1
        n = min(self._n, len(committed))
        i = min(start, n)
        buf = self._buf
        while i < n and buf[i] == committed[i]:
            i += 1
        self.truncate(i)
        todo = committed[self._n :]
        self.extend(todo)
        return len(todo)

    def repeats(self, candidates: int, longest: int) -> tuple[np.ndarray, np.ndarray]:
        """The `candidates` most recent earlier ends of the text's last pair, and how many
        tokens each agrees with the text's end (up to `longest`), longest first, then most
        recent: (ends, lengths). Empty when the last pair never occurred before."""
        n = self._n
        if n < 3:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        buf = self._buf
        ends = self._ends.get((int(buf[n - 2]), int(buf[n - 1])), [])
        e = np.asarray(ends[-candidates - 1 :], dtype=np.int64)[::-1]
        if e.size and e[0] == n - 1:
            e = e[1:]  # earlier ends only, most recent first
        if e.size == 0:
            return e, e
        # Compare `span` tokens back from each end (n - 1 - back stays >= 1). An index below
        # 0 wraps to the buffer's end and may compare equal: the cap at e + 1 (an occurrence
        # cannot agree on more tokens than precede it) discards those comparisons.
        span = min(longest, n - 1)
        back = np.arange(span)
        same = np.empty((e.size, span + 1), dtype=bool)  # a last column unequal: every run ends
        np.equal(buf[e[:, None] - back], buf[n - 1 - back], out=same[:, :span])
        same[:, span] = False
        lengths = np.minimum(same.argmin(axis=1), e + 1)
        order = np.argsort(-lengths, kind="stable")
        return e[order], lengths[order]
