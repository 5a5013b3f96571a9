"""The one-pass prices of every k are the per-k ones to the last bit (issue 28, run 6).

The cost-aware policy weighs every k of a source on each plain step it considers drafting;
`expected_tokens_upto` and `CostAwarePolicy.rates` do in O(k) what k calls of the O(k) sum
did, so a hybrid's plain steps pay a fifth of the host work. The choice must not move: each
value is compared with `==`, never approximately, and the decisions with the per-k ones.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from core.cost.policy import CopyRunPolicy, CostAwarePolicy
from core.cost.prediction import expected_tokens, expected_tokens_upto
from core.settings import MAX_K

accepts = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=0, max_size=40)


@given(accepts, st.integers(0, MAX_K), st.booleans())
def test_expected_tokens_upto_is_expected_tokens_for_every_k(a, k_max, bonus) -> None:
    got = expected_tokens_upto(k_max, a, bonus)
    assert got == [expected_tokens(k, a, bonus) for k in range(k_max + 1)]


def _curve_prices(rows: int) -> float:
    """A verification that costs little more per row (a GPU), with a dearer stretch."""
    return 0.004 + 0.0002 * rows + (0.003 if 2 <= rows <= 7 else 0.0)


@settings(max_examples=60)
@given(accepts, st.integers(1, MAX_K), st.booleans(), st.floats(0.3, 3.0), st.floats(0.3, 3.0),
       st.sampled_from([0.0, 0.001, 0.004]))
def test_rates_are_rate_for_every_k(a, k_max, bonus, s0, s1, draft) -> None:
    p = CostAwarePolicy(_curve_prices, draft, k_max=k_max, k_min=0, bonus=bonus,
                        t_accept=lambda r: 0.0001 * r)
    p.scale = [s0, s1]
    acc = a or [0.5]
    assert p.rates(acc, k_max) == [p.rate(k, acc) for k in range(k_max + 1)]


def test_could_pay_and_the_probe_choose_as_the_per_k_maximum_did() -> None:
    """The probe's k and the could-pay verdict, against a brute-force max over `rate`."""
    for k_max in (1, 4, 32):
        for draft in (0.0, 0.002, 0.02):
            for cls in (CostAwarePolicy, CopyRunPolicy):
                p = cls(_curve_prices, draft, k_max=k_max, k_min=0, bonus=True)
                hope = [p.optimistic_acceptance()] * MAX_K
                brute = max(p.rate(k, hope) for k in range(1, k_max + 1))
                k, best = p._best_drafting(hope)
                assert best == brute and p.rate(k, hope) == brute
                assert k == min(kk for kk in range(1, k_max + 1) if p.rate(kk, hope) == brute)


@settings(max_examples=60)
@given(accepts, st.integers(0, MAX_K), st.integers(0, 3), st.booleans(), st.floats(0.3, 3.0),
       st.floats(0.3, 3.0), st.sampled_from([0.0, 0.001, 0.004]))
def test_best_is_predicts_best_k(a, k_max, k_min, bonus, s0, s1, draft) -> None:
    """The cached choice (`_best`) is core.cost.prediction.predict's best k, ties included."""
    from core.cost.prediction import predict

    p = CostAwarePolicy(_curve_prices, draft, k_max=MAX_K, k_min=min(k_min, k_max), bonus=bonus,
                        t_accept=lambda r: 0.0001 * r)
    p.scale = [s0, s1]
    p.acceptance = lambda: a or [0.5]  # type: ignore[method-assign]
    want = predict(p.cost, a or [0.5], bonus=bonus, k_max=k_max, k_min=p.k_min,
                   scale=(s0, s1)).best.k
    assert p._best(k_max) == want


