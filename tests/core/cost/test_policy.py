"""Proposal policies (core/cost/policy.py): each k sequence below is worked out by hand from the rule."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from types import SimpleNamespace

import pytest

from core.cost.policy import (
    AcceptanceRatePolicy,
    AcceptedLengthPolicy,
    CostAwarePolicy,
    FixedPolicy,
    HeuristicPolicy,
    expected_tokens,
    make_policy,
)
from core.errors import UserError
from core.settings import Settings


def drive(policy, history: list[int]) -> list[int]:
    """k before each round, and after the last: propose next_k(), then observe `accepted`."""
    ks = []
    for accepted in history:
        k = policy.next_k()
        ks.append(k)
        policy.observe(k, min(accepted, k))
    ks.append(policy.next_k())
    return ks


# -- simple policies ---------------------------------------------------------------------------


def test_fixed_never_moves() -> None:
    p = make_policy(Settings(policy="fixed", k=6))
    assert isinstance(p, FixedPolicy)
    assert drive(p, [0, 6, 3, 0, 6]) == [6] * 6


def test_acceptance_rate_shrinks_below_lo_grows_above_hi() -> None:
    p = make_policy(Settings(policy="acceptance-rate", k=4))  # lo 0.4, hi 0.8, bounds 1..8
    assert isinstance(p, AcceptanceRatePolicy) and (p.k_min, p.k_max) == (1, 8)
    # rates: 1/4 < .4 -> 3; 3/3 > .8 -> 4; 2/4 in band -> 4; 4/4 -> 5; 2/5 = lo exactly -> 5;
    # 4/5 = hi exactly -> 5; 0/5 -> 4
    assert drive(p, [1, 3, 2, 4, 2, 4, 0]) == [4, 3, 4, 4, 5, 5, 5, 4]
    p.observe(0, 0)  # a k = 0 round says nothing about acceptance
    assert p.next_k() == 4


def test_acceptance_rate_bounds() -> None:
    low = AcceptanceRatePolicy(2, 0.4, 0.8, 1, 8)
    assert drive(low, [0, 0, 0]) == [2, 1, 1, 1]
    high = AcceptanceRatePolicy(7, 0.4, 0.8, 1, 8)
    assert drive(high, [8, 8, 8]) == [7, 8, 8, 8]
    assert AcceptanceRatePolicy(12, 0.4, 0.8, 1, 8).next_k() == 8  # the start is clamped too
    assert AcceptanceRatePolicy(0, 0.4, 0.8, 1, 8).next_k() == 1


def test_accepted_length_ema_by_hand() -> None:
    """alpha 0.2, k 4: ema starts at k - 1 = 3; next k = round(ema) + 1 within 1..8.

    accepted  ema after                          k after
    (start)   3.0                                4
    4         0.8*3.0    + 0.8 = 3.2             4
    4         0.8*3.2    + 0.8 = 3.36            4
    0         0.8*3.36         = 2.688           4
    1         0.8*2.688  + 0.2 = 2.3504          3
    3         0.8*2.3504 + 0.6 = 2.48032         3
    0         1.984256                           3
    0         1.5874048                          3
    0         1.26992384                         2
    0         1.015939072                        2
    0         0.8127512576                       2
    0         0.65020100608                      2
    0         0.520160804864                     2
    0         0.4161286438912                    1 (round 0 + 1)
    0         0.33290291511296                   1
    """
    p = make_policy(Settings(policy="accepted-length", k=4, ema_alpha=0.2))
    assert isinstance(p, AcceptedLengthPolicy)
    ks = drive(p, [4, 4, 0, 1, 3] + [0] * 9)
    assert ks == [4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1]
    assert p.ema == pytest.approx(0.33290291511296, abs=1e-12)


def test_accepted_length_bounds_and_idle_rounds() -> None:
    p = AcceptedLengthPolicy(8, 0.2, 1, 8)
    assert drive(p, [8] * 20)[-1] == 8  # ema -> 8, round(8) + 1 = 9 is clamped to 8
    ema = p.ema
    p.observe(0, 0)
    assert p.ema == ema  # k = 0 rounds leave the average alone


def test_heuristic_plus_two_minus_one() -> None:
    p = make_policy(Settings(policy="heuristic", k=4))
    assert isinstance(p, HeuristicPolicy)
    # full 4/4 -> 6; full 6/6 -> 8; full 8/8 -> 8 (cap); 3/8 -> 7; 0/7 -> 6; 5/6 -> 5
    assert drive(p, [4, 6, 8, 3, 0, 5]) == [4, 6, 8, 8, 7, 6, 5]
    low = HeuristicPolicy(2, 1, 8)
    assert drive(low, [0, 0, 0]) == [2, 1, 1, 1]
    low.observe(0, 0)
    assert low.next_k() == 1


# -- expected tokens ---------------------------------------------------------------------------


def enumerate_expected(k: int, accept: list[float], bonus: bool) -> float:
    """Sum over every accept/reject pattern of the k Bernoulli verdicts (2^k of them)."""
    total = 0.0
    for pattern in itertools.product([True, False], repeat=k):
        prob = 1.0
        for a, ok in zip(accept, pattern, strict=False):
            prob *= a if ok else 1.0 - a
        n = next((i for i, ok in enumerate(pattern) if not ok), k)
        tokens = n + 1 if n < k else k + (1 if bonus else 0)
        total += prob * tokens
    return total


@pytest.mark.parametrize("bonus", [True, False])
@pytest.mark.parametrize("k", [0, 1, 2, 3, 5])
def test_expected_tokens_by_enumeration(k: int, bonus: bool) -> None:
    rng = random.Random(k)
    for accept in ([0.0] * 8, [1.0] * 8, [0.5] * 8, [rng.random() for _ in range(8)]):
        want = 1.0 if k == 0 else enumerate_expected(k, accept, bonus)
        assert expected_tokens(k, accept, bonus) == pytest.approx(want, abs=1e-12)


def test_expected_tokens_known_values() -> None:
    # k = 2, a = 1/2: n = 0 (1/2, 1 token), n = 1 (1/4, 2), n = 2 (1/4, 2 + bonus)
    assert expected_tokens(2, [0.5, 0.5], True) == pytest.approx(1.75)
    assert expected_tokens(2, [0.5, 0.5], False) == pytest.approx(1.5)
    assert expected_tokens(4, [1.0] * 4, True) == 5.0
    assert expected_tokens(4, [0.0] * 4, True) == 1.0


# -- cost-aware --------------------------------------------------------------------------------


def h200_curve(rows: int) -> float:
    """H200-shaped verify cost: 8.45 ms per row below 8 rows (GEMV per row), ~16.5 ms from 8."""
    return 8.45e-3 * rows if rows < 8 else 16.5e-3


def flat_curve(rows: int) -> float:
    return 10e-3


def ref_rate(k: int, a: list[float], t_verify, t_draft: float, bonus: bool = True) -> float:
    """rate(k) written from the docstring: E[tokens] / (k t_draft + t_verify(k + 1))."""
    if k == 0:
        return 1.0 / t_verify(1)
    return enumerate_expected(k, a, bonus) / (k * t_draft + t_verify(k + 1))


def learned(
    policy: CostAwarePolicy, per_position: float, rounds: int, seed: int
) -> CostAwarePolicy:
    """Feed `rounds` rounds proposing k_max whose verdicts are i.i.d. Bernoulli(per_position)."""
    rng = random.Random(seed)
    for _ in range(rounds):
        n = 0
        while n < policy.k_max and rng.random() < per_position:
            n += 1
        policy.observe(policy.k_max, n)
    return policy


def test_cost_aware_learns_per_position_acceptance() -> None:
    """acceptance()[i] estimates P(accept i | reached i), the a_i expected_tokens multiplies.

    Counting every proposed position as a try instead would estimate P(n > i) = 0.95^(i+1)
    (0.66 at position 7), and expected_tokens would then compound it a second time.
    """
    p = learned(CostAwarePolicy(h200_curve, 1.8e-3), 0.95, rounds=4000, seed=0)
    acc = p.acceptance()[:8]
    assert all(a == pytest.approx(0.95, abs=0.015) for a in acc), acc


@pytest.mark.parametrize("t_draft", [1.8e-3, 3.6e-3])
def test_cost_aware_h200_high_acceptance(t_draft: float) -> None:
    """Per-position acceptance 0.95 on the H200-shaped curve.

    Rates (tokens/s) at exactly 0.95, bonus on, t_overhead 0:
      t_draft 1.8 ms: k=0 118.3, 1 104.3, 2 98.5, 3 94.6, 4 91.5, 5 88.7, 6 86.3, 7 231.3, 8 239.3
      t_draft 3.6 ms: k=0 118.3, 1 95.1, 2 87.6, 3 83.2, 4 79.9, 5 77.1, 6 74.7, 7 161.4, 8 163.2
    k = 7 (8 rows, the first flat-cost shape) beats every shorter k by 1.5x or more, but k = 8 (9 rows)
    costs the same verify plus one draft step and brings 0.66 more tokens, so with k_max = 8
    the best is 8; with k_max = 7 it is 7.
    """
    exact = CostAwarePolicy(h200_curve, t_draft, prior=0.95, prior_weight=1e9)
    a = [0.95] * 16
    rates = {k: exact.rate(k) for k in range(9)}
    for k in range(9):
        assert rates[k] == pytest.approx(ref_rate(k, a, h200_curve, t_draft), rel=1e-9)
    assert all(rates[7] > 1.5 * rates[k] for k in range(1, 7))
    assert exact.next_k() == 8
    assert CostAwarePolicy(h200_curve, t_draft, k_max=7, prior=0.95, prior_weight=1e9).next_k() == 7
    # Learned from rounds rather than given: the same choice, and the policy's own argmax.
    p = learned(CostAwarePolicy(h200_curve, t_draft), 0.95, rounds=4000, seed=1)
    acc = p.acceptance()
    want = max(range(9), key=lambda k: (ref_rate(k, acc, h200_curve, t_draft), -k))
    assert p.next_k() == want == 8


def test_cost_aware_low_acceptance_stops_drafting() -> None:
    """At 0.2 a drafted round commits ~1.2 tokens for 18.7+ ms; a target step 1 for 8.45 ms."""
    p = learned(CostAwarePolicy(h200_curve, 1.8e-3), 0.2, rounds=4000, seed=2)
    assert p.next_k() in (0, 1)
    assert p.next_k() == 0
    assert p.rate(0) == pytest.approx(1 / 8.45e-3)


def test_cost_aware_flat_curve_k_grows_with_acceptance() -> None:
    ks = []
    for i in range(1, 100):
        a = i / 100
        exact = CostAwarePolicy(flat_curve, 1e-3, prior=a, prior_weight=1e9, probe_every=0)
        ks.append(exact.next_k())  # no probing: the rate-optimal k for a known acceptance
    assert ks == sorted(ks), ks  # monotone
    assert ks[0] == 0 and ks[-1] == 8


def test_cost_aware_choice_follows_new_observations() -> None:
    p = CostAwarePolicy(flat_curve, 1e-3, prior=0.95, prior_weight=10)
    assert p.next_k() == 8
    for _ in range(200):
        p.observe(p.next_k(), 0)  # every first draft rejected
    assert p.next_k() == 0
    assert CostAwarePolicy(flat_curve, 1e-3, k_min=2, prior=0.01, prior_weight=1e9).next_k() == 2
    assert CostAwarePolicy(flat_curve, 1e-3, k_max=3, prior=0.99, prior_weight=1e9).next_k() == 3


def test_cost_aware_overhead_and_bonus_enter_the_rate() -> None:
    p = CostAwarePolicy(flat_curve, 1e-3, t_overhead=2e-3, bonus=False, prior=0.5, prior_weight=1e9)
    assert p.rate(0) == pytest.approx(1 / 12e-3)
    assert p.rate(3) == pytest.approx(expected_tokens(3, [0.5] * 3, False) / (3e-3 + 10e-3 + 2e-3))


def test_make_policy_cost_aware() -> None:
    s = Settings(policy="cost-aware", k_max=6, bonus=False)
    with pytest.raises(UserError, match="calibrat"):
        make_policy(s)
    curve = SimpleNamespace(t_verify=flat_curve, draft_step_s=1e-3)
    p = make_policy(s, curve)
    assert isinstance(p, CostAwarePolicy)
    assert (p.k_min, p.k_max, p.bonus) == (0, 6, False)
    assert [p.t_draft(k) for k in (0, 1, 5)] == pytest.approx([0.0, 1e-3, 5e-3])
    # A drafter's own price replaces k draft steps (a lookup costs next to nothing).
    free = make_policy(s, curve, lambda k: 0.0)
    assert free.priced(5) == pytest.approx(flat_curve(6))


def test_cost_aware_prices_a_free_drafter_at_the_verify_cost_alone() -> None:
    """With a drafter that costs nothing, a round costs t_verify(k + 1): on a flat curve the
    longest proposal wins as soon as acceptance is positive."""
    p = CostAwarePolicy(flat_curve, lambda k: 0.0, k_max=8, prior=0.6, prior_weight=1e9)
    assert p.priced(3) == pytest.approx(flat_curve(4))
    assert p.next_k() == 8


def test_cost_aware_probes_after_a_run_of_target_steps():
    """k = 0 teaches nothing, so after a run of target steps one round proposes k >= 1, the
    run doubling with each failed probe up to `probe_every`; when the probes are accepted the
    policy leaves k = 0 for good."""
    from core.cost.policy import CostAwarePolicy

    # A flat verify cost and a cheap draft: speculation pays once acceptance is high.
    p = CostAwarePolicy(lambda r: 0.01, 0.001, prior=0.01, prior_weight=50.0, probe_every=4)
    ks = []
    for _ in range(10):
        k = p.next_k()
        ks.append(k)
        p.observe(k, 0)
    # the first round probes too; then waits of 1, 2, 4 (= probe_every), 4 target steps
    assert ks == [1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1][:10]
    for _ in range(30):  # an easy passage: every probe is fully accepted
        k = p.next_k()
        p.observe(k, k)
    assert p.next_k() >= 1


def test_cost_aware_all_accepted_reaches_long_proposals_quickly():
    """Mentored decoding at TV = 1 accepts every draft. Measured on the H200 (draft 5 ms, the
    7B verify 8.6 ms at 1 row, ~21 ms from 8): with a fixed 0.5 prior for unseen positions the
    policy stayed at k <= 1 for the whole request. Pooled, short accepted probes lift the
    estimate of unseen positions, and k reaches k_max within a few rounds."""
    curve = {1: 8.6, 2: 15.1, 3: 18.8, 4: 25.2, 5: 26.4, 6: 31.8, 7: 35.6}

    def t_verify(rows: int) -> float:
        return curve.get(rows, 21.0) * 1e-3

    p = CostAwarePolicy(t_verify, 5e-3, k_max=31)
    ks = []
    for _ in range(14):
        k = p.next_k()
        ks.append(k)
        p.observe(k, k)  # every draft accepted
    # Probes 1, 2, 4, 8 back to back, then the policy's own choice grows with the evidence.
    assert ks[:4] == [1, 2, 4, 8] and ks == sorted(ks), ks
    assert ks[-1] == 31 and ks.index(31) <= 11, ks


def simulate(
    p: CostAwarePolicy, rounds: int, accept: float, *, seed: int = 0,
    script: Sequence[tuple[int, int]] = (), seconds: Callable[[int], float] | None = None,
) -> list[int]:
    """`rounds` rounds of `p` against a pair accepting each reached position with P = accept
    (seeded); `script` forces the first rounds' (k, accepted); `seconds(k)` times a round."""
    rng, forced, ks = random.Random(seed), list(script), []
    for _ in range(rounds):
        k = p.next_k()
        if forced:
            k, n = forced.pop(0)
        else:
            n = 0
            while n < k and rng.random() < accept:
                n += 1
        p.observe(k, n, None if seconds is None else seconds(k))
        ks.append(k)
    return ks


