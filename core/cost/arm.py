"""One arm's measured rate for the guard (core/cost/guard.py): tokens committed per second of
its rounds, with how sure that rate is.

Its own module so the guard reads as its law and this as its statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

DECAY = 0.9  # weight the past keeps per new round of the same arm: about the last 10 rounds
PRIOR_SD = 0.3  # a round's rate varies by about 30% of its mean until its rounds say otherwise


@dataclass
class ArmRate:
    """Tokens committed per second of one arm's rounds, a decayed sum (recent rounds count
    most, so a stretch that changes what pays is noticed within a few rounds)."""

    tokens: float = 0.0
    seconds: float = 0.0
    rounds: int = 0  # measured rounds, undecayed, over every run of this guard (evidence)
    total_tokens: int = 0  # this run's (zeroed by begin_run): what the reports show
    total_seconds: float = 0.0
    run_rounds: int = 0
    # Per-round rates, decayed alike: their spread says how sure the rate is (a lookup's
    # rounds commit 1 or 9 tokens; one unlucky stretch must not stop a source that pays).
    weight: float = 0.0
    rate_sum: float = 0.0
    rate_sq: float = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        self.tokens = DECAY * self.tokens + tokens
        self.seconds = DECAY * self.seconds + seconds
        self.rounds += 1
        self.run_rounds += 1
        self._recent += 1
        self.total_tokens += tokens
        self.total_seconds += seconds
        if seconds > 0.0:
            r = tokens / seconds
            self.weight = DECAY * self.weight + 1.0
            self.rate_sum = DECAY * self.rate_sum + r
            self.rate_sq = DECAY * self.rate_sq + r * r

    @property
    def recent(self) -> int:
        """Rounds since the recent estimate was last started afresh (a probe starts it)."""
        return self._recent

    _recent: int = 0

    def begin_run(self) -> None:
        """A new request: its totals start at zero, the decayed evidence stays."""
        self.total_tokens, self.total_seconds, self.run_rounds = 0, 0.0, 0

    def fresh(self) -> None:
        """Forget the recent estimate (not the run's totals): a probe judges the source on
        what it does now, not on the stretch that stopped it."""
        self.tokens = self.seconds = self.weight = self.rate_sum = self.rate_sq = 0.0
        self._recent = 0

    @property
    def spread(self) -> float:
        """The standard error of the recent per-round rate. Its variance starts from a prior
        of (PRIOR_SD x the mean)^2 worth one round: two equal rounds are not proof that
        a source's rounds never vary (a lookup at 50% acceptance commits 1 or 2 tokens)."""
        if self.weight <= 0.0:
            return 0.0
        mean = self.rate_sum / self.weight
        seen = max(self.rate_sq / self.weight - mean * mean, 0.0) * self.weight
        var = (seen + (PRIOR_SD * mean) ** 2) / (self.weight + 1.0)
        return (var / self.weight) ** 0.5

    def charge(self, seconds: float) -> None:
        """Seconds a later round paid because of this arm's last round (a pipeline break)."""
        self.seconds += seconds
        self.total_seconds += seconds

    @property
    def rate(self) -> float | None:
        """Recent tokens per second, None before any measured round."""
        if self.rounds == 0 or self.seconds <= 0.0:
            return None
        return self.tokens / self.seconds

    @property
    def mean_rate(self) -> float | None:
        """This run's tokens per second of this arm (what the reports show); the carried
        recent rate when this run measured none of its rounds."""
        if self.run_rounds == 0 or self.total_seconds <= 0.0:
            return self.rate
        return self.total_tokens / self.total_seconds
