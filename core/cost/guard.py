"""The measured guard: a draft source earns its rounds by the speed it measured in this run.

Why: the cost-aware policy prices a round from the verify-cost curve, an isolated
verification. A real drafting round also breaks the target's pipeline, syncs the host and
runs its own host work; on the H200 the default (hybrid, cost-aware) was predicted at
1.07-1.11x and measured at 0.62-0.97x of target-only (issue 28). A guard built on the same
predictions cannot hold the floor, so this one reads only the clock.

Every arm keeps its own measured rate in the running generation: tokens committed per second
of its rounds, end to end (the engine's untraced round clock, the host work before the round
and its catch-up included). The arms are each draft source by name and `TARGET`, plain
target steps (the zero-draft arm). A drafting round breaks the pipeline: the target step
after it is read without a step queued behind it, so what that step costs above a pipelined
step is charged to the source that drafted (`observe_step(..., after=source)`), and the
target arm learns its rate from pipelined steps only.

The law (tests/core/cost/test_guard.py):
- a source with fewer than `min_rounds` measured rounds is asked (the policy's curve is the
  prior before there is evidence), so a source that pays is used from the start;
- a source whose rate falls below the target arm's stops being asked ("not asked: slower
  than target steps"); it is asked again (a probe) after `probe_gap` rounds,
  the gap doubling after each probe that stays slower (capped at `max_gap`) and halving after
  one that pays, so a later copy-rich stretch is still found. A probe forgets the stretch
  that stopped the source and judges it afresh after `min_rounds` rounds; a source is only
  stopped when its rate is below the target's by more than twice its rounds' spread (a lookup's
  rounds commit 1 or 9 tokens: one unlucky stretch must not stop a source that pays).
  Gaps of 32, 64, 128, ... rounds are 3 probes (6 rounds) in 256 and 2% of rounds from
  ~500 on;
- before the target arm has evidence, it is probed itself (up to `min_rounds` pipelined
  steps), so a source is never judged against nothing.
The loss against target-only is therefore bounded by the rounds the schedule asks a slow
source for: `min_rounds` at the start and `min_rounds` per probe (more only where its rate
sits within noise of the target's, where each such round costs little).
- where several measured sources offer one round, the faster goes first (`rank`): the
  hybrid is the better of its parts.

Host arithmetic only: no device call, no sync, so a round keeps its one host sync.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TARGET = "target"  # the zero-draft arm: plain target steps
SLOWER = "not asked: slower than target steps"
Z = 2.0  # standard errors below the target's rate before a source is stopped: at one, a
# source 1.3x faster whose rounds commit 1-4 tokens was stopped by chance in most runs
PRIOR_SD = 0.3  # a round's rate varies by about 30% of its mean until its rounds say otherwise
DECAY = 0.9  # weight the past keeps per new round of the same arm: about the last 10 rounds


@dataclass
class ArmRate:
    """Tokens committed per second of one arm's rounds, a decayed sum (recent rounds count
    most, so a stretch that changes what pays is noticed within a few rounds)."""

    tokens: float = 0.0
    seconds: float = 0.0
    rounds: int = 0  # measured rounds, undecayed (the evidence count)
    total_tokens: int = 0
    total_seconds: float = 0.0
    # Per-round rates, decayed alike: their spread says how sure the rate is (a lookup's
    # rounds commit 1 or 9 tokens; one unlucky stretch must not stop a source that pays).
    weight: float = 0.0
    rate_sum: float = 0.0
    rate_sq: float = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        self.tokens = DECAY * self.tokens + tokens
        self.seconds = DECAY * self.seconds + seconds
        self.rounds += 1
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
        """The whole run's tokens per second of this arm (what the reports show)."""
        if self.rounds == 0 or self.total_seconds <= 0.0:
            return None
        return self.total_tokens / self.total_seconds


@dataclass
class _Bench:
    """A source the guard stopped: the round it may be probed at, and the current gap."""

    until: int
    gap: int


