"""SettingsWatch: which settings each round of a run read, so a run is recorded as it ran.

A key pressed mid-turn applies from the next round, so the settings at a run's end are not
what produced it. The bridge hands the engine this watch as its settings
source (tui/bridge.py) and puts what it noted in RunFinished (tui/messages.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.settings import Settings


class SettingsWatch:
    """The engine's settings source, noting which settings each round ran with: the first
    round's and, for every round that ran with others, its index and the fields that changed.
    The engine tells the source through `taken(s)` which settings its next rounds run with
    (other reads only peek: a pipelined step reads ahead), so `taken` after n rounds came out
    is round n's."""

    def __init__(self, source: Callable[[], Settings]) -> None:
        self._source = source
        self.rounds = 0  # rounds yielded so far
        self.first: Settings | None = None
        self._last: Settings | None = None
        self._changes: list[tuple[int, dict[str, Any]]] = []

    def __call__(self) -> Settings:
        return self._source()

    def taken(self, s: Settings) -> None:
        if self._last is None:
            self.first = self._last = s
        elif s != self._last:
            old, new = self._last.to_dict(), s.to_dict()
            changed = {k: v for k, v in new.items() if old[k] != v}
            if self._changes and self._changes[-1][0] == self.rounds:  # two takes, one round
                changed = {**self._changes.pop()[1], **changed}
            self._changes.append((self.rounds, changed))
            self._last = s

    @property
    def current(self) -> Settings | None:
        """The settings the loop last took: the ones the round it yields now ran with (it
        takes the next round's only after that round was handed on)."""
        return self._last

    @property
    def changes(self) -> tuple[tuple[int, dict[str, Any]], ...]:
        """The changes some round ran with (one taken after the last round ran none)."""
        return tuple(c for c in self._changes if c[0] < self.rounds)