def test_cost_aware_failed_probes_stay_rare():
    """A pair accepting 60% per position: k = 0 wins on this curve, and probing stays a
    small share of the rounds (a failed probe restarts at 1 after 16 target steps)."""
    curve = {1: 8.6, 2: 15.1, 3: 18.8, 4: 25.2, 5: 26.4, 6: 31.8, 7: 35.6}
    p = CostAwarePolicy(lambda r: curve.get(r, 21.0) * 1e-3, 5e-3, k_max=31)
    ks = simulate(p, 256, 0.6)
    assert sum(k > 0 for k in ks) <= 256 // 8 and max(ks) <= 8, ks


def test_cost_aware_two_unlucky_rounds_do_not_cost_a_long_wait():
    """Measured on the H200 (72B shape, 0.5B draft, TV = 0.5, 88% accepted per position): the
    first two rounds accepted 3 of 7 and 0 of 7, the policy fell to k = 0, and a fixed wait of
    16 target steps followed twice (26% of the request's rounds). With the wait doubling from
    1, the policy is back to drafting within a few rounds and stays there."""
    v = {1: 59.6, 2: 109.6, 3: 147.8, 4: 186.5, 5: 221.9, 6: 260.6, 7: 302.8}
    p = CostAwarePolicy(lambda r: v.get(r, 107.0 if r <= 16 else 147.0) * 1e-3, 6.9e-3,
                        k_max=15)
    ks = simulate(p, 40, 0.88, script=[(7, 3), (7, 0)],
                  seconds=lambda k: p.priced(k) * (0.77 if k == 0 else 1.1))  # as measured
    assert ks[2] == 0, ks  # the two rounds did make k = 0 the best guess
    assert sum(k == 0 for k in ks) <= 4 and min(ks[-20:]) >= 7, ks


