"""Phase timers for one round: traced splits time with barriers, untraced only measures the end.

MLX is lazy and asynchronous, so a phase's time is only known if the device is made to
finish it (mx.eval) before the clock is read. That barrier costs overlap, which is why the
untraced mode exists: it never syncs inside a round and reports `total` alone.

Communication (a sharded target, core/runtime/distributed.py) is metered from outside: while a traced
round is open on a thread (`active_timer`), the collectives' meter adds the seconds it waited
inside them, and the next `mark` moves them from that phase to "comm".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import mlx.core as mx

from core.events import PHASES, PhaseTimings

_open = threading.local()  # .timer: the traced round open on this thread, if any


def active_timer() -> RoundTimer | None:
    """The traced round open on this thread, or None (untraced rounds are never metered)."""
    return getattr(_open, "timer", None)


class RoundTimer:
    """Accumulates per-phase seconds for one round; `mark` is a barrier only when traced."""

    __slots__ = ("traced", "_clock", "_start", "_last", "_acc", "_comm")

    def __init__(self, traced: bool, clock: Callable[[], float] = time.perf_counter) -> None:
        """`clock`: the engine's (tests give a fake one, so the measured guard's law can be
        checked without timing real hardware)."""
        self.traced = traced
        self._clock = clock
        self._start = self._last = clock()
        self._acc = dict.fromkeys(PHASES, 0.0)
        self._comm = 0.0  # seconds inside collectives since the last mark
        _open.timer = self if traced else None

    def add_comm(self, seconds: float) -> None:
        """Seconds spent inside a collective; the next `mark` charges them to "comm"."""
        self._comm += seconds

    def _charge(self, phase: str, elapsed: float) -> None:
        comm, self._comm = min(self._comm, elapsed), 0.0
        self._acc[phase] += elapsed - comm
        self._acc["comm"] += comm

    def mark(self, phase: str, *arrays: mx.array) -> None:
        """End `phase`: when traced, wait for `arrays` and charge the elapsed time to it."""
        if not self.traced:
            return
        if arrays:
            mx.eval(*arrays)
        now = self._clock()
        self._charge(phase, now - self._last)
        self._last = now

    def finish(self) -> PhaseTimings:
        """Close the round; time not charged to a phase is `other` (traced mode only)."""
        now = self._clock()
        total = now - self._start
        if getattr(_open, "timer", None) is self:
            _open.timer = None
        if not self.traced:
            return PhaseTimings(total=total)
        self._charge("other", now - self._last)
        return PhaseTimings(total=total, **self._acc)