@dataclass
class RateGuard:
    """Which sources may draft the next round, from the rates measured in this run."""

    min_rounds: int = 2
    probe_gap: int = 32
    max_gap: int = 1024
    arms: dict[str, ArmRate] = field(default_factory=dict)
    benched: dict[str, _Bench] = field(default_factory=dict)
    round: int = 0  # rounds observed so far (any arm)
    probes: int = 0  # times a stopped source was asked again
    _gaps: dict[str, int] = field(default_factory=dict)  # per source, its next bench's gap
    _probation: set[str] = field(default_factory=set)  # sources being probed again

    def arm(self, name: str) -> ArmRate:
        return self.arms.setdefault(name, ArmRate())

    def target_probe_due(self) -> bool:
        """Whether the next round should be a plain target step to measure the zero-draft
        arm: a source has been measured and there is no pipelined target evidence yet."""
        if self.arm(TARGET).rounds >= self.min_rounds:
            return False
        return any(a.rounds > 0 for n, a in self.arms.items() if n != TARGET)

    def asks(self, source: str) -> bool:
        """Whether `source` may draft the next round (the policy still chooses its k).
        A stopped source whose probe is due is asked again, judged afresh after
        `min_rounds` rounds: a probe is that many rounds."""
        bench = self.benched.get(source)
        if bench is None:
            return True
        if self.round < bench.until:
            return False
        del self.benched[source]
        self.arm(source).fresh()
        self._probation.add(source)
        self.probes += 1
        return True

    def rank(self, source: str) -> float:
        """Sort key among the sources offering one round (smaller first): a source still
        being measured keeps its place in front (it needs the evidence), then the faster
        measured rate first, so a hybrid takes the better of its parts where both offer
        (a 2-token copy is not preferred to a model drafting 2.4 tokens a step)."""
        arm = self.arms.get(source)
        rate = arm.rate if arm is not None and arm.recent >= self.min_rounds else None
        return float("-inf") if rate is None else -rate

    def observe_round(self, source: str, tokens: int, seconds: float) -> None:
        """A drafting round of `source`: its committed tokens and end-to-end seconds."""
        self.round += 1
        self.arm(source).add(tokens, seconds)
        self._judge(source)

    def observe_step(self, seconds: float, *, after: str | None = None) -> None:
        """A plain target step (one token). `after`: the source whose drafting round came
        just before, so this step ran without a queued step behind it; what it cost above a
        pipelined step is that source's, and the step teaches the target arm nothing."""
        self.round += 1
        target = self.arm(TARGET)
        if after is None:
            target.add(1, seconds)
            return
        rate = target.rate
        if rate is not None and after in self.arms:
            self.arms[after].charge(max(seconds - 1.0 / rate, 0.0))

    def _judge(self, source: str) -> None:
        arm, target = self.arms[source], self.arms.get(TARGET)
        ours, theirs = arm.rate, target.rate if target is not None else None
        if ours is None or theirs is None or arm.recent < self.min_rounds:
            return
        if ours + Z * arm.spread >= theirs:  # not slower, beyond its rounds' own spread
            if source in self._probation:  # a probe that paid: the next bench comes sooner
                self._probation.discard(source)
                self._gaps[source] = max(self.probe_gap, self._gaps.get(source, 0) // 2)
            return
        self._probation.discard(source)
        gap = self._gaps.get(source, self.probe_gap)
        self.benched[source] = _Bench(self.round + gap, gap)
        self._gaps[source] = min(2 * gap, self.max_gap)

    def verdict(self, source: str) -> str:
        """What the guard decided about `source`, in words for the app and the reports."""
        if source in self.benched:
            return SLOWER
        arm = self.arms.get(source)
        if arm is None or arm.recent < self.min_rounds or TARGET not in self.arms:
            return "measuring"
        return "asked: faster than target steps"

    def report(self) -> dict[str, dict[str, Any]]:
        """Per arm: its measured rate over the run, its decision, and, for a source, the
        ratio to plain target steps (RunSummary.per_source carries it)."""
        target = self.arms.get(TARGET)
        base = target.mean_rate if target is not None else None
        out: dict[str, dict[str, Any]] = {}
        for name, arm in self.arms.items():
            rate = arm.mean_rate
            row: dict[str, Any] = {"measured_tok_s": rate, "measured_rounds": arm.rounds}
            if name != TARGET:
                row["vs_target"] = rate / base if rate is not None and base else None
                row["guard"] = self.verdict(name)
            out[name] = row
        return out


def guard_lines(per_source: dict[str, dict[str, Any]]) -> list[str]:
    """The guard's decision per source, in words, from a RunSummary's `per_source`: its
    measured rate against plain target steps, and "not asked: slower than target steps"
    where the guard stopped it. Empty when the run was not guarded. One wording for the
    app's Rounds panel, `specdec-tui chat` and the bench's report."""
    target = per_source.get("none", {}).get("measured_tok_s")
    out = []
    for name, row in per_source.items():
        if name == "none" or "guard" not in row:
            continue
        rate, ratio = row.get("measured_tok_s"), row.get("vs_target")
        measured = "-" if rate is None else f"{rate:.0f} tok/s"
        against = "" if ratio is None else f", {ratio:.2f}x target steps"
        out.append(f"{name}: {measured}{against}: {row['guard']}")
    if out and target is not None:
        out.append(f"target steps: {target:.0f} tok/s")
    return out
