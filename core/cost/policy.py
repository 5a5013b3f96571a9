"""Proposal policies: how many tokens to draft next round, from what the rounds so far showed.

A policy observes each finished round (proposed, accepted, and its wall time) and answers
`next_k()`. k = 0 means a plain target step. The cost-aware policy also reads a measured
verify-cost curve, and corrects it with the round times it observes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from core.cost.prediction import (
    RoundCost,
    RunLengths,
    as_price,
    copy_acceptance,
    expected_tokens,
    expected_tokens_upto,
    optimistic_hazards,
    predict_k,
)
from core.dispatch.curve import fastest_dispatch, run_step, verify_cost
from core.settings import MAX_K, Settings

__all__ = [  # expected_tokens and the curve readers stay importable from here
    "AcceptanceRatePolicy", "AcceptedLengthPolicy", "CopyRunPolicy", "CostAwarePolicy",
    "FixedPolicy", "HeuristicPolicy", "NULL_POLICY", "NullPolicy", "Policy", "PolicyBase",
    "expected_tokens", "fastest_dispatch", "make_policy", "verify_cost",
]


class Policy(Protocol):
    """What the engine needs from a policy.

    `limit` is the most drafts the round can use (the request's last tokens); the engine clamps
    to it anyway, and a policy that prices rounds chooses the best k within it instead.
    `consider` hears the offer a round would draft from before `next_k` (a copy's length and
    kind), `charge` the seconds its last drafted round cost past its own clock (the pipeline
    break); a policy that reads neither inherits PolicyBase's, which do nothing."""

    def next_k(self, limit: int | None = None) -> int: ...

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None: ...

    def consider(self, offer: Any) -> None: ...

    def charge(self, proposed: int, seconds: float) -> None: ...


class PolicyBase:
    """The hooks a policy may leave alone, so the loop calls them on every policy unasked."""

    def consider(self, offer: Any) -> None:
        """The next round's offer (core.drafting.base.Offer): read only by a copy's policy."""

    def charge(self, proposed: int, seconds: float) -> None:
        """A drafted round's pipeline break: read only by a policy that prices rounds."""


class NullPolicy(PolicyBase):
    """The policy of a source that has none yet (`Engine.policy_of` before its first round):
    it drafts nothing (k = 0, a plain target step), and what the loop tells it changes
    nothing. A test's policy builds on it, so it has every hook the loop calls."""

    def next_k(self, limit: int | None = None) -> int:
        return 0

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
        pass


NULL_POLICY = NullPolicy()


class FixedPolicy(PolicyBase):
    """Always k: the seed's fixed-4/6/8 settings."""

    def __init__(self, k: int) -> None:
        self.k = k

    def next_k(self, limit: int | None = None) -> int:
        return self.k

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
        pass


class AcceptanceRatePolicy(PolicyBase):
    """The seed engine's adaptive rule: shrink k below `lo` acceptance, grow above `hi`."""

    def __init__(self, k: int, lo: float, hi: float, k_min: int, k_max: int) -> None:
        self.k, self.lo, self.hi, self.k_min, self.k_max = k, lo, hi, k_min, k_max
        self.k = min(max(k, k_min), k_max)

    def next_k(self, limit: int | None = None) -> int:
        return self.k

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
        if proposed == 0:
            return
        rate = accepted / proposed
        if rate < self.lo:
            self.k = max(self.k_min, self.k - 1)
        elif rate > self.hi:
            self.k = min(self.k_max, self.k + 1)


class AcceptedLengthPolicy(PolicyBase):
    """k follows an EMA of the accepted length: propose one more than usually survives."""

    def __init__(self, k: int, alpha: float, k_min: int, k_max: int) -> None:
        self.alpha, self.k_min, self.k_max = alpha, k_min, k_max
        self.ema = float(max(k - 1, 0))

    def next_k(self, limit: int | None = None) -> int:
        return min(max(round(self.ema) + 1, self.k_min), self.k_max)

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
        if proposed:
            self.ema = (1 - self.alpha) * self.ema + self.alpha * accepted


class HeuristicPolicy(PolicyBase):
    """Hugging Face assisted generation's rule: +2 after a full acceptance, -1 otherwise."""

    def __init__(self, k: int, k_min: int, k_max: int) -> None:
        self.k, self.k_min, self.k_max = min(max(k, k_min), k_max), k_min, k_max

    def next_k(self, limit: int | None = None) -> int:
        return self.k

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
        if proposed == 0:
            return
        step = 2 if accepted == proposed else -1
        self.k = min(max(self.k + step, self.k_min), self.k_max)


COST_EMA = 0.2  # weight of each observed round in the cost scale
STEP_DRIFT = 0.02  # a target step's scale moving less than this keeps the cached k
# One observation enters a cost scale's EMA as at least 0.2x and at most 5x the scale, so a
# stalled round moves it by a bounded step (5x: docs/decisions/0005-cost-scale-clip.md).
SCALE_CLIP = (0.2, 5.0)


class CostAwarePolicy(PolicyBase):
    """Pick k to maximise expected tokens per second from a measured cost curve.

    rate(k) = E[tokens](k, a) / (t_draft(k) + t_verify(k + 1) + t_overhead); k = 0 is a
    target step costing t_verify(1). t_draft(k) is the draft source's price of proposing k
    (k draft steps for a model, next to nothing for a lookup); a number means k steps of it.
    Acceptance per position is a Beta-smoothed online count, so early rounds lean on the
    prior and later rounds on what the pair actually does. A
    position's prior is the pooled acceptance of all positions seen (itself smoothed towards
    `prior`): a position never yet reached is assumed to behave like the ones that were, so
    short probes that are all accepted raise the estimate for long proposals too (with a
    fixed prior, k stayed at 0-1 on the H200 while every draft was accepted).
    Choosing k = 0 teaches nothing, so the first round, and a round after a run of target
    steps, proposes k >= 1 anyway (unless no k could pay at the most optimistic acceptance the
    rounds allow, as on MLX's CPU backend even at full acceptance): a pair whose acceptance
    rises (a new passage) is noticed, not written off. The run before a probe is 1 step after
    the policy first falls to k = 0, then doubles with each probe that leaves it there (2, 4,
    ... `probe_every`): two unlucky early rounds are evidence of little, and on the H200 (72B
    target, TV = 0.5, 88% per position) they sent a fixed 16-step wait into a request that
    paid 1.5x at k = 10. A probe wholly accepted is followed at once by one twice as long (as
    TCP's slow start, to k_max): proving that long proposals pay takes long accepted runs; at
    k_max = 31 single-token probes every 16 rounds would need the whole request to gather them.
    The curve is a calibration; the rounds are the truth. Each observed round time is compared
    with the curve's price for it, and an EMA of that ratio, one for target steps and one for
    drafted rounds, scales the prices: a sampled draft step dearer than the calibrated greedy
    one, or a host that got slower, moves the choice (on the H200 the calibrated price was
    optimistic and k stayed too long at TV = 0.5). One observation moves a scale by at most
    SCALE_CLIP of it.
    """

    kind = 0  # the offer's kind its choices are kept for (CopyRunPolicy tracks copies' kinds)

    def __init__(
        self,
        t_verify: Callable[[int], float],
        t_draft: Callable[[int], float] | float,
        *,
        k_max: int = 8,
        k_min: int = 0,
        bonus: bool = True,
        t_overhead: float = 0.0,
        prior: float = 0.5,
        prior_weight: float = 2.0,
        probe_every: int = 16,
        t_accept: Callable[[int], float] | None = None,
    ) -> None:
        t_draft = as_price(t_draft)
        self.t_verify, self.t_draft, self.t_overhead = t_verify, t_draft, t_overhead
        # The round's price and its expected tokens: one formula with the bench and the app.
        self.cost = RoundCost(t_verify, t_draft, t_overhead=t_overhead, t_accept=t_accept)
        self.k_min, self.k_max, self.bonus = k_min, min(k_max, MAX_K), bonus
        self.prior, self.prior_weight = prior, prior_weight
        self.hits = [0] * MAX_K  # observed counts only; the prior enters in acceptance()
        self.tries = [0] * MAX_K
        self._cache: int | None = None
        self._cache_scale = 1.0  # the target steps' cost scale the cached choice was made at
        self.probe_every = probe_every
        self._zeros = probe_every  # consecutive k = 0 rounds; full, so the first round probes
        self._failed = 0  # probes in a row that left k at 0: the wait before the next doubles
        self._probe_k = 1  # the next probe's length: doubles while probes are wholly accepted
        self._probing = False
        self.scale = [1.0, 1.0]  # observed / calibrated round cost: [k = 0, k >= 1], an EMA
        self._round_s: list[float] | None = None  # calibrated seconds per k (`rates`)
        self._evidence = 0  # drafted rounds observed: what the acceptance counts have seen
        self._kept: dict[str, tuple[tuple[Any, ...], tuple[int, float]]] = {}  # `_drafting`

    def acceptance(self) -> list[float]:
        """Per position, P(accept i | reached i): its counts smoothed towards the pooled rate."""
        w = self.prior_weight
        pooled = (sum(self.hits) + self.prior * w) / (sum(self.tries) + w)
        return [(h + pooled * w) / (t + w) for h, t in zip(self.hits, self.tries, strict=True)]

    def priced(self, k: int) -> float:
        """The calibrated seconds of a round proposing k (before the observed scale)."""
        return self.cost.seconds(k)

    def rate(self, k: int, accept: list[float] | None = None) -> float:
        """Expected committed tokens per second when proposing k (core.cost.prediction)."""
        a = self.acceptance() if accept is None else accept
        return predict_k(self.cost, k, a, self.bonus, self.scale[k > 0]).tok_s

    def rates(self, accept: list[float], k_hi: int, drafted: float | None = None) -> list[float]:
        """`rate(k, accept)` for k in 0..k_hi in one pass, drafted rounds at `drafted`'s scale."""
        tokens = expected_tokens_upto(k_hi, accept, self.bonus)
        prices = self._prices()
        scale = (self.scale[0], self.scale[1] if drafted is None else drafted)
        out = []
        for k in range(k_hi + 1):  # as core.cost.prediction._prediction's tok_s, term for term
            seconds = prices[k] * scale[k > 0]
            out.append(tokens[k] / seconds if seconds > 0 else math.inf)
        return out

    def _prices(self) -> list[float]:
        """`priced(k)` for every k, kept: fixed for the policy's life, the curve read once."""
        if self._round_s is None:
            self._round_s = [self.priced(k) for k in range(MAX_K + 1)]
        return self._round_s

    def _drafting(self, which: str, accept: Callable[[], list[float]], lo: int | None = None,
                  drafted: float | None = None) -> tuple[int, float]:
        """`_best_drafting(accept(), lo)`, kept until what it reads changes: a drafted round
        (the counts, the drafted rounds' cost scale), the copy kind, k_min..k_max. A plain
        step moves only the target steps' scale, which k = 0's rate alone reads, so after a
        step the choice is one division against the kept rate, not every k priced again
        (on the H200 the default's plan between steps was 0.08-0.13 ms of a 4 ms step:
        docs/benchmarks/data/h200-2026-12-02-s11)."""
        key = (self.scale[1] if drafted is None else drafted, self._evidence, self.k_min,
               self.k_max, self.kind)
        kept = self._kept.get(which)
        if kept is None or kept[0] != key:
            kept = (key, self._best_drafting(accept(), lo, drafted))
            self._kept[which] = kept
        return kept[1]

    def _best_drafting(self, accept: list[float], lo: int | None = None,
                       drafted: float | None = None) -> tuple[int, float]:
        """The k in lo..k_max (lo: max(k_min, 1)) with the best `rates`, and that rate ((0,
        0.0) when there is none); ties go to the smaller k."""
        lo = max(self.k_min, 1) if lo is None else lo
        if self.k_max < lo:
            return 0, 0.0
        r = self.rates(accept, self.k_max, drafted)
        best = max(range(lo, self.k_max + 1), key=lambda k: r[k])
        return best, r[best]

    def next_k(self, limit: int | None = None) -> int:
        if limit is not None and limit < self.k_max:
            # The request's last tokens: the best k that fits, not the clamp of the best one.
            # On a curve with a dear vector-kernel stretch they differ (H200, 72B shape: 7 rows
            # cost five target steps, 8-16 rows two).
            self._probing = False
            return self._best(max(limit, self.k_min))
        if self._cache is None:
            self._cache = self._best(self.k_max)
            self._cache_scale = self.scale[0]
        self._probing = False
        if (
            self._cache == 0
            and self.probe_every
            and self._zeros >= self.probe_gap()
            and self._could_pay()
        ):
            best, _ = self._best_drafting(self.acceptance())
            self._probing = True
            return max(best, min(self._probe_k, self.k_max))
        return self._cache

    def _best(self, k_max: int) -> int:
        """The rate-optimal k in k_min..k_max for the acceptance and costs seen so far."""
        # As core.cost.prediction.predict(...).best.k: the most tokens/s, the smaller k on a
        # tie; from `rates` (one pass, the kept prices), not k predictions built and dropped.
        if k_max < self.k_min:
            raise ValueError(f"k_max {k_max} is below k_min {self.k_min}")
        if k_max != self.k_max:  # the request's last tokens: priced afresh
            r = self.rates(self.acceptance(), k_max)
            return max(range(self.k_min, k_max + 1), key=lambda k: (r[k], -k))
        k, best = self._drafting("best", self.acceptance)
        if self.k_min > 0 or k == 0:
            return k
        # k = 0 wins ties, as the maximum over (rate, -k) gave it.
        return 0 if self._step_rate() >= best else k

    def _step_rate(self) -> float:
        """`rate(0)`, a plain step's tokens a second, as `rates` computes it (one token over
        its calibrated seconds times the steps' scale): no acceptance enters it, so it is
        one division, where `rate` builds a whole prediction (a fifth of a plan's host work
        before, its curve read eight times a step)."""
        seconds = self._prices()[0] * self.scale[0]
        return 1.0 / seconds if seconds > 0 else math.inf

    def probe_gap(self) -> int:
        """Target steps in a row before the next probe: 1, 1, 2, 4, ... up to probe_every."""
        return min(1 << max(self._failed - 1, 0), self.probe_every)

    def optimistic_acceptance(self) -> float:
        """The highest per-position acceptance the rounds so far leave plausible: the pooled
        rate (Laplace-smoothed) plus two standard errors, capped at 1. Near 1 with little
        evidence; close to what was seen once there is much."""
        n = sum(self.tries)
        p = (sum(self.hits) + 1) / (n + 2)
        return min(1.0, p + 2.0 * math.sqrt(p * (1.0 - p) / (n + 2)))

    def _could_pay(self) -> bool:
        """Whether some k >= 1 could beat a target step at the optimistic acceptance: where
        none could even at full acceptance (MLX's CPU backend verifies R rows at ~R steps'
        cost), or at the best the evidence allows (SmolLM2's own 4-bit draft at ~55% on the
        H200, where probes cost ~3 target steps each and lost 10-15%), probing is waste."""
        return self._drafting("hope", lambda: [self.optimistic_acceptance()] * MAX_K)[1] \
            > self._step_rate()

    def charge(self, proposed: int, seconds: float) -> None:
        """Seconds the last drafted round (of `proposed` drafts) cost beyond its own clock:
        the plain step after it ran with no step queued behind it, the pipeline break the
        guard measures (core/cost/guard.py `observe_step`). The drafted rounds' cost scale
        moves as if the round had been clocked with them. On the H200 that step took 8.5-10.6
        ms against a pipelined 4-5 (docs/benchmarks/data/h200-2026-12-01-s10): a round priced
        without it looked as if 2-3 tokens paid, where it takes about 3.6."""
        priced = self._prices()[proposed] if 0 < proposed <= MAX_K else 0.0
        if seconds <= 0.0 or priced <= 0.0:
            return
        most = COST_EMA * (SCALE_CLIP[1] - 1.0) * self.scale[1]  # what one round may add
        self.scale[1] += min(COST_EMA * seconds / priced, most)
        self._cache = None

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
        if seconds is not None and seconds > 0.0:
            priced = self._prices()[proposed]  # `priced(proposed)`, the curve read once
            if priced > 0.0:
                i = int(proposed > 0)
                lo, hi = (c * self.scale[i] for c in SCALE_CLIP)
                ratio = min(max(seconds / priced, lo), hi)
                self.scale[i] += COST_EMA * (ratio - self.scale[i])
        self._zeros = self._zeros + 1 if proposed == 0 else 0
        if self._probing and proposed:
            if accepted == proposed:  # wholly accepted: probe again, twice as long
                self._probe_k = min(2 * proposed, self.k_max)
                self._zeros = self.probe_every
            else:
                self._probe_k = max(accepted, 1)
                self._failed += 1
            self._probing = False
        elif proposed:  # the policy's own choice was to draft: the next k = 0 is news again
            self._failed = 0
        self._evidence += bool(proposed)
        # Conditional counts: position i was tried only if all before it were accepted (what
        # expected_tokens multiplies); counting every proposed one would compound it twice.
        for i in range(min(accepted + 1, proposed)):
            self.tries[i] += 1
            if i < accepted:
                self.hits[i] += 1
        # A target step teaches no acceptance: the cached choice stands unless the steps' scale
        # moved by more than STEP_DRIFT (re-pricing every k after each step was 0.1-0.3 ms).
        if proposed or abs(self.scale[0] - self._cache_scale) > STEP_DRIFT * self._cache_scale:
            self._cache = None


class CopyRunPolicy(CostAwarePolicy):
    """Cost-aware k for copies (the lookup): as long as the copy pays, up to what it has.

    Before each round the engine hands it the offer (`consider`): how many tokens follow the
    match, and the match's kind (its length's octave). A copy's acceptance is how far copies
    of that kind ran before (core.cost.prediction.RunLengths: accepted run lengths, a proposal's
    end counted as "at least"), smoothed towards all kinds' runs, where an unreached length
    runs on like the reached ones: SmolLM2's copies on the H200 kept ~30% of first tokens and
    0.9-1.0 from the fourth on, so per-position averages proposed 8 where 16 paid. k is the
    rate-optimal one up to min(k_max, available), priced by the verify-cost curve (a copy
    costs no device time), so a flat curve makes it long. Probing is per kind: a kind whose
    copies could not pay even at the best its evidence allows is not asked (a creative
    prompt's two-token repeats), and its rounds stay pipelined target steps.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.k_cap = self.k_max
        self.pooled = RunLengths.empty()
        self.kinds: dict[int, RunLengths] = {}
        self.kind = 0
        self._accept: list[float] | None = None

    def consider(self, offer: Any) -> None:
        """The next round's offer (core.drafting.base.Offer): its kind and available length."""
        cap = self.k_cap if offer.available is None else min(self.k_cap, offer.available)
        if (offer.kind, cap) != (self.kind, self.k_max):
            self.kind, self.k_max = offer.kind, max(cap, 0)
            self._cache, self._accept = None, None

    def acceptance(self) -> list[float]:
        if self._accept is None:
            self._accept = copy_acceptance(self.kinds.get(self.kind), self.pooled, MAX_K)
        return self._accept

    def _could_pay(self) -> bool:
        """Whether a copy of this kind could pay if its first token were kept as often as its
        evidence allows at best (a run, once kept, runs on as runs did), its round at the
        drafted rounds' observed cost scale (docs/decisions/0004-probe-at-observed-cost.md)."""
        def hope() -> list[float]:  # read only when the kept choice is stale
            a = self.acceptance()
            return [optimistic_hazards(self.kinds.get(self.kind), a[:1])[0], *a[1:]]

        return self._drafting("hope", hope, lo=1, drafted=self.scale[1])[1] > self._step_rate()

    def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
        super().observe(proposed, accepted, seconds)
        if proposed:
            self.kinds.setdefault(self.kind, RunLengths.empty()).observe(accepted, proposed)
            self.pooled.observe(accepted, proposed)
            self._accept = None


def make_policy(
    settings: Settings,
    cost_curve: object | None = None,
    draft_price: Callable[[int], float] | None = None,
    *,
    copies: bool = False,
) -> Policy:
    """The policy a Settings names; cost-aware needs a curve (t_verify(rows), draft_step_s,
    t_accept: read through `for_sampling(settings.greedy)`) and prices drafting with
    `draft_price(k)` (the drafter's; k draft steps of the curve without).
    `copies`: the source copies (the lookup), so cost-aware models its run lengths."""
    s = settings
    if s.policy == "fixed":
        return FixedPolicy(s.k)
    if s.policy == "acceptance-rate":
        return AcceptanceRatePolicy(s.k, s.accept_lo, s.accept_hi, max(s.k_min, 1), s.k_max)
    if s.policy == "accepted-length":
        return AcceptedLengthPolicy(s.k, s.ema_alpha, max(s.k_min, 1), s.k_max)
    if s.policy == "heuristic":
        return HeuristicPolicy(s.k, max(s.k_min, 1), s.k_max)
    if s.policy == "cost-aware":
        if cost_curve is None:
            from core.errors import UserError

            raise UserError("The cost-aware policy needs a calibration: run calibrate first.")
        if draft_price is None:
            from core.drafting.model import model_draft_price

            draft_price = model_draft_price(cost_curve)
        verify = verify_cost(cost_curve, s.dispatch, run_step(s.step, cost_curve))
        # Copies probe at most every 64 steps once they keep failing: a probe of a source
        # that cannot pay costs about a target step, 1/16 of them was a 6% loss.
        if copies:
            return CopyRunPolicy(verify, draft_price, k_max=s.k_max, k_min=0, bonus=s.bonus,
                                 probe_every=64)
        return CostAwarePolicy(verify, draft_price, k_max=s.k_max, k_min=0, bonus=s.bonus,
                               t_accept=getattr(cost_curve, "t_accept", None))
    raise ValueError(f"unknown policy {s.policy!r}")
