"""The app's first start at the default's k_max = 32 (tui/session.py over core/dispatch/row_plan.py):
its calibration reports progress up to the plan's own total (never past it, never stopping
short) and the Kernels panel's curve holds exactly the plan's rows. The forwards are real, on
the tiny random-weight pair; on this CPU the plan is 1..9 and 33."""

from __future__ import annotations

from core.settings import first_run_settings


def test_a_first_start_calibration_counts_to_the_plan_s_total_and_shows_its_rows(
        tmp_path, monkeypatch):
    from tui.session import MLXSession

    # kept in a folder of its own: a covering curve in the suite's folder would spare a later
    # test (a first `chat` on this pair) the calibration it checks
    monkeypatch.setenv("SPECDEC_TUI_CURVES", str(tmp_path))

    session = MLXSession("shape:tiny", "shape:tiny-draft")
    settings = first_run_settings()
    assert settings.k_max == 32
    seen: list[tuple[float, str]] = []
    info = session.calibrate(settings, lambda fraction, label: seen.append((fraction, label)))
    plan = [1, 2, 3, 4, 5, 6, 7, 8, 9, 33]
    assert sorted(info.t_verify) == plan  # the Kernels panel's table and plot
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] > 0.0
    # one report per forward: 3 timed passes of the plan (no untimed one on the CPU), then
    # the draft's chain once a pass (its untimed pass kept: a fused draft compiles)
    assert len(seen) == 3 * len(plan) + 4
    assert {label for _, label in seen[: 3 * len(plan)]} == {f"auto: {r} rows" for r in plan}
    assert not session.needs_curve(settings)  # it covers k_max + 1 = 33
