"""One arm's measured rate for the guard (core/cost/guard.py): tokens committed per second of
its rounds, with how sure that rate is.

Its own module so the guard reads as its law and this as its statistics. Two windows: the
recent one (`DECAY`, about the last 10 rounds) ranks sources and is what a probe starts
afresh; the long one (`RatioEvidence`, `LONG_DECAY`: about 66 rounds by effective count) is
what a stop may also rest on. A lookup's rounds at T = 0.7 commit 1 to 20 tokens, so ten rounds
cannot tell a source at 0.7x of target steps from one that pays: on the H200 the default's
lookup ran at 0.4-0.7x of target steps over whole requests and was still asked at their end
(docs/benchmarks/data/h200-2026-12-02-s13).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DECAY = 0.9  # weight the past keeps per new round of the same arm: about the last 10 rounds
PRIOR_SD = 0.3  # a round's rate varies by about 30% of its mean until its rounds say otherwise
LONG_DECAY = 0.97  # the long window: (1 + d) / (1 - d) = about 66 rounds by effective count
LONG_MIN = 8.0  # effective rounds before the long window may stop a source
LONG_PRIOR_CV = 1.0  # a round's rate varies by about its mean until the rounds say otherwise
LONG_PRIOR_ROUNDS = 4.0  # ... worth this many rounds


@dataclass
class RatioEvidence:
    """Tokens over seconds of an arm's rounds, decayed sums, with the standard error of that
    ratio (the delta method: each round's residual t - R s): rounds of equal seconds that
    commit 1 or 20 tokens give a wide error, a steady source a narrow one. Sums of squares
    carry the squared weights, so the error counts rounds by their effective number."""

    w1: float = 0.0  # sum of weights
    w2: float = 0.0  # sum of squared weights
    t: float = 0.0
    s: float = 0.0
    tt: float = 0.0  # squared-weight sums of t^2, t s, s^2
    ts: float = 0.0
    ss: float = 0.0
    last_t: float = 0.0  # the newest round (weight 1), which a later charge lengthens
    last_s: float = 0.0
    rounds: int = 0  # rounds added, undecayed

    def add(self, tokens: float, seconds: float) -> None:
        d, d2 = LONG_DECAY, LONG_DECAY * LONG_DECAY
        self.w1, self.w2 = d * self.w1 + 1.0, d2 * self.w2 + 1.0
        self.t, self.s = d * self.t + tokens, d * self.s + seconds
        self.tt = d2 * self.tt + tokens * tokens
        self.ts = d2 * self.ts + tokens * seconds
        self.ss = d2 * self.ss + seconds * seconds
        self.last_t, self.last_s = tokens, seconds
        self.rounds += 1

    def charge(self, seconds: float) -> None:
        """The newest round cost `seconds` more (the pipeline break it caused)."""
        if self.rounds == 0:
            return
        t, s = self.last_t, self.last_s
        self.s += seconds
        self.ts += t * seconds
        self.ss += (s + seconds) ** 2 - s * s
        self.last_s = s + seconds

    def age(self, rounds: int) -> None:
        """Decay every sum as if `rounds` rounds of weight 0 had come since."""
        if rounds <= 0:
            return
        f = LONG_DECAY**rounds
        f2 = f * f
        self.w1, self.t, self.s = f * self.w1, f * self.t, f * self.s
        self.w2, self.tt, self.ts, self.ss = f2 * self.w2, f2 * self.tt, f2 * self.ts, f2 * self.ss
        self.last_t = self.last_s = 0.0  # a charge now belongs to no round here

    @property
    def rate(self) -> float | None:
        return self.t / self.s if self.s > 0.0 and self.rounds else None

    @property
    def effective(self) -> float:
        """The rounds this evidence counts, by effective number (w1^2 / w2)."""
        return self.w1 * self.w1 / self.w2 if self.w2 > 0.0 else 0.0

    def upper(self, z: float) -> float | None:
        """The rate plus z standard errors; None below LONG_MIN effective rounds (the
        recent window judges those). The rounds' relative variance starts from a prior of
        LONG_PRIOR_CV^2 worth LONG_PRIOR_ROUNDS rounds: a lookup whose rounds pay commits
        a single token in a third of them, so a few equal rounds prove nothing."""
        rate, n = self.rate, self.effective
        if rate is None or rate <= 0.0 or n < LONG_MIN:
            return None
        seen = max(self.tt - 2.0 * rate * self.ts + rate * rate * self.ss, 0.0) / self.s**2
        one = seen * n / rate**2  # one round's relative variance, as seen
        cv2 = (one * n + LONG_PRIOR_CV**2 * LONG_PRIOR_ROUNDS) / (n + LONG_PRIOR_ROUNDS)
        return rate + z * rate * (cv2 / n) ** 0.5


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
    # This run's stops of the source and the offers it made while stopped (the guard's
    # `_stop` and `asks`): whether a request lost a copy-rich stretch to a stop shows here
    # without a trace (a greedy rewrite's requests read 0.27 s or 0.77 s in one bench).
    run_stops: int = 0
    run_refused: int = 0
    # Per-round rates, decayed alike: their spread says how sure the rate is (a lookup's
    # rounds commit 1 or 9 tokens; one unlucky stretch must not stop a source that pays).
    weight: float = 0.0
    rate_sum: float = 0.0
    rate_sq: float = 0.0
    long: RatioEvidence = field(default_factory=RatioEvidence)

    def add(self, tokens: int, seconds: float) -> None:
        self.tokens = DECAY * self.tokens + tokens
        self.seconds = DECAY * self.seconds + seconds
        self.rounds += 1
        self.run_rounds += 1
        self._recent += 1
        self.total_tokens += tokens
        self.total_seconds += seconds
        self.long.add(tokens, seconds)
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
        self.run_stops = self.run_refused = 0

    def fresh(self, idle: int = 0) -> None:
        """Forget the recent estimate (not the run's totals): a probe judges the source on
        what it does now, not on the stretch that stopped it. The long window is aged by the
        `idle` rounds the source sat out (other arms' rounds): after a short stop its past
        still counts, so a probe as slow as before is stopped again at once; after a long
        one it is mostly forgotten, so a later copy-rich stretch is judged on its own."""
        self.tokens = self.seconds = self.weight = self.rate_sum = self.rate_sq = 0.0
        self._recent = 0
        self.long.age(idle)

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
        self.long.charge(seconds)

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
