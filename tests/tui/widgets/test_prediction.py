"""Issue 14 in the app: predicted speedup against k beside the speedup this run measured."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from core.events import CommittedToken, PhaseTimings, RoundEvent
from core.settings import Settings
from tests.helpers.app_turns import calibrated_kernels
from tui.engine_info import CurveInfo
from tui.stats import RoundStats
from tui.widgets.composer import Composer
from tui.widgets.kernels import KernelsPanel
from tui.widgets.plot_base import StaticPlot
from tui.widgets.prediction import SpeedupPlot, speedup_view

# R=3 is not measured: t_verify(3) interpolates to 14 ms. The cost per row drops from R=4.
CURVE = CurveInfo(t_verify={1: 0.010, 2: 0.012, 4: 0.016, 8: 0.020}, draft_step_s=0.002,
                  boundary=4, predicted_boundary=4)


def _round(i: int, k: int, acc: int, draft: float, verify: float, other: float) -> RoundEvent:
    toks = [CommittedToken(1, "accepted") for _ in range(acc)]
    toks.append(CommittedToken(2, "bonus" if acc == k else "corrected"))
    t = PhaseTimings(draft=draft, verify=verify, other=other, total=draft + verify + other)
    return RoundEvent(i, tuple(toks), proposed=k, accepted=acc, rows=k + 1, timings=t,
                      traced=True, source="model" if k else "")


def _stats(target_step: bool) -> RoundStats:
    stats = RoundStats()
    if target_step:  # one target-only token in 10 ms
        stats.add(_round(0, 0, 0, 0.0, 0.010, 0.0))
    stats.add(_round(1, 2, 2, 0.004, 0.012, 0.002))  # 3 tokens (bonus) in 18 ms
    stats.add(_round(2, 2, 1, 0.004, 0.022, 0.002))  # 2 tokens in 28 ms
    return stats


@pytest.mark.parametrize("target_step", [True, False])
def test_view_numbers_by_hand(target_step: bool) -> None:
    v = speedup_view(CURVE, _stats(target_step))
    assert v is not None
    # Either way the step is 10 ms: measured by round 0, or the curve's t_verify(1).
    assert v.step_measured is target_step and v.t_step_s == pytest.approx(0.010)
    # acceptance a = [1.0, 0.5] (position 3+ carries 0.5); price 2 ms a draft
    per_k = {int(p.k): p for p in v.prediction.per_k}
    assert sorted(per_k) == list(range(8))  # k up to the curve's last row minus one
    assert per_k[0].speedup == pytest.approx(1.0)
    # k=1: E = 1 + 0 + bonus 1 = 2 tokens in 2 + 12 ms -> 2 / 14 ms x 10 ms
    assert per_k[1].tokens == pytest.approx(2.0)
    assert per_k[1].speedup == pytest.approx(2 / 0.014 * 0.010)
    # k=2: E = 1 + 0.5 + 0.5 correction + 0.5 bonus = 2.5 in 4 + 14 ms
    assert per_k[2].tokens == pytest.approx(2.5)
    assert per_k[2].speedup == pytest.approx(2.5 / 0.018 * 0.010)
    # k=3: E = 1.75 + 0.75 + 0.25 = 2.75 in 6 + 16 ms
    assert per_k[3].speedup == pytest.approx(2.75 / 0.022 * 0.010)
    assert v.prediction.best.k == 1
    assert v.boundary_k == 3 and v.chosen_k == 2 and v.source == "model"
    # measured: 5 tokens in 46 ms of speculative rounds, x 10 ms
    assert v.spec_rounds == 2
    assert v.measured == pytest.approx(5 / 0.046 * 0.010)
    assert v.predicted is not None and v.predicted.k == 2
    assert v.predicted.speedup == pytest.approx(2.5 / 0.018 * 0.010)
    assert v.efficiency == pytest.approx(0.09 / 0.115)  # 0.78 < 0.85: a verdict
    assert v.mean_ms == pytest.approx({"draft": 4.0, "verify": 17.0, "rest": 2.0, "round": 23.0})
    # verify: 17 ms measured against 14 predicted (+3) beats the rest's +2 and draft's 0
    assert v.verdict is not None and v.verdict.startswith("verify took the difference")
    assert "17.0 ms measured against 14.0 ms predicted" in v.verdict and "(+3.0 ms)" in v.verdict


def test_lookup_rounds_cost_no_draft_and_no_verdict_when_close() -> None:
    stats = RoundStats()
    ev = _round(0, 2, 2, 0.0, 0.014, 0.0)  # 3 tokens in 14 ms: exactly t_verify(3)
    stats.add(RoundEvent(**{**ev.__dict__, "source": "lookup"}))
    v = speedup_view(CURVE, stats)
    assert v is not None and v.source == "lookup"
    assert v.prediction.at(2).draft_s == 0.0
    assert v.efficiency == pytest.approx(1.0) and v.verdict is None
    assert speedup_view(CurveInfo(t_verify={}), stats) is None


async def test_view_renders_after_fake_rounds_and_v_shows_the_numbers(make_app) -> None:
    app = make_app(Settings(k=4))
    async with app.run_test(size=(160, 60)) as pilot:
        await calibrated_kernels(pilot)
        view = app.query_one(KernelsPanel).query_one(SpeedupPlot)
        v = view.view
        assert v is not None and v.spec_rounds == len(app.runs_state.stats.rounds) > 0
        assert v.chosen_k == 4 and v.boundary_k == 7  # the fake curve's R=8
        assert [p.k for p in v.prediction.per_k] == list(range(9))
        assert v.measured is not None and v.efficiency is not None
        assert not v.step_measured  # the fake run has no target-only rounds
        summary = str(view.query_one("#speedup-summary", Static).render())
        assert "efficiency" in summary and "curve's t_verify(1)" in summary
        plot = view.query_one(StaticPlot)
        table = view.query_one("#speedup-table", DataTable)
        assert plot.display and not table.display
        await pilot.press("escape")
        assert not app.query_one("#prompt", Composer).has_focus
        await pilot.press("v")
        assert not plot.display and table.display and table.row_count == 9
        marks = str(table.get_row_at(4)[5])
        assert "last" in marks
        assert "kernel" in str(table.get_row_at(7)[5])