def test_cost_aware_chooses_within_the_request_s_last_tokens():
    """With 5 tokens left the engine can use k <= 5. On the H200's 72B curve 2-7 rows run the
    vector kernel (6 rows: 261 ms, five target steps), so k = 5 is worse than a target step
    at 88% acceptance: the best k within the limit is 0, where clamping the best k (10) gave 5."""
    v = {1: 59.6, 2: 109.6, 3: 147.8, 4: 186.5, 5: 221.9, 6: 260.6, 7: 302.8}
    p = CostAwarePolicy(lambda r: v.get(r, 107.0 if r <= 16 else 147.0) * 1e-3, 6.9e-3,
                        k_max=15, prior=0.88, prior_weight=1e9, probe_every=0)
    assert p.next_k() == 10 and p.next_k(limit=15) == 10  # a limit above k_max changes nothing
    assert p.next_k(limit=5) == 0
    a = p.acceptance()
    assert p.rate(0, a) > max(p.rate(k, a) for k in range(1, 6))
    assert p.next_k(limit=11) == 10  # within reach: the same choice


def test_cost_aware_stops_probing_a_source_the_evidence_says_cannot_pay():
    """SmolLM2-135M with its own 4-bit draft on the H200 (the recorded calibration: one row
    4.7 ms, 2-17 rows ~8 ms, a draft step 4.05 ms) pays only near full acceptance. At 55%
    the probes (every 16 target steps at most, ~3 steps each) lost 10-15%; once the rounds
    make even an optimistic acceptance too low to pay, the policy stops probing."""
    p = CostAwarePolicy(lambda r: 4.71e-3 if r == 1 else 8.0e-3, 4.05e-3, k_max=16)
    assert p.optimistic_acceptance() > 0.99  # no evidence: anything is plausible
    ks = simulate(p, 256, 0.55)
    assert sum(k > 0 for k in ks) <= 6, ks  # a fixed 16-step wait drafted in ~22 of them
    assert p.optimistic_acceptance() < 0.95  # a few rejected probes were enough here
    assert all(k == 0 for k in ks[64:]), ks


