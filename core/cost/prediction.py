"""What speculation should buy here: tokens, seconds and speedup per round, from measured costs.

One formula, read by the cost-aware policy (which k to propose next), the bench (the predicted
speedup of every speculative row, against which its measurement is judged) and the app. A
round that proposes k drafts costs

    seconds(k) = t_draft(k) + t_verify(k + 1) + t_accept(k + 1) + t_overhead
                                                                   (k = 0: one target step)

and commits E[tokens](k) = sum_j prod_{i<=j} a_i accepted drafts, plus one correction when a
draft was rejected, plus the bonus token when none was (a_i = P(accept i | reached i), the
per-position acceptance everyone counts through core.primitives.acceptance.PositionTally). Target-only
commits one token per t_step, so the predicted speedup of proposing k is
E[tokens](k) / seconds(k) x t_step.

The inputs are all measured: t_verify(rows) from a calibration (core.dispatch), t_draft(k) the
draft source's price (k draft steps for a model, greedy or sampled as the run drafts: a sampled
step also turns the vocabulary into q and draws from it; nothing for a lookup), t_accept(rows)
the acceptance on the device (the "sample" phase), t_step the target's step (t_verify(1) by
default, or a measured pipelined step), and the acceptance. Read the curve through
`curve.for_sampling(settings.greedy)` so the draft step and the acceptance are the run's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def acceptance_at(accept: Sequence[float], i: int) -> float:
    """a_i; a position past the list behaves like the last one given (none given: 0)."""
    if i < len(accept):
        return float(accept[i])
    return float(accept[-1]) if accept else 0.0


def expected_tokens(k: int, accept: Sequence[float], bonus: bool) -> float:
    """E[committed tokens] of a round proposing k with per-position acceptance `accept`.

    Position j is reached only if all before it were accepted: E = sum_j prod_{i<=j} a_i
    accepted drafts, plus one correction when any was rejected, plus the bonus when none was.
    k = 0 is a target step: one token.
    """
    if k <= 0:
        return 1.0
    reach, total = 1.0, 0.0
    for j in range(k):
        reach *= acceptance_at(accept, j)
        total += reach
    return total + (1.0 - reach) + (reach if bonus else 0.0)


def expected_tokens_upto(k_max: int, accept: Sequence[float], bonus: bool) -> list[float]:
    """`expected_tokens(k, accept, bonus)` for every k in 0..k_max, in one pass.

    Why: the cost-aware policy weighs every k of a source on each plain step it considers
    drafting, and k calls of the O(k) sum were most of a hybrid's host work between pipelined
    steps (0.5-0.7 ms a step on a 2-core CPU, where a host-bound GPU pays it in full). The
    same products and sums in the same order, so each value is the one
    `expected_tokens` gives, to the last bit."""
    out = [1.0]
    reach, total = 1.0, 0.0
    for j in range(max(k_max, 0)):
        reach *= acceptance_at(accept, j)
        total += reach
        out.append(total + (1.0 - reach) + (reach if bonus else 0.0))
    return out


def as_price(t_draft: Callable[[int], float] | float) -> Callable[[int], float]:
    """A draft price as a function of k; a number is the cost of one step (k steps of it)."""
    if callable(t_draft):
        return t_draft
    step = float(t_draft)
    return lambda k: k * step


@dataclass(frozen=True)
class RoundCost:
    """The seconds of a round: t_verify(rows), the draft source's t_draft(k), the target step.

    `t_step` is what target-only pays per token (None: t_verify(1), one single-row forward);
    `t_overhead` is added to every round (host work the curve does not see).
    """

    t_verify: Callable[[int], float]
    t_draft: Callable[[int], float]  # a number is one step's cost: k steps of it
    t_step: float | None = None
    t_overhead: float = 0.0
    t_accept: Callable[[int], float] | None = None  # rows -> seconds of the acceptance

    def __post_init__(self) -> None:
        object.__setattr__(self, "t_draft", as_price(self.t_draft))

    @classmethod
    def from_curve(
        cls,
        curve: Any,
        dispatch: str = "auto",
        draft_price: Callable[[int], float] | float | None = None,
        *,
        t_step: float | None = None,
        t_overhead: float = 0.0,
    ) -> RoundCost:
        """From a VerifyCostCurve read under `dispatch` (core.dispatch.verify_cost) and the
        draft source's price of k (a number: k steps of it; None: the model drafter's price,
        k calibrated draft steps)."""
        from core.dispatch.curve import verify_cost

        if draft_price is None:
            from core.drafting.model import model_draft_price

            draft_price = model_draft_price(curve)
        return cls(verify_cost(curve, dispatch), draft_price, t_step, t_overhead,
                   getattr(curve, "t_accept", None))

    @property
    def step(self) -> float:
        """Seconds of one target-only token."""
        return self.t_verify(1) if self.t_step is None else self.t_step

    def draft_s(self, k: int) -> float:
        return self.t_draft(k) if k > 0 else 0.0

    def verify_s(self, k: int) -> float:
        """The target's part of a round: k + 1 rows verified, or one step when k = 0."""
        return self.t_verify(k + 1) if k > 0 else self.step

    def accept_s(self, k: int) -> float:
        """The acceptance over k + 1 rows (a target step's sampling is inside t_step)."""
        return self.t_accept(k + 1) if k > 0 and self.t_accept is not None else 0.0

    def other_s(self, k: int) -> float:
        """What a round proposing k costs besides drafting and verifying."""
        return self.accept_s(k) + self.t_overhead

    def seconds(self, k: int) -> float:
        """The whole round proposing k."""
        return self.draft_s(k) + self.verify_s(k) + self.other_s(k)


