"""Phase timers for one round: traced splits time with barriers, untraced only measures the end.

MLX is lazy and asynchronous, so a phase's time is only known if the device is made to
finish it (mx.eval) before the clock is read. That barrier costs overlap, which is why the
untraced mode exists: it never syncs inside a round and reports `total` alone.

Communication (a sharded target, core/runtime/distributed.py) is priced, not waited for: while
a traced round is open on a thread (`active_timer`), the collectives' meter hands the round one
price per collective it queues (`add_comm`, a number or a callable), and `finish` carves their
sum out of the phase they were queued in as "comm", at most that phase's own time. A callable
price is read only after the round's clock has stopped: pricing a size not seen before runs a
probe (collectives of its own), which must not sit inside any phase, nor inside the graph the
round is still building.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import mlx.core as mx

from core.events import PHASES, PhaseTimings

_open = threading.local()  # .timer: the traced round open on this thread, if any

Price = float | Callable[[], float]  # seconds, or how to read them once the round is over


def active_timer() -> RoundTimer | None:
    """The traced round open on this thread, or None (untraced rounds are never metered)."""
    return getattr(_open, "timer", None)


class RoundTimer:
    """Accumulates per-phase seconds for one round; `mark` is a barrier only when traced."""

    __slots__ = ("traced", "_clock", "_start", "_last", "_spans", "_comm")

    def __init__(self, traced: bool, clock: Callable[[], float] | None = None) -> None:
        """`clock`: the engine's (tests give a fake one, so the measured guard's law can be
        checked without timing real hardware)."""
        self.traced = traced
        clock = clock or time.perf_counter  # looked up per round: a test may patch it
        self._clock = clock
        self._start = self._last = clock()
        self._spans: list[tuple[str, float, list[Price]]] = []  # (phase, seconds, its comm)
        self._comm: list[Price] = []  # prices of the collectives queued since the last mark
        _open.timer = self if traced else None

    def add_comm(self, price: Price) -> None:
        """One collective queued in the phase under way: its seconds, or a callable that
        gives them (read by `finish`, after the clock stops). Carved out of that phase."""
        self._comm.append(price)

    def _charge(self, phase: str, elapsed: float) -> None:
        self._spans.append((phase, elapsed, self._comm))
        self._comm = []

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
        """Close the round; time not charged to a phase is `other` (traced mode only). The
        collectives' prices are read here, once the round's clock has stopped."""
        now = self._clock()
        total = now - self._start
        if getattr(_open, "timer", None) is self:
            _open.timer = None
        if not self.traced:
            return PhaseTimings(total=total)
        self._charge("other", now - self._last)
        acc = dict.fromkeys(PHASES, 0.0)
        for phase, elapsed, prices in self._spans:
            priced = sum(p() if callable(p) else p for p in prices)
            comm = min(priced, elapsed)  # carved out of the phase: never more than it took
            acc[phase] += elapsed - comm
            acc["comm"] += comm
        return PhaseTimings(total=total, **acc)