def test_cost_aware_unseen_positions_take_the_pooled_rate():
    p = CostAwarePolicy(flat_curve, 1e-3, prior=0.5, prior_weight=2.0)
    assert p.acceptance() == [0.5] * len(p.acceptance())
    for _ in range(20):
        p.observe(2, 2)  # positions 0 and 1 always accepted; 2.. never reached
    pooled = (40 + 1.0) / (40 + 2.0)
    acc = p.acceptance()
    assert acc[0] == acc[1] == pytest.approx((20 + 2 * pooled) / 22)
    assert acc[2:] == pytest.approx([pooled] * (len(acc) - 2))


def test_fastest_dispatch_reads_the_cheaper_measured_mode():
    """dispatch="fastest" pads to the matrix kernel exactly where the calibration measured it
    cheaper (the H200 curve: from 4 rows to 7), and the cost-aware policy sees that cost."""
    from core.cost.policy import fastest_dispatch, verify_cost
    from core.dispatch import VerifyCostCurve

    auto = {1: 8.6, 2: 15.1, 3: 18.8, 4: 25.2, 5: 26.4, 6: 31.8, 7: 35.6, 8: 21.5, 9: 20.3}
    gemm = {1: 8.9, 2: 22.9, 3: 23.8, 4: 23.5, 5: 23.9, 6: 24.2, 7: 23.5, 8: 20.8, 9: 20.7}
    curve = VerifyCostCurve(
        backend="cuda", device_name="H200", context_len=800,
        times={"auto": {r: v / 1e3 for r, v in auto.items()},
               "gemm": {r: v / 1e3 for r, v in gemm.items()}},
        draft_step_s=0.0033,
    )
    assert [fastest_dispatch(curve, r) for r in range(1, 10)] == (
        ["auto"] * 3 + ["gemm"] * 5 + ["auto"]
    )
    t = verify_cost(curve, "fastest")
    assert t(7) == pytest.approx(0.0235) and t(3) == pytest.approx(0.0188)
    assert verify_cost(curve, "auto")(7) == pytest.approx(0.0356)
    assert fastest_dispatch(None, 7) == "auto"