@dataclass(frozen=True)
class KPrediction:
    """Proposing k every round: tokens, seconds (draft and verify parts), tokens/s, speedup."""

    k: float  # a mix of k (a bench row's rounds) gives its mean
    tokens: float  # expected committed tokens per round
    seconds: float  # expected seconds per round (scaled, where a scale was given)
    draft_s: float
    verify_s: float
    tok_s: float
    speedup: float  # tok_s over target-only's 1 / t_step

    def to_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def _prediction(k: float, tokens: float, draft: float, verify: float, other: float,
                scale: float, t_step: float) -> KPrediction:
    seconds = (draft + verify + other) * scale
    tok_s = tokens / seconds if seconds > 0 else math.inf
    return KPrediction(k, tokens, seconds, draft * scale, verify * scale, tok_s, tok_s * t_step)


def predict_k(
    cost: RoundCost, k: int, accept: Sequence[float], bonus: bool, scale: float = 1.0
) -> KPrediction:
    """The prediction for proposing k; `scale` multiplies the round's priced seconds (the
    cost-aware policy's observed / calibrated correction)."""
    return predict_tokens(cost, k, expected_tokens(k, accept, bonus), scale)


def predict_tokens(cost: RoundCost, k: int, tokens: float, scale: float = 1.0) -> KPrediction:
    """`predict_k` with its expected tokens given (one `expected_tokens_upto` pass serves
    every k)."""
    return _prediction(k, tokens, cost.draft_s(k), cost.verify_s(k), cost.other_s(k), scale,
                       cost.step)


def predict_schedule(
    parts: Sequence[tuple[RoundCost, Mapping[int, int], Sequence[float]]], bonus: bool
) -> KPrediction | None:
    """Several sources' rounds (each: its cost, its k -> rounds, its acceptance), as a bench
    row or an adaptive policy ran them, a hybrid's sources apart: all expected tokens over
    all expected seconds of the whole schedule, per round on average.
    The speedup is against the first part's target step. None without rounds."""
    n = tokens = draft = verify = other = ks = 0.0
    for cost, counts, accept in parts:
        for k, c in counts.items():
            if c <= 0:
                continue
            n += c
            ks += c * k
            tokens += c * expected_tokens(k, accept, bonus)
            draft += c * cost.draft_s(k)
            verify += c * cost.verify_s(k)
            other += c * cost.other_s(k)
    if n <= 0:
        return None
    return _prediction(ks / n, tokens / n, draft / n, verify / n, other / n, 1.0, parts[0][0].step)


@dataclass(frozen=True)
class Prediction:
    """Per k from k_min to k_max, and the best k (the most tokens/s; the smaller k on a tie)."""

    per_k: tuple[KPrediction, ...]
    t_step: float
    bonus: bool

    @property
    def best(self) -> KPrediction:
        return max(self.per_k, key=lambda p: (p.tok_s, -p.k))

    def at(self, k: int) -> KPrediction:
        for p in self.per_k:
            if p.k == k:
                return p
        raise KeyError(k)

    def to_dict(self) -> dict[str, Any]:
        return {
            "t_step_s": self.t_step,
            "bonus": self.bonus,
            "best_k": self.best.k,
            "per_k": [p.to_dict() for p in self.per_k],
        }


def predict(
    cost: RoundCost,
    accept: Sequence[float],
    *,
    bonus: bool = True,
    k_max: int = 8,
    k_min: int = 0,
    scale: tuple[float, float] = (1.0, 1.0),
) -> Prediction:
    """Every k in [k_min, k_max]; `scale` multiplies the seconds of k = 0 and k >= 1 rounds."""
    if k_max < k_min:
        raise ValueError(f"k_max {k_max} is below k_min {k_min}")
    tokens = expected_tokens_upto(k_max, accept, bonus)
    per_k = tuple(predict_tokens(cost, k, tokens[k], scale[k > 0]) for k in range(k_min, k_max + 1))
    return Prediction(per_k, cost.step, bonus)


