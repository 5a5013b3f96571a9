"""RoundStats: the numbers the side panels show, folded from RoundEvents as they arrive.

Kept apart from the widgets so a panel redraw reads ready numbers (no pass over every round)
and so a recorded profile's rounds can be replayed into the same panels.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from core.events import RoundEvent, RunSummary

SHOWN_PHASES = ("draft", "verify", "sample", "cache", "other")


@dataclass
class PhaseStat:
    """asitop-style numbers for one phase, in milliseconds."""

    current: float = 0.0
    total: float = 0.0
    peak: float = 0.0
    count: int = 0

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    def add(self, ms: float) -> None:
        self.current = ms
        self.total += ms
        self.peak = max(self.peak, ms)
        self.count += 1


@dataclass
class RoundStats:
    """Everything folded from one run's rounds (reset when a new run starts)."""

    rounds: list[RoundEvent] = field(default_factory=list)
    phases: dict[str, PhaseStat] = field(
        default_factory=lambda: {p: PhaseStat() for p in (*SHOWN_PHASES, "total")}
    )
    tokens: int = 0
    proposed: int = 0
    accepted: int = 0
    spec_rounds: int = 0
    reached: list[int] = field(default_factory=list)  # per draft position: times verified
    kept: list[int] = field(default_factory=list)  # per draft position: times accepted
    k_history: list[int] = field(default_factory=list)
    accepted_history: list[int] = field(default_factory=list)
    tv_sum: float = 0.0
    tv_count: int = 0
    summary: RunSummary | None = None

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    @classmethod
    def from_rounds(cls, rounds: Iterable[RoundEvent], summary: RunSummary | None) -> RoundStats:
        stats = cls()
        for ev in rounds:
            stats.add(ev)
        stats.summary = summary
        return stats

    def add(self, ev: RoundEvent) -> None:
        self.rounds.append(ev)
        self.tokens += len(ev.tokens)
        if ev.traced:
            for p in SHOWN_PHASES:
                self.phases[p].add(getattr(ev.timings, p) * 1e3)
        self.phases["total"].add(ev.timings.total * 1e3)
        if ev.proposed > 0:
            self.spec_rounds += 1
            self.proposed += ev.proposed
            self.accepted += ev.accepted
            # Positions are verified in order; the first rejection ends the round, so position
            # i (0-based) is reached when every draft before it was accepted.
            reached = min(ev.proposed, ev.accepted + 1)
            while len(self.reached) < ev.proposed:
                self.reached.append(0)
                self.kept.append(0)
            for i in range(reached):
                self.reached[i] += 1
                if i < ev.accepted:
                    self.kept[i] += 1
        self.k_history.append(ev.proposed)
        self.accepted_history.append(ev.accepted)
        if ev.tv is not None:
            self.tv_sum += ev.tv
            self.tv_count += 1

    @property
    def last(self) -> RoundEvent | None:
        return self.rounds[-1] if self.rounds else None

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.proposed if self.proposed else None

    @property
    def per_position(self) -> list[float | None]:
        """P(draft i accepted | draft i was verified), for each position 1..k_max seen."""
        return [k / r if r else None for k, r in zip(self.kept, self.reached, strict=True)]

    @property
    def mean_accepted_length(self) -> float | None:
        return self.accepted / self.spec_rounds if self.spec_rounds else None

    @property
    def tokens_per_round(self) -> float | None:
        return self.tokens / len(self.rounds) if self.rounds else None

    @property
    def mean_tv(self) -> float | None:
        return self.tv_sum / self.tv_count if self.tv_count else None

    @property
    def traced(self) -> bool:
        return any(ev.traced for ev in self.rounds)

    def share(self, phase: str) -> float:
        """Fraction of traced time spent in `phase`."""
        denom = sum(self.phases[p].total for p in SHOWN_PHASES)
        return self.phases[phase].total / denom if denom else 0.0
