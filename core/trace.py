"""Phase timers for one round: traced splits time with barriers, untraced only measures the end.

MLX is lazy and asynchronous, so a phase's time is only known if the device is made to
finish it (mx.eval) before the clock is read. That barrier costs overlap, which is why the
untraced mode exists: it never syncs inside a round and reports `total` alone.
"""

from __future__ import annotations

import time

import mlx.core as mx

from core.events import PHASES, PhaseTimings


class RoundTimer:
    """Accumulates per-phase seconds for one round; `mark` is a barrier only when traced."""

    __slots__ = ("traced", "_start", "_last", "_acc")

    def __init__(self, traced: bool) -> None:
        self.traced = traced
        self._start = self._last = time.perf_counter()
        self._acc = dict.fromkeys(PHASES, 0.0)

    def mark(self, phase: str, *arrays: mx.array) -> None:
        """End `phase`: when traced, wait for `arrays` and charge the elapsed time to it."""
        if not self.traced:
            return
        if arrays:
            mx.eval(*arrays)
        now = time.perf_counter()
        self._acc[phase] += now - self._last
        self._last = now

    def finish(self) -> PhaseTimings:
        """Close the round; time not charged to a phase is `other` (traced mode only)."""
        now = time.perf_counter()
        total = now - self._start
        if not self.traced:
            return PhaseTimings(total=total)
        acc = self._acc
        acc["other"] += now - self._last
        return PhaseTimings(total=total, **acc)