# -- copies: how far a copy runs ------------------------------------------------------------
# A copy (core.drafting.lookup) is not a draft of independent guesses: once it matches, it
# usually runs on (SmolLM2 on the H200: 0.9-1.0 per position from the 4th on, ~0.3 at the
# first). What predicts its tokens is the distribution of how far copies of its kind ran.

FIRST_PRIOR = 0.5  # P(a copy's first token is kept), before any evidence
RUN_ON_PRIOR = 0.8  # P(it runs on past a kept token), before any evidence
RUN_PRIOR_WEIGHT = 2.0  # rounds' worth of weight the prior carries


@dataclass
class RunLengths:
    """How far copies of one kind ran: the empirical distribution of accepted run lengths.

    A round that kept n of its k drafts (n < k) ran exactly n; one that kept all k ran at
    least k (cut short by its own proposal, not by the text: censored). `went[j]` counts runs
    seen to go past length j and `risk[j]` those that could have been seen to (the
    Kaplan-Meier counts), so went[j] / risk[j] is P(run > j | run >= j)."""

    went: list[int]
    risk: list[int]

    @classmethod
    def empty(cls, size: int = 64) -> RunLengths:
        return cls([0] * size, [0] * size)

    def observe(self, accepted: int, proposed: int) -> None:
        """One round that proposed `proposed` copies and kept `accepted`."""
        for j in range(min(accepted + 1, proposed, len(self.risk))):
            self.risk[j] += 1
            self.went[j] += j < accepted

    @property
    def rounds(self) -> int:
        return self.risk[0]

    def survival(self, k: int, prior: Sequence[float] | None = None) -> list[float]:
        """P(run >= j) for j = 1..k, from run_hazards(self, prior)."""
        out, reach = [], 1.0
        for c in run_hazards(self, k, prior):
            reach *= c
            out.append(reach)
        return out


def run_hazards(
    runs: RunLengths | None, k: int, prior: Sequence[float] | None = None,
    weight: float = RUN_PRIOR_WEIGHT,
) -> list[float]:
    """P(run > j | run >= j) for j = 0..k-1: the counts smoothed towards `prior` (default: the
    first-token prior, then RUN_ON_PRIOR). Past the last length seen, the prior. These are the
    per-position acceptances expected_tokens multiplies, so E[tokens] of a copy of k is
    expected_tokens(k, run_hazards(...), bonus): the run-length model in the one formula."""
    base = list(prior) if prior is not None else [FIRST_PRIOR] + [RUN_ON_PRIOR] * max(k - 1, 0)
    out = []
    for j in range(k):
        p = acceptance_at(base, j)
        if runs is None or j >= len(runs.risk):
            out.append(p)
        else:
            out.append((runs.went[j] + weight * p) / (runs.risk[j] + weight))
    return out


def pooled_run_prior(pooled: RunLengths, k: int) -> list[float]:
    """The prior for one kind's runs: all kinds' runs, whose first-token rate is smoothed
    towards FIRST_PRIOR and whose later positions towards their own run-on rate (all lengths
    past the first pooled, smoothed towards RUN_ON_PRIOR): a length no copy reached yet is
    assumed to run on as the reached ones did, not to fail like a first token."""
    went_on = sum(pooled.went[1:])
    risk_on = sum(pooled.risk[1:])
    on = (went_on + RUN_PRIOR_WEIGHT * RUN_ON_PRIOR) / (risk_on + RUN_PRIOR_WEIGHT)
    return run_hazards(pooled, k, [FIRST_PRIOR] + [on] * max(k - 1, 0))


def copy_acceptance(kind: RunLengths | None, pooled: RunLengths, k: int) -> list[float]:
    """Per-position acceptance of a copy of one kind: its own runs, smoothed towards all
    kinds' (pooled_run_prior). Feed it to predict() / predict_k() like any acceptance."""
    return run_hazards(kind, k, pooled_run_prior(pooled, k))


def optimistic_hazards(kind: RunLengths | None, accept: Sequence[float]) -> list[float]:
    """Each position's acceptance plus two standard errors of its own evidence, capped at 1:
    the best a kind's copies can plausibly do, near 1 where nothing was seen."""
    out = []
    for j, a in enumerate(accept):
        n = (kind.risk[j] if kind is not None and j < len(kind.risk) else 0) + RUN_PRIOR_WEIGHT
        out.append(min(1.0, a + 2.0 * math.sqrt(max(a * (1.0 - a), 0.0) / n)))
    return out
