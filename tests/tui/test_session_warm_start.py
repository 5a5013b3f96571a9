"""The app's narrow start (tui/session.py with core.runtime.warm_start.NarrowGate, issue 31):
on a GPU whose quantized-GEMM kernels are not compiled, every turn and calibration stays below
them until the idle warm-up has compiled every size; then the session starts full and forgets
a curve too short for the full settings.

The machine is faked (the backend query and MLX's kernel cache folder); the forwards run on
the tiny random-weight pair, each one's row count recorded."""

from __future__ import annotations

import threading

import pytest

from core.settings import Settings, first_run_settings
from tests.helpers.cold_gpu import cold_gpu

REPEAT = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] * 6
RUN = Settings(draft_source="hybrid", policy="fixed", k=16, k_max=16, temperature=0.0,
               rule="greedy", max_tokens=32, ignore_eos=True)


@pytest.fixture
def cold_a100(monkeypatch, tmp_path) -> list[int]:
    return cold_gpu(monkeypatch, tmp_path)


def _turn(session, settings: Settings) -> list:
    return list(session.generate(REPEAT, settings, threading.Event(), lambda: settings))


def test_the_app_starts_narrow_then_full_once_the_idle_warm_up_is_done(cold_a100, caplog):
    from tui.session import MLXSession

    rows = cold_a100
    session = MLXSession("shape:tiny", "shape:tiny-draft")
    assert session.narrow.rows == 7
    rows.clear()
    out = _turn(session, RUN)
    assert out[-1].tokens == 32 and max(rows) <= 7, sorted(set(rows))
    assert any("forwards kept to 7 rows" in r.getMessage() for r in caplog.records)
    # a calibration asked meanwhile (a first cost-aware turn, or `c`) measures 7 rows
    rows.clear()
    info = session.calibrate(first_run_settings(), lambda f, label: None)
    assert max(rows) <= 7 and max(session.engine.cost_curve.times["auto"]) == 7
    assert info is not None and not session.needs_curve(first_run_settings())
    # the idle warm-up compiles every size, smallest first; then the start is full
    while session.warm_idle(RUN) is not None:
        pass
    assert session.narrow.rows is None
    assert session.needs_curve(first_run_settings()), "the 7-row curve is too short now"
    rows.clear()
    session.engine.reset()
    _turn(session, RUN)
    assert max(rows) > 7
