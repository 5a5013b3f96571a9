"""Pricing from a curve measured at a plan of rows (core/dispatch/curve.py `interpolate`,
core/dispatch/curve_cache.py `covers`).

On the CPU a calibration times 1..9, both sides of each predicted kernel change and
k_max + 1 (core/dispatch/row_plan.py), so `t_verify` prices the rows between by linear
interpolation: exact at every measured R, on the line between the two measured neighbours in a
gap, never across a kernel change measured on both sides; and a curve kept with every row
still covers the same settings.
"""

from __future__ import annotations

import pytest

from core.dispatch.curve import VerifyCostCurve, interpolate
from core.dispatch.curve_cache import covers, load_curve, save_curve
from core.settings import Settings

# A CUDA-like curve at a sparse plan's rows (the one the H200 ran in run 4): vector kernels (1 ms a row) up to 7 rows, a matrix
# kernel from 8 (flat 4 ms, then a step at the 16 | 17 and 32 | 33 tile edges).
PLAN = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 24, 32, 33]


def _cost(r: int) -> float:
    if r < 8:
        return 1e-3 * r
    return 4e-3 + (1e-3 if r > 16 else 0.0) + (1e-3 if r > 32 else 0.0) + 1e-5 * r


def _curve(rows) -> VerifyCostCurve:  # noqa: ANN001
    return VerifyCostCurve("cuda", "NVIDIA H200", 128, {"auto": {r: _cost(r) for r in rows}})


def test_measured_rows_are_exact_and_a_gap_is_the_line_between_its_neighbours():
    curve = _curve(PLAN)
    for r in PLAN:
        assert curve.t_verify(r) == _cost(r)
    # 9 -> 12: one kernel, one line
    for r in (10, 11):
        assert curve.t_verify(r) == pytest.approx(_cost(9) + (_cost(12) - _cost(9)) * (r - 9) / 3)
    # 17 -> 24 -> 32: the line of each gap's own two ends, not a line over the whole span
    assert curve.t_verify(20) == pytest.approx(_cost(17) + (_cost(24) - _cost(17)) * 3 / 7)
    assert curve.t_verify(28) == pytest.approx(_cost(24) + (_cost(32) - _cost(24)) * 4 / 8)
    # within a tile the matrix kernel's cost is flat: the interpolation is within 1% of it
    for r in range(8, 33):
        assert curve.t_verify(r) == pytest.approx(_cost(r), rel=0.01)


def test_a_kernel_change_measured_on_both_sides_is_a_jump_not_a_slope():
    """7 (vector, 7 ms) and 8 (matrix, 4.08 ms) are both measured: each is priced as measured,
    and a verification past 8 reads the matrix side's line, never one through 7."""
    curve = _curve(PLAN)
    assert curve.t_verify(7) == pytest.approx(7e-3)
    assert curve.t_verify(8) == pytest.approx(_cost(8))
    assert curve.boundary() == 8  # the measured boundary is where the cost drops
    assert interpolate({7: 7e-3, 8: 4e-3, 12: 4e-3}, 10) == pytest.approx(4e-3)
    # the same table missing 7: what the plan prevents, a slope drawn across the change
    assert interpolate({6: 6e-3, 9: 4e-3}, 8) == pytest.approx(4.667e-3, rel=1e-3)


def test_a_plan_curve_covers_what_an_every_row_curve_covers(tmp_path):
    """`covers` reads the largest measured R: a plan's curve and a curve kept with every row
    (written before the plan) both cover k_max = 32; one measured for k_max = 8 does not."""
    s32 = Settings(mode="speculative", policy="cost-aware", k_max=32)
    assert covers(_curve(PLAN), s32)
    assert covers(_curve(range(1, 34)), s32)
    assert not covers(_curve(range(1, 10)), s32)
    assert covers(_curve(range(1, 10)), s32.replace(k_max=8))
    # a kept every-row curve is read back as it was: the file's format did not change
    from core.identity import ModelIdentity

    ident = ModelIdentity("default", kind="default", architecture="llama", bits=4,
                          sha256="ab" * 32)
    from core.dispatch.curve_cache import curve_key
    from tests.helpers.forward_rows import H200

    key = curve_key({"target": ident}, H200, "0.32.4", s32)
    save_curve(key, _curve(range(1, 34)), tmp_path)
    found = load_curve(key, s32, tmp_path)
    assert found.kept is not None and found.kept.curve.rows == list(range(1, 34))


# -- the compiled step's prices (core/primitives/compiled.py) -------------------------------------


