"""The measured guard: a draft source earns its rounds by the speed it measured.

The cost-aware policy prices a round from the verify-cost curve, an isolated verification; a
real round also breaks the target's pipeline, syncs the host and runs its own host work. So
the guard reads only the clock (docs/decisions/0006-measured-guard.md says why and from what).

Its arms are each draft source by name and `TARGET`, plain target steps. Each keeps its
measured rate, tokens committed per second of its rounds end to end (`observe_round`: the
host work before the round and its catch-up included; core/cost/arm.py keeps the statistics).
The step after a drafting round runs with no step queued behind it, so what it costs above a
pipelined step is charged to the source that drafted (`observe_step(..., after=source)`) and
the target arm learns only from pipelined steps.

What it decides (`asks`, `rank`, `target_probe_due`):
- a source with fewer than `min_rounds` measured rounds is asked;
- a source is stopped when its recent rate is below the target arm's by more than twice its
  rounds' spread, or its long window is below it by more than `Z` standard errors; it is
  probed again after a gap (`probe_gap` rounds, more where its probes' measured loss would pass
  `PROBE_SHARE` of the target steps between them: `_loss_gap`) that doubles after each probe
  that stays slower, up to `max_gap`, and halves after one that pays; a probe judges it afresh
  after `min_rounds` rounds;
- the target arm is measured first (up to `min_rounds` pipelined steps), so no source is
  judged against nothing;
- of several measured sources offering one round, the faster goes first;
- an observation counts as at most `STALL` times what was expected of it;
- before any evidence, a source whose calibrated best round (`prior`) cannot beat a target
  step by `PAY_MARGIN` is not asked until its first probe (`_prior_stops`).
So the loss against target-only is bounded by the rounds the schedule asks a slow source for.

The engine keeps one guard per settings across requests and chat turns
(core/cost/guard_memory.py). `begin_run()` zeroes only a run's own totals: the decayed rates
(`DECAY`), the stops and the probe schedule go on, and each stopped source's next probe comes
within its `_loss_gap`, since a new request may be a new workload.
Host arithmetic only (no device call, no sync). The law: tests/core/cost/test_guard.py and
tests/core/cost/test_guard_memory.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.cost.arm import DECAY, ArmRate

TARGET = "target"  # the zero-draft arm: plain target steps
SLOWER = "not asked: slower than target steps"
FASTER = "asked: faster than target steps"
# Asked, its recent rate below the target's but not by more than Z spreads: the words must not
# say "faster" of a source at 0.38-0.95x of target steps (docs/decisions/0006-measured-guard.md)
WITHIN = "asked: slower than target steps, within its rounds' spread"
Z = 2.0  # standard errors below the target's rate before a source is stopped: at one, a
# source 1.3x faster whose rounds commit 1-4 tokens was stopped by chance in most runs
# How much faster than the curve's single-row forward (one forward and a host sync) a
# pipelined target step may run: a prior within this margin of that forward waits for the
# measured step before it decides
PRIOR_MARGIN = 2.0
# Pipelined steps the prior waits for (a stretch's first step has no step queued before it,
# so two alone read the step dearer than it runs)
PRIOR_STEPS = 4
# The share of a request's rounds the probes of a stopped source may lose at most, when a new
# request starts (it may be a new workload: begin_run brings a cheap source's probe closer)
PROBE_SHARE = 0.02
# How much faster than a target step a source's calibrated best round (every draft accepted)
# must be for the source to be asked before its first probe: the best round is a bound no real
# round reaches (a best round at 1.1x a step measured 0.2-0.4x: decisions/0006-measured-guard.md)
PAY_MARGIN = 1.2
# A stall is not a source's speed (a kernel compiled or a plan built at first use, a pause of
# the host): an observation counts as at most STALL times the largest of a target step, the
# round the calibration priced for its source (`Prior.seconds`) and the arm's own recent round,
# so a source whose rounds are all slow still reads slow, and one slow second cannot outweigh a
# hundred millisecond rounds in the decayed sums. A draft's catch-up is counted whole, and a
# round that built an attention plan is left out (`observe_round`). Not covered: a stall of
# another cause in a source's first two rounds can still stop it for the gap its cut loss
# implies. (A lookup read at 0.09-0.18x where it ran at 2.3-2.7x: decisions/0006-measured-guard.md)
STALL = 8.0


@dataclass(frozen=True)
class Prior:
    """What the calibration says of a source before its rounds say anything: its best round
    (`tokens` committed in `seconds`, full acceptance at the k that commits most tokens a
    second: its draft price, the verification of k + 1 rows and the acceptance) and one plain
    target step (`step_s`, the curve's single-row forward)."""

    tokens: float
    seconds: float
    step_s: float


@dataclass
class _Bench:
    """A source the guard stopped: the round it may be probed at, and the current gap."""

    until: int
    gap: int


@dataclass
class RateGuard:
    """Which sources may draft the next round, from the rates measured so far (this run and
    the earlier runs of the same pair and settings, decayed)."""

    min_rounds: int = 2
    probe_gap: int = 32
    max_gap: int = 1024
    # source -> its Prior (None: no calibrated price): consulted once per source, before the
    # source has a measured round of its own
    prior: Callable[[str], Prior | None] | None = None
    arms: dict[str, ArmRate] = field(default_factory=dict)
    benched: dict[str, _Bench] = field(default_factory=dict)
    round: int = 0  # rounds observed so far (any arm, every run)
    probes: int = 0  # times a stopped source was asked again
    runs: int = 0  # begin_run calls: the requests this guard has seen
    by_prior: set[str] = field(default_factory=set)  # sources the prior stopped (until probed)
    _gaps: dict[str, int] = field(default_factory=dict)  # per source, its next bench's gap
    _probation: set[str] = field(default_factory=set)  # sources being probed again
    _priored: set[str] = field(default_factory=set)  # sources the prior was asked about
    _target_wanted: bool = False  # a prior waits on the target arm's measured rate
    _break_sum: float = 0.0  # decayed seconds a step after a drafting round paid extra
    _break_weight: float = 0.0
    _earlier: dict[str, int] = field(default_factory=dict)  # per arm, rounds before this run
    _last_round: dict[str, int] = field(default_factory=dict)  # per source, `round` at its last
    _prior_step: float | None = None  # a Prior's step_s, kept when a prior is consulted
    _priced: dict[str, float] = field(default_factory=dict)  # per source, its Prior.seconds
    # per source, its rounds whose verification built a new attention plan (left out)
    plan_rounds: dict[str, int] = field(default_factory=dict)

    def arm(self, name: str) -> ArmRate:
        """`name`'s arm, made on first use (looked up first: asked ~3 times a plain step)."""
        if (arm := self.arms.get(name)) is None:
            arm = self.arms[name] = ArmRate()
        return arm

    def begin_run(self) -> None:
        """A new request (or chat turn) with the same pair and settings: its totals start at
        zero; rates, stops and the probe schedule carry on."""
        self.runs += 1
        self._earlier = {name: arm.rounds for name, arm in self.arms.items()}
        for arm in self.arms.values():
            arm.begin_run()
        for name, bench in self.benched.items():  # a new request may be a new workload
            gap = self._loss_gap(name)
            bench.until = min(bench.until, self.round + (self.max_gap if gap is None else gap))

    def _loss_gap(self, source: str) -> int | None:
        """The fewest rounds between probes that keep a probe's measured loss within
        PROBE_SHARE of the target steps in between (at least `probe_gap`, at most `max_gap`;
        None before the source and the target have measured rounds): a cheap source (a
        lookup whose rounds cost little more than the steps they replace) is probed again
        early in each new request, where a new prompt may copy well; a dear one (a model
        round of several steps' time, its catch-up included) keeps a long gap. The loss is
        the bound the probes are held to: a stop's gap is never shorter than this."""
        arm, target = self.arms.get(source), self.arms.get(TARGET)
        rate = target.rate if target is not None else None
        if arm is None or rate is None or arm.weight <= 0.0:
            return None
        per_round = arm.seconds / arm.weight - (arm.tokens / arm.weight) / rate
        loss = self.min_rounds * max(per_round, 0.0)  # seconds a probe costs over steps
        return max(self.probe_gap, min(self.max_gap, math.ceil(loss * rate / PROBE_SHARE)))

    @property
    def break_s(self) -> float:
        """The measured pipeline break: what a target step right after a drafting round cost
        above a pipelined one (decayed mean; 0 before one was seen)."""
        return self._break_sum / self._break_weight if self._break_weight > 0.0 else 0.0

    def target_probe_due(self) -> bool:
        """Whether the next round should be a plain target step to measure the zero-draft
        arm: there is no pipelined target evidence yet, and a source has been measured or its
        prior needs the measured step to decide."""
        need = PRIOR_STEPS if self._target_wanted else self.min_rounds
        if self.arm(TARGET).rounds >= need:
            return False
        return self._target_wanted or any(a.rounds > 0 for n, a in self.arms.items() if n != TARGET)

    def asks(self, source: str) -> bool:
        """Whether `source` may draft the next round (the policy still chooses its k).
        A stopped source whose probe is due is asked again, judged afresh after
        `min_rounds` rounds: a probe is that many rounds. A source the calibration says
        cannot pay is stopped before its first round (`prior`)."""
        bench = self.benched.get(source)
        if bench is None:
            return not self._prior_stops(source)
        if self.round < bench.until:
            self.arm(source).run_refused += 1
            return False
        del self.benched[source]
        self.by_prior.discard(source)
        self.arm(source).fresh(idle=self.round - self._last_round.get(source, self.round))
        self._probation.add(source)
        self.probes += 1
        return True

    def _prior_stops(self, source: str) -> bool:
        """Before `source` has measured rounds: whether its best round, as calibrated, with
        the pipeline break measured so far, commits fewer tokens a second than a plain target
        step. Then it is stopped until its first probe, as if it had measured slower. The
        step is the measured pipelined rate; before there is one, the curve's single-row
        forward, which is dearer: a source that cannot beat even that is stopped, one that
        beats it by more than PRIOR_MARGIN is asked, and in between the target arm is
        measured first (plain steps: no loss against target-only) and the prior asked then."""
        if self.prior is None or source in self._priored:
            return False
        arm = self.arms.get(source)
        p = self.prior(source) if arm is None or arm.rounds == 0 else None
        if p is not None and p.step_s > 0.0:
            self._prior_step = self._prior_step or p.step_s
            self._priced[source] = max(p.seconds, 0.0)
        if p is None or p.tokens <= 0.0 or p.seconds <= 0.0 or p.step_s <= 0.0:
            self._priored.add(source)
            return False
        best = p.tokens / (p.seconds + self.break_s)
        target = self.arms.get(TARGET)
        measured = target.rate if target is not None and target.rounds >= PRIOR_STEPS else None
        lo, hi = PAY_MARGIN, PAY_MARGIN * PRIOR_MARGIN
        if measured is None and lo <= best * p.step_s < hi:
            self._target_wanted = True  # too close to call on the curve's step: measure it
            return True
        self._priored.add(source)
        if best >= PAY_MARGIN * (measured if measured is not None else 1.0 / p.step_s):
            return False
        self._stop(source)
        self.by_prior.add(source)
        return True

    def rank(self, source: str) -> float:
        """Sort key among the sources offering one round (smaller first): a source still
        being measured keeps its place in front (it needs the evidence), then the faster
        measured rate first, so a hybrid takes the better of its parts where both offer
        (a 2-token copy is not preferred to a model drafting 2.4 tokens a step)."""
        arm = self.arms.get(source)
        rate = arm.rate if arm is not None and arm.recent >= self.min_rounds else None
        return float("-inf") if rate is None else -rate

    def step_scale(self) -> float | None:
        """Seconds of a plain target step, the unit a stall is measured in: the measured
        pipelined rate's, else the calibrated single-row forward a prior priced, else None
        (nothing yet says what a stall is: the observation counts as it came)."""
        target = self.arms.get(TARGET)
        rate = target.rate if target is not None and target.rounds >= self.min_rounds else None
        if rate:
            return 1.0 / rate
        return self._prior_step

    def _clamped(self, seconds: float, source: str | None = None) -> float:
        """`seconds` as at most STALL x the largest of a step, `source`'s priced round and its
        arm's recent round (a round), or STALL steps (a plain step, a break)."""
        scale = self.step_scale()
        if scale is None:
            return seconds
        if source is not None:
            arm = self.arms.get(source)
            recent = arm.seconds / arm.weight if arm is not None and arm.weight > 0.0 else 0.0
            scale = max(scale, self._priced.get(source, 0.0), recent)
        return min(seconds, STALL * scale)

    def observe_round(self, source: str, tokens: int, seconds: float,
                      catch_up_s: float = 0.0, new_plan: bool = False) -> None:
        """A drafting round of `source`: its committed tokens and end-to-end seconds (a stall
        counted as STALL times its scale: `_clamped`), plus `catch_up_s`, the seconds its
        draft spent absorbing the tokens since its last round, counted whole: a catch-up
        grows with the tokens it absorbs (a request's first feeds the whole prompt), so no
        scale of a round bounds it, and it is the source's own cost.
        `new_plan`: its verification built an attention plan at a shape new to the process
        (core/dispatch/bucketed.py `took_new_plan`), a cost paid once per shape whatever
        drafts, known exactly: the round is left out of the rates (its catch-up still
        charged, its place in the schedule kept) and counted in `plan_rounds`."""
        self.round += 1
        self._last_round[source] = self.round
        if new_plan:
            self.plan_rounds[source] = self.plan_rounds.get(source, 0) + 1
            if catch_up_s > 0.0 and source in self.arms:
                self.arms[source].charge(catch_up_s)
            return
        self.arm(source).add(tokens, self._clamped(seconds, source) + catch_up_s)
        self._judge(source)

    def observe_step(self, seconds: float, *, after: str | None = None) -> float:
        """A plain target step (one token). `after`: the source whose drafting round came
        just before, so this step ran without a queued step behind it; what it cost above a
        pipelined step is that source's, and the step teaches the target arm nothing.
        Returns those extra seconds (0 for a pipelined step), for the round's policy."""
        self.round += 1
        target = self.arm(TARGET)
        seconds = self._clamped(seconds)
        if after is None:
            target.add(1, seconds)
            return 0.0
        rate = target.rate
        if rate is None or after not in self.arms:
            return 0.0
        extra = max(seconds - 1.0 / rate, 0.0)
        self.arms[after].charge(extra)
        self._break_sum = DECAY * self._break_sum + extra
        self._break_weight = DECAY * self._break_weight + 1.0
        return extra

    def _judge(self, source: str) -> None:
        arm, target = self.arms[source], self.arms.get(TARGET)
        ours, theirs = arm.rate, target.rate if target is not None else None
        if ours is None or theirs is None or arm.recent < self.min_rounds:
            return
        # Not slower beyond its recent rounds' spread, nor beyond the long window's error
        # (enough rounds to tell a 0.7x source from one that pays: core/cost/arm.py):
        upper = arm.long.upper(Z)
        if ours + Z * arm.spread >= theirs and (upper is None or upper >= theirs):
            if source in self._probation:  # a probe that paid: the next bench comes sooner
                self._probation.discard(source)
                self._gaps[source] = max(self.probe_gap, self._gaps.get(source, 0) // 2)
            return
        self._probation.discard(source)
        self._stop(source)

    def _stop(self, source: str) -> None:
        """Not asked for the source's current gap, or longer where its measured probes cost
        more than PROBE_SHARE of the steps between them (`_loss_gap`); the next gap doubles
        (up to max_gap). Doubling alone from 32 rounds gave the H200's model source 5 probes
        in a bench's 1,024 rounds, ~100 ms each with the draft's catch-up: ~10% of the time."""
        gap = max(self._gaps.get(source, self.probe_gap), self._loss_gap(source) or 0)
        self.benched[source] = _Bench(self.round + gap, gap)
        self.arm(source).run_stops += 1
        self._gaps[source] = min(2 * gap, self.max_gap)

    def verdict(self, source: str) -> str:
        """What the guard decided about `source`, in words for the app and the reports."""
        if source in self.benched:
            return SLOWER
        arm = self.arms.get(source)
        target = self.arms.get(TARGET)
        if arm is None or arm.recent < self.min_rounds or target is None:
            return "measuring"
        ours, theirs = arm.rate, target.rate
        return WITHIN if ours is not None and theirs is not None and ours < theirs else FASTER

    def report(self) -> dict[str, dict[str, Any]]:
        """Per arm: its measured rate in this run (the carried rate where this run measured
        none of its rounds), its rounds in this run and before it (`earlier_rounds`: evidence
        carried in from earlier requests of the same settings), its decision, and, for a
        source, the ratio to plain target steps and what stopped it (`basis`: "calibration"
        when the prior did, before any round of its own; RunSummary.per_source carries it)."""
        target = self.arms.get(TARGET)
        base = target.mean_rate if target is not None else None
        out: dict[str, dict[str, Any]] = {}
        names = list(dict.fromkeys([*self.arms, *self.by_prior, *self.plan_rounds]))
        for name in names:
            arm = self.arms.get(name, ArmRate())
            rate = arm.mean_rate
            row: dict[str, Any] = {"measured_tok_s": rate, "measured_rounds": arm.run_rounds,
                                   "earlier_rounds": self._earlier.get(name, 0)}
            if name != TARGET:
                row["plan_rounds"] = self.plan_rounds.get(name, 0)
                row["vs_target"] = rate / base if rate is not None and base else None
                row["guard"] = self.verdict(name)
                row["stops"], row["refused"] = arm.run_stops, arm.run_refused
                if name in self.by_prior:
                    row["basis"] = "calibration"
            out[name] = row
        return out


class Guard(Protocol):
    """What the decode loop asks of a guard: `RateGuard`, or `NULL_GUARD` where no clock
    judges the rounds."""

    def begin_run(self) -> None: ...

    def target_probe_due(self) -> bool: ...

    def asks(self, source: str) -> bool: ...

    def rank(self, source: str) -> float: ...

    def observe_round(self, source: str, tokens: int, seconds: float,
                      catch_up_s: float = 0.0, new_plan: bool = False) -> None: ...

    def observe_step(self, seconds: float, *, after: str | None = None) -> float: ...

    def report(self) -> dict[str, dict[str, Any]]: ...


class NullGuard:
    """The guard of rounds no clock judges (fixed and adaptive k, another machine's curve, a
    sharded target): every source asked, in its router's order; nothing measured or reported."""

    def begin_run(self) -> None:
        pass

    def target_probe_due(self) -> bool:
        return False

    def asks(self, source: str) -> bool:
        return True

    def rank(self, source: str) -> float:
        return 0.0

    def observe_round(self, source: str, tokens: int, seconds: float,
                      catch_up_s: float = 0.0, new_plan: bool = False) -> None:
        pass

    def observe_step(self, seconds: float, *, after: str | None = None) -> float:
        return 0.0

    def report(self) -> dict[str, dict[str, Any]]:
        return {}


NULL_GUARD = NullGuard()


def prior_of(policy: Any) -> Prior | None:
    """A cost-aware policy's calibrated best round and target step, as the guard's `Prior`:
    over every k the policy may choose (1..k_max, so the starting k too), the one that
    commits most tokens a second were every draft accepted. None for a policy with no
    calibrated price (fixed or adaptive k)."""
    cost = getattr(policy, "cost", None)
    k_max = int(getattr(policy, "k_max", 0))
    if cost is None or k_max < 1:
        return None
    bonus = bool(getattr(policy, "bonus", True))
    best: tuple[float, float] | None = None
    for k in range(1, k_max + 1):
        tokens, seconds = float(k + 1 if bonus else k), cost.seconds(k)
        if seconds > 0.0 and (best is None or tokens / seconds > best[0] / best[1]):
            best = (tokens, seconds)
    if best is None:
        return None
    return Prior(best[0], best[1], cost.step)


def guard_lines(per_source: dict[str, dict[str, Any]]) -> list[str]:
    """The guard's decision per source, in words, from a RunSummary's `per_source`: its
    measured rate against plain target steps, "not asked: slower than target steps" where
    the guard stopped it, and how many of its offers a stop ran as target steps. Empty when
    unguarded. One wording for the app's Rounds panel, `specdec-tui chat` and the report."""
    target = per_source.get("none", {}).get("measured_tok_s")
    out = []
    for name, row in per_source.items():
        if name == "none" or "guard" not in row:
            continue
        rate, ratio = row.get("measured_tok_s"), row.get("vs_target")
        measured = "-" if rate is None else f"{rate:.0f} tok/s"
        against = "" if ratio is None else f", {ratio:.2f}x target steps"
        why = " (by the calibration: its best round is slower)" if row.get("basis") else ""
        n = int(row.get("plan_rounds") or 0)  # their time is a plan's build, not the source's
        left = f" ({n} round{'s' if n != 1 else ''} left out: an attention plan built)" if n else ""
        r = int(row.get("refused") or 0)  # its offers a stop turned into plain target steps
        held = f" ({r} offer{'s' if r != 1 else ''} run as target steps while stopped)" if r else ""
        out.append(f"{name}: {measured}{against}: {row['guard']}{why}{left}{held}")
    if out and target is not None:
        out.append(f"target steps: {target:.0f} tok/s")
    return out
