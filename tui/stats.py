"""RoundStats: the numbers the side panels show, folded from RoundEvents as they arrive.

Kept apart from the widgets so a panel redraw reads ready numbers (no pass over every round)
and so a recorded profile's rounds can be replayed into the same panels.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from core.events import PHASES, RoundEvent, RunSummary, phase_shares
from core.primitives.acceptance import PositionTally

# "comm" is nonzero only for a target sharded over ranks (core/runtime/distributed.py); see phases_shown
SHOWN_PHASES = PHASES


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


@dataclass(frozen=True)
class SourceRow:
    """One draft source as the Acceptance panel lists it ("none": the plain target steps)."""

    name: str
    rounds: int
    proposed: int
    hit_rate: float | None  # its rounds over the speculative-mode rounds
    acceptance: float | None
    mean_accepted_length: float | None

    @property
    def drafts_per_round(self) -> float | None:
        """Proposals per round in which this source proposed."""
        return self.proposed / self.rounds if self.rounds and self.name != "none" else None


@dataclass
class SourceStats:
    """Per draft source: how often it proposed, how much, and how much of it survived.

    Kept per run (in RoundStats) and per session (by the app): with hybrid drafting the
    lookup and the model take turns, and one acceptance over both hides which one pays.
    """

    tallies: dict[str, PositionTally] = field(default_factory=dict)
    plain_steps: int = 0  # speculative-mode rounds where no source proposed (target steps)
    last_copy: RoundEvent | None = None  # the last round that kept copied tokens

    def observe(self, ev: RoundEvent, speculative: bool) -> None:
        """Count a round; `speculative` says whether it ran in speculative mode."""
        if ev.source and ev.proposed:
            self.tallies.setdefault(ev.source, PositionTally()).observe(ev.proposed, ev.accepted)
        elif speculative:
            self.plain_steps += 1
        if ev.copied_from is not None and any(t.origin == "copied" for t in ev.tokens):
            self.last_copy = ev

    @property
    def speculative_rounds(self) -> int:
        return sum(t.rounds for t in self.tallies.values()) + self.plain_steps

    def hit_rate(self, name: str) -> float | None:
        """The source's rounds over the speculative-mode rounds (for the lookup: how often the
        conversation repeated itself enough to copy)."""
        total = self.speculative_rounds
        rounds = self.plain_steps if name == "none" else self.tallies[name].rounds
        return rounds / total if total else None

    def rows(self) -> list[SourceRow]:
        """Sources in the order first seen, then the plain target steps if any."""
        out = [
            SourceRow(name, t.rounds, t.proposed, self.hit_rate(name), t.acceptance,
                      t.mean_accepted_length)
            for name, t in self.tallies.items()
        ]
        if self.plain_steps:
            out.append(SourceRow("none", self.plain_steps, 0, self.hit_rate("none"), None, None))
        return out


@dataclass
class RoundStats:
    """Everything folded from one run's rounds (reset when a new run starts)."""

    rounds: list[RoundEvent] = field(default_factory=list)
    phases: dict[str, PhaseStat] = field(
        default_factory=lambda: {p: PhaseStat() for p in (*SHOWN_PHASES, "total")}
    )
    tokens: int = 0
    # The one per-position count (core.primitives.acceptance); k_max keeps positions proposed but never
    # reached on screen, so a panel shows "pos 4  -  n=0" rather than hiding that k was 4.
    tally: PositionTally = field(default_factory=PositionTally)
    k_max: int = 0
    k_history: list[int] = field(default_factory=list)
    accepted_history: list[int] = field(default_factory=list)
    tv_sum: float = 0.0
    tv_count: int = 0
    sources: SourceStats = field(default_factory=SourceStats)
    summary: RunSummary | None = None

    @classmethod
    def from_rounds(cls, rounds: Iterable[RoundEvent], summary: RunSummary | None) -> RoundStats:
        stats = cls()
        for ev in rounds:
            stats.add(ev)
        stats.summary = summary
        if summary is not None and "none" in summary.per_source:
            # A recorded round does not say its mode; the summary counted the target steps.
            stats.sources.plain_steps = int(summary.per_source["none"].get("rounds", 0))
        return stats

    def add(self, ev: RoundEvent, speculative: bool | None = None) -> None:
        """Fold one round in; `speculative` (default: whether a source proposed) tells a plain
        target step of speculative mode from a target-only round."""
        self.rounds.append(ev)
        self.sources.observe(ev, bool(ev.source) if speculative is None else speculative)
        self.tokens += len(ev.tokens)
        if ev.traced:
            for p in SHOWN_PHASES:
                self.phases[p].add(getattr(ev.timings, p) * 1e3)
        self.phases["total"].add(ev.timings.total * 1e3)
        self.tally.observe(ev.proposed, ev.accepted)
        self.k_max = max(self.k_max, ev.proposed)
        self.k_history.append(ev.proposed)
        self.accepted_history.append(ev.accepted)
        if ev.tv is not None:
            self.tv_sum += ev.tv
            self.tv_count += 1

    @property
    def last(self) -> RoundEvent | None:
        return self.rounds[-1] if self.rounds else None

    @property
    def proposed(self) -> int:
        """Drafts proposed over the run."""
        return self.tally.proposed

    @property
    def accepted(self) -> int:
        """Drafts accepted over the run."""
        return self.tally.accepted

    @property
    def spec_rounds(self) -> int:
        """Rounds that proposed at least one draft."""
        return self.tally.rounds

    @property
    def reached(self) -> list[int]:
        """Per draft position 1..k_max: times it was verified (0 where never reached)."""
        return self.tally.tries + [0] * (self.k_max - len(self.tally.tries))

    @property
    def kept(self) -> list[int]:
        """Per draft position 1..k_max: times it was accepted."""
        return self.tally.hits + [0] * (self.k_max - len(self.tally.hits))

    @property
    def acceptance(self) -> float | None:
        """Accepted over proposed drafts."""
        return self.tally.acceptance

    @property
    def per_position(self) -> list[float | None]:
        """P(draft i accepted | draft i was verified), for each position 1..k_max seen."""
        rates = self.tally.rates()
        return rates + [None] * (self.k_max - len(rates))

    @property
    def mean_accepted_length(self) -> float | None:
        """Accepted drafts per round that proposed any."""
        return self.tally.mean_accepted_length

    @property
    def tokens_per_round(self) -> float | None:
        return self.tokens / len(self.rounds) if self.rounds else None

    @property
    def mean_tv(self) -> float | None:
        return self.tv_sum / self.tv_count if self.tv_count else None

    @property
    def traced(self) -> bool:
        return any(ev.traced for ev in self.rounds)

    def phases_shown(self) -> tuple[str, ...]:
        """SHOWN_PHASES less comm while no collective was timed (any run on one process)."""
        return tuple(p for p in SHOWN_PHASES if p != "comm" or self.phases["comm"].total > 0)

    def share(self, phase: str) -> float:
        """Fraction of traced time spent in `phase` (core.events.phase_shares; 0 untraced)."""
        shares = phase_shares({p: self.phases[p].total for p in SHOWN_PHASES})
        return 0.0 if shares is None else shares[phase]