def _stepped(compiled_scale: float, step: str = "eager") -> VerifyCostCurve:
    """The CUDA-like curve with the compiled forward's rows at `compiled_scale` of eager's."""
    times = {"auto": {r: _cost(r) for r in PLAN},
             "compiled": {r: _cost(r) * compiled_scale for r in PLAN}}
    return VerifyCostCurve("cuda", "NVIDIA H200", 128, times, step=step)


def test_auto_takes_the_compiled_step_only_where_the_curve_measured_it_no_slower():
    from core.dispatch.curve import compiled_pays, run_step

    assert compiled_pays(_stepped(0.6)) and compiled_pays(_stepped(1.0))  # no slower: taken
    assert not compiled_pays(_stepped(1.05))
    assert not compiled_pays(_curve(PLAN))  # never measured compiled: eager
    # auto reads the step the calibration chose (the curve's `step`); a named step is taken
    assert run_step("auto", _stepped(0.6, step="compiled")) == "compiled"
    assert run_step("auto", _stepped(0.6, step="eager")) == "eager"
    assert run_step("auto", None) == "eager"  # no calibration: eager
    assert run_step("compiled", None) == "compiled" and run_step("eager", _stepped(0.6)) == "eager"


def test_the_policy_prices_the_step_it_runs():
    """Under the compiled step every row count, one included, is priced by the compiled
    forward's own measurements; under eager by eager's, the compiled mode never taken for the
    plain step's price (one_row_price)."""
    from core.dispatch.curve import one_row_price, verify_cost

    curve = _stepped(0.5, step="compiled")
    compiled = verify_cost(curve, "auto", step="compiled")
    eager = verify_cost(curve, "auto", step="eager")
    for r in PLAN:
        assert compiled(r) == pytest.approx(0.5 * _cost(r))
        assert eager(r) == pytest.approx(_cost(r))
    assert one_row_price(curve) == pytest.approx(_cost(1))
    assert verify_cost(curve, "auto")(4) == pytest.approx(0.5 * _cost(4))  # the curve's own step


def test_a_curve_keeps_its_step_through_a_file():
    curve = _stepped(0.5, step="compiled")
    back = VerifyCostCurve.from_dict(curve.to_dict())
    assert back.step == "compiled" and back.times["compiled"] == curve.times["compiled"]
    assert VerifyCostCurve.from_dict(_curve(PLAN).to_dict()).step == "eager"  # older files too


def test_a_tree_run_needs_the_tree_s_rows_and_an_old_curve_still_loads(tmp_path):
    """A tree source verifies up to 64 rows: a curve to 33 (what every kept curve before the
    tree holds) does not cover a tree run, one to 64 does (and one kept to 65, when trees had
    64 nodes), and covers every chain run too. The format is the same: a 33-row curve kept
    before still loads for a chain run, and for a tree run is a miss with no notice (measured
    again to 64, then kept), never an error."""
    from core.dispatch.curve_cache import curve_key, curve_missing
    from core.identity import ModelIdentity
    from tests.helpers.forward_rows import H200

    chain = Settings(mode="speculative", policy="cost-aware", draft_source="lookup", k_max=32)
    tree = chain.replace(draft_source="tree")
    assert covers(_curve(range(1, 34)), chain) and not covers(_curve(range(1, 34)), tree)
    assert covers(_curve(range(1, 66)), tree) and covers(_curve(range(1, 66)), chain)
    assert covers(_curve(range(1, 65)), tree)
    assert not covers(_curve([*range(1, 10), 33, 63]), tree.replace(k_max=8))
    # a run switched to the tree with a short curve calibrates first (the app's `d`)
    assert curve_missing(_curve(range(1, 34)), tree)
    assert not curve_missing(_curve(range(1, 34)), chain)
    assert not curve_missing(_curve(range(1, 66)), tree)
    ident = ModelIdentity("default", kind="default", architecture="llama", bits=4,
                          sha256="ab" * 32)
    key = curve_key({"target": ident}, H200, "0.32.4", chain)
    assert key == curve_key({"target": ident}, H200, "0.32.4", tree)  # one file for both
    save_curve(key, _curve(range(1, 34)), tmp_path)
    assert load_curve(key, chain, tmp_path).kept is not None
    missed = load_curve(key, tree, tmp_path)
    assert missed.kept is None and missed.notice is None
    save_curve(key, _curve(range(1, 66)), tmp_path)
    assert load_curve(key, tree, tmp_path).kept.curve.rows == list(range(1, 66))
    assert load_curve(key, chain, tmp_path).kept is not None
