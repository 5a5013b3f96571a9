"""Per-position acceptance: one definition of P(draft i accepted | draft i was reached).

Draft i is verified only when every draft before it was accepted, so a round that proposed
k and kept n reached positions 0..min(n, k-1) and kept 0..n-1. The product of these
conditional rates is the accepted-length law the cost model multiplies; the engine's summary,
the bench, the policies and the app all count through `PositionTally`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PositionTally:
    """Tries and hits per draft position, plus the round totals they come from."""

    tries: list[int] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    rounds: int = 0  # rounds that proposed at least one draft
    proposed: int = 0
    accepted: int = 0

    def observe(self, proposed: int, accepted: int) -> None:
        """Count one round; a round that proposed nothing teaches nothing."""
        if proposed <= 0:
            return
        self.rounds += 1
        self.proposed += proposed
        self.accepted += accepted
        reached = min(accepted + 1, proposed)
        self._grow(reached)
        for i in range(reached):
            self.tries[i] += 1
            self.hits[i] += i < accepted

    def merge(self, other: PositionTally) -> None:
        """Add another tally's counts (requests of one bench row, say)."""
        self._grow(len(other.tries))
        for i, (t, h) in enumerate(zip(other.tries, other.hits, strict=True)):
            self.tries[i] += t
            self.hits[i] += h
        self.rounds += other.rounds
        self.proposed += other.proposed
        self.accepted += other.accepted

    def _grow(self, n: int) -> None:
        while len(self.tries) < n:
            self.tries.append(0)
            self.hits.append(0)

    def rates(self) -> list[float | None]:
        """P(accept i | reached i) per position seen so far; None where never reached."""
        return [h / t if t else None for h, t in zip(self.hits, self.tries, strict=True)]

    def reached_rates(self) -> tuple[float, ...]:
        """The rates of the positions reached at least once (what summaries store)."""
        return tuple(h / t for h, t in zip(self.hits, self.tries, strict=True) if t)

    def summary(self) -> dict[str, object]:
        """The plain-dict view reports and RunSummary.per_source store."""
        return {
            "rounds": self.rounds,
            "proposed": self.proposed,
            "accepted": self.accepted,
            "acceptance": self.acceptance,
            "mean_accepted_length": self.mean_accepted_length,
            "per_position_acceptance": list(self.reached_rates()),
        }

    @property
    def acceptance(self) -> float | None:
        """Accepted over proposed drafts."""
        return self.accepted / self.proposed if self.proposed else None

    @property
    def mean_accepted_length(self) -> float | None:
        """Accepted drafts per round that proposed any."""
        return self.accepted / self.rounds if self.rounds else None
