"""core.cost.prediction: expected tokens, seconds and speedup per round, checked by hand, against a
fake calibration curve, against the cost-aware policy (one formula), and by property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.cost.policy import CostAwarePolicy
from core.cost.prediction import (
    RoundCost,
    acceptance_at,
    expected_tokens,
    predict,
    predict_k,
    predict_schedule,
)
from core.dispatch import VerifyCostCurve


def flat(rows: int) -> float:
    return 10e-3  # every verification costs one 10 ms step, whatever its rows


def test_flat_curve_free_drafts_full_acceptance_by_hand():
    """Free drafts, flat verification, everything accepted: k + 1 tokens per 10 ms round, so
    the speedup is k + 1 with the bonus and k without."""
    cost = RoundCost(flat, lambda k: 0.0)
    for k in (1, 4, 8):
        with_bonus = predict_k(cost, k, [1.0] * k, bonus=True)
        assert with_bonus.tokens == k + 1
        assert with_bonus.seconds == pytest.approx(10e-3)
        assert with_bonus.tok_s == pytest.approx((k + 1) / 10e-3)
        assert with_bonus.speedup == pytest.approx(k + 1)
        assert predict_k(cost, k, [1.0] * k, bonus=False).speedup == pytest.approx(k)
    best = predict(cost, [1.0] * 8, k_max=8).best
    assert best.k == 8 and best.speedup == pytest.approx(9.0)


def test_nothing_accepted_is_one_token_per_round_and_never_pays():
    """Acceptance 0: each round commits only the correction, so any draft or extra row is
    pure cost and the best k is 0 (a target step, speedup 1)."""
    cost = RoundCost(lambda r: 10e-3 + (r - 1) * 1e-3, 2e-3)
    p = predict(cost, [0.0] * 8, k_max=8)
    for kp in p.per_k:
        assert kp.tokens == 1.0
    assert p.at(0).speedup == pytest.approx(1.0)
    assert p.at(3).seconds == pytest.approx(3 * 2e-3 + 13e-3)
    assert p.at(3).speedup == pytest.approx(10e-3 / 19e-3)
    assert p.best.k == 0


def test_hand_computed_half_acceptance():
    # a = 0.5 at both positions: drafts 0.5 + 0.25, correction 0.75, bonus 0.25 -> 1.75
    cost = RoundCost(flat, 1e-3, t_step=8e-3, t_overhead=1e-3)
    kp = predict_k(cost, 2, [0.5, 0.5], bonus=True)
    assert kp.tokens == pytest.approx(1.75)
    assert (kp.draft_s, kp.verify_s) == pytest.approx((2e-3, 10e-3))
    assert kp.seconds == pytest.approx(13e-3)  # 2 draft steps, one verify, the overhead
    assert kp.speedup == pytest.approx(1.75 / 13e-3 * 8e-3)  # against the measured step
    k0 = predict_k(cost, 0, [], bonus=True)
    assert k0.seconds == pytest.approx(9e-3) and k0.speedup == pytest.approx(8 / 9)
    assert expected_tokens(2, [0.5, 0.5], False) == pytest.approx(1.5)


def test_positions_past_the_list_repeat_the_last():
    assert acceptance_at([0.9, 0.5], 5) == 0.5 and acceptance_at([], 0) == 0.0
    assert expected_tokens(4, [1.0], True) == 5.0


def test_against_a_fake_calibration_curve():
    """The H200's 7B shape (section 7 of docs/benchmarks/archive/h200.md): the vector kernel up to 7
    rows, the matrix kernel from 8, so k = 7 (8 rows) beats k = 6 (7 rows) at full acceptance."""
    ms = {1: 8.6, 2: 15.1, 3: 18.8, 4: 25.2, 5: 26.4, 6: 31.8, 7: 35.6, 8: 21.5, 9: 20.3}
    curve = VerifyCostCurve("cuda", "H200", 800, {"auto": {r: t * 1e-3 for r, t in ms.items()}},
                            draft_step_s=3.4e-3)
    cost = RoundCost.from_curve(curve, "auto")
    assert cost.step == pytest.approx(8.6e-3)
    p = predict(cost, [1.0] * 8, k_max=8, bonus=True)
    k6, k7 = p.at(6), p.at(7)
    assert k7.seconds == pytest.approx(7 * 3.4e-3 + 21.5e-3)
    assert k7.speedup == pytest.approx(8 / (7 * 3.4e-3 + 21.5e-3) * 8.6e-3)
    assert k7.tok_s > k6.tok_s and p.best.k == 8
    # a lookup source costs nothing to draft: the same rounds cost their verification only
    free = RoundCost.from_curve(curve, "auto", lambda k: 0.0, t_step=6e-3)
    assert predict_k(free, 7, [1.0] * 7, True).seconds == pytest.approx(21.5e-3)
    assert predict_k(free, 7, [1.0] * 7, True).speedup == pytest.approx(8 / 21.5e-3 * 6e-3)
    # without a draft step in the curve a model drafter is priced at a target step
    nodraft = VerifyCostCurve("cuda", "H200", 800, curve.times)
    assert RoundCost.from_curve(nodraft).t_draft(3) == pytest.approx(3 * 8.6e-3)
    # a forced dispatch reads its own measurements
    curve.times["gemm"] = {r: 23.5e-3 for r in range(1, 10)}
    assert RoundCost.from_curve(curve, "gemm").verify_s(4) == pytest.approx(23.5e-3)
    assert RoundCost.from_curve(curve, "fastest").verify_s(4) == pytest.approx(23.5e-3)
    assert RoundCost.from_curve(curve, "fastest").verify_s(1) == pytest.approx(15.1e-3)


def test_a_mix_of_k_is_expected_tokens_over_expected_seconds():
    cost = RoundCost(flat, 1e-3)
    a = [0.8, 0.6, 0.4, 0.2]
    mix = predict_schedule([(cost, {4: 3, 0: 1}, a)], True)
    tokens = 3 * expected_tokens(4, a, True) + 1
    seconds = 3 * (4e-3 + 10e-3) + 10e-3
    assert mix is not None
    assert mix.k == pytest.approx(3.0) and mix.tokens == pytest.approx(tokens / 4)
    assert mix.tok_s == pytest.approx(tokens / seconds)
    assert mix.speedup == pytest.approx(tokens / seconds * 10e-3)
    one = predict_schedule([(cost, {4: 7}, a)], True)
    assert one is not None and one.speedup == pytest.approx(predict_k(cost, 4, a, True).speedup)
    assert predict_schedule([(cost, {}, a)], True) is None


def test_the_policy_rate_is_the_prediction():
    """One formula: the cost-aware policy's rate and choice are core.cost.prediction's."""

    def curve(r: int) -> float:
        return 8e-3 + 0.5e-3 * r

    p = CostAwarePolicy(
        curve, 2e-3, k_max=8, t_overhead=0.5e-3, prior=0.7, prior_weight=1e9, probe_every=0
    )  # no probes: the choice is the formula's alone
    a = p.acceptance()
    pred = predict(RoundCost(curve, lambda k: 2e-3 * k, t_overhead=0.5e-3), a, k_max=8)
    for k in range(9):
        assert p.rate(k) == pytest.approx(pred.at(k).tok_s, rel=1e-12)
    assert p.next_k() == pred.best.k
    p.scale = [1.0, 2.0]  # drafted rounds observed twice as dear as priced
    p._cache = None
    scaled = predict(p.cost, a, k_max=8, scale=(1.0, 2.0))
    assert p.rate(3) == pytest.approx(scaled.at(3).tok_s)
    assert p.next_k() == scaled.best.k


acceptances = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(acceptances, st.integers(0, 12), st.booleans())
def test_expected_tokens_lies_in_one_to_k_plus_one(a, k, bonus):
    e = expected_tokens(k, a, bonus)
    assert 1.0 - 1e-12 <= e <= k + 1 + 1e-12
    if not bonus:
        assert e <= max(k, 1) + 1e-12


@settings(max_examples=200, deadline=None)
@given(acceptances, st.data(), st.integers(1, 12), st.booleans())
def test_expected_tokens_is_monotone_in_acceptance(a, data, k, bonus):
    """Raising any position's acceptance never lowers the expected tokens, nor the speedup."""
    i = data.draw(st.integers(0, len(a) - 1))
    higher = list(a)
    higher[i] = data.draw(st.floats(a[i], 1.0))
    assert expected_tokens(k, higher, bonus) >= expected_tokens(k, a, bonus) - 1e-12
    cost = RoundCost(lambda r: 5e-3 + 1e-3 * r, 1e-3)
    lo, hi = predict_k(cost, k, a, bonus), predict_k(cost, k, higher, bonus)
    assert hi.speedup >= lo.speedup - 1e-12
    assert math.isclose(hi.seconds, lo.seconds)  # acceptance moves tokens, not time