def test_cost_aware_observed_round_times_correct_the_curve():
    """The calibration said a draft step costs 1.8 ms; the rounds say drafted rounds take 3x
    their price. At 0.9 per-position acceptance that turns k = 8 into k = 0."""
    curve = {1: 8.6, 2: 15.1, 3: 18.8, 4: 25.2, 5: 26.4, 6: 31.8, 7: 35.6}

    def t_verify(rows: int) -> float:
        return curve.get(rows, 21.0) * 1e-3

    p = CostAwarePolicy(t_verify, 1.8e-3, prior=0.9, prior_weight=1e9, probe_every=0)
    assert p.next_k() == 8
    for _ in range(30):
        k = p.next_k()
        p.observe(k, k, seconds=3.0 * p.priced(k) if k else p.priced(0))
    # Drafted rounds stop once their observed price loses to a target step's.
    assert p.next_k() == 0 and 1.4 < p.scale[1] <= 3.0 and p.scale[0] == pytest.approx(1.0)
    # Target steps observed dearer than priced make drafting attractive again.
    for _ in range(30):
        p.observe(0, 0, seconds=4.0 * p.priced(0))
    assert p.next_k() == 8


def test_cost_aware_scale_ignores_missing_times_and_clips_outliers():
    p = CostAwarePolicy(flat_curve, 1e-3)
    p.observe(2, 2)  # no time: the scale is untouched
    assert p.scale == [1.0, 1.0]
    p.observe(2, 2, seconds=1e3)  # a stall: at most SCALE_CLIP[1] enters the EMA
    assert p.scale[1] == pytest.approx(1.0 + 0.2 * (5.0 - 1.0))
    p.observe(2, 2, seconds=1e3)  # the clip is relative to the scale the round meets
    assert p.scale[1] == pytest.approx(1.8 + 0.2 * (5.0 * 1.8 - 1.8))