ops = st.lists(st.tuples(st.sampled_from(["step", "round", "offer", "ask"]),
                         st.integers(0, 12), st.integers(0, 12), st.floats(0.5e-3, 40e-3),
                         st.integers(1, 6)), min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(ops, st.sampled_from([CostAwarePolicy, CopyRunPolicy]), st.sampled_from([0.0, 0.004]))
def test_the_kept_drafting_choice_decides_as_pricing_afresh(seq, cls, draft) -> None:
    """The drafting choice kept between plain steps (`_drafting`) answers every `next_k` as
    pricing every k again would, through steps, drafted rounds, new copy offers and the
    request's last tokens: the kept rate is only reused while what it reads is unchanged."""
    from core.drafting.base import Offer

    kept = cls(_curve_prices, draft, k_max=16, k_min=0, bonus=True, probe_every=4)
    fresh = cls(_curve_prices, draft, k_max=16, k_min=0, bonus=True, probe_every=4)
    fresh._drafting = lambda which, accept, lo=None, drafted=None: fresh._best_drafting(accept(), lo, drafted)  # type: ignore[method-assign]  # noqa: E501
    for op, a, b, seconds, kind in seq:
        for p in (kept, fresh):
            if op == "step":
                p.observe(0, 0, seconds)
            elif op == "round":
                p.observe(max(a, 1), min(b, max(a, 1)), seconds)
            elif op == "offer" and isinstance(p, CopyRunPolicy):
                p.consider(Offer("lookup", a or None, kind))
        if op == "ask":
            assert kept.next_k(b or None) == fresh.next_k(b or None)
        assert kept.next_k() == fresh.next_k()


@settings(max_examples=60)
@given(accepts, st.integers(1, MAX_K), st.booleans(), st.floats(0.05, 20.0),
       st.sampled_from([0.0, 0.001, 0.004]))
def test_a_plain_steps_rate_is_rate_at_k_zero(a, k_max, bonus, s0, draft) -> None:
    """The one-division rate of a plain step that could-pay and the choice compare with is
    `rate(0, ...)` to the last bit, whatever the acceptance (none enters it)."""
    for cls in (CostAwarePolicy, CopyRunPolicy):
        p = cls(_curve_prices, draft, k_max=k_max, k_min=0, bonus=bonus,
                t_accept=lambda r: 0.0001 * r)
        p.scale = [s0, 1.0]
        assert p._step_rate() == p.rate(0, a or [0.5]) == p.rate(0, [1.0] * MAX_K)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.floats(0.5e-3, 40e-3)), min_size=1,
                max_size=40))
def test_observing_with_the_kept_prices_scales_as_the_curve_does(seq) -> None:
    """A step's or round's observed cost against the kept calibrated seconds moves the cost
    scale exactly as reading the curve did."""
    kept = CostAwarePolicy(_curve_prices, 0.001, k_max=16, k_min=0, bonus=True)
    curve = CostAwarePolicy(_curve_prices, 0.001, k_max=16, k_min=0, bonus=True)
    kept.next_k()  # prices every k once: the kept seconds
    assert kept._round_s is not None
    for proposed, seconds in seq:
        curve._round_s = None  # reads the curve at every observe
        kept.observe(proposed, min(proposed, 3), seconds)
        curve.observe(proposed, min(proposed, 3), seconds)
        assert kept.scale == curve.scale


@settings(max_examples=60)
@given(st.integers(1, MAX_K), st.integers(0, MAX_K), st.floats(0.001, 0.02),
       st.floats(0.0, 0.01), st.sampled_from([CostAwarePolicy, CopyRunPolicy]))
def test_a_charged_break_prices_the_round_as_if_clocked_with_it(k, n, seconds, extra, cls) -> None:
    """`charge(k, extra)` after a round's `observe` leaves the drafted rounds' scale where
    observing the round with the extra seconds would (within the clip), and the choice is
    made afresh from it."""
    n = min(n, k)
    a, b = (cls(_curve_prices, 0.0, k_max=MAX_K, k_min=0, bonus=True) for _ in range(2))
    a.next_k(), b.next_k()
    priced = a.priced(k)
    assume(0.2 * priced < seconds and seconds + extra < 5.0 * priced)  # SCALE_CLIP's range
    a.observe(k, n, seconds)
    a.charge(k, extra)
    b.observe(k, n, seconds + extra)
    assert abs(a.scale[1] - b.scale[1]) <= 1e-12 * max(1.0, b.scale[1])
    assert a.scale[0] == b.scale[0]
    assert a.next_k() == b.next_k()