def test_a_step_priced_far_too_cheap_is_corrected_by_the_steps_it_measures():
    """Run 8's pasted refactor: its curve priced a plain step at 0.12 ms, and the steps took
    5.83. A fixed clip held the steps' scale at 5x the price (0.6 ms), so no round could
    pay; clipped relative to the scale it meets, the EMA reaches the measured cost."""
    price = {1: 0.12e-3}

    def t_verify(rows: int) -> float:
        return price.get(rows, 6e-3 + rows * 0.2e-3)

    p = CostAwarePolicy(t_verify, 0.0, prior=0.9, prior_weight=1e9, probe_every=0)
    assert p.next_k() == 0  # the step looks 50x cheaper than any round
    for _ in range(40):
        p.observe(0, 0, seconds=5.83e-3)
    assert p.scale[0] * p.priced(0) == pytest.approx(5.83e-3, rel=0.02)
    assert p.next_k() > 0  # at 0.9 acceptance a round of 8 now beats a 5.83 ms step


def test_cost_aware_never_probes_where_no_k_could_pay():
    """MLX's CPU backend: verifying R rows costs ~R steps and a draft step ~ a target step
    (SmolLM2 and its 4-bit self-draft, ~93 ms each). Even at full acceptance a round of k
    drafts commits k + 1 tokens for 2k + 1 steps' time, so the policy must not probe at all;
    measured on the CPU before this rule, doubling probes ran k = 1, 2, 4, 8, 8, 8 at 0.51x."""
    p = CostAwarePolicy(lambda rows: 93e-3 * rows, 93e-3, k_max=8)
    ks = []
    for _ in range(40):
        k = p.next_k()
        ks.append(k)
        p.observe(k, k)
    assert ks == [0] * 40
