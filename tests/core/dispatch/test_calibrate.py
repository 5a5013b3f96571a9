"""The calibration (core/dispatch/calibrate.py) stops when cancelled (issue 24)."""

from __future__ import annotations

import pytest

from tests.helpers.models import one_sentence


@pytest.mark.usefixtures("wide_console")
def test_a_calibration_stops_when_cancelled() -> None:
    import threading

    from core.dispatch import CalibrationCancelled, calibrate
    from tests.helpers.tiny import tiny_llama

    cancel, seen = threading.Event(), []

    def progress(done: int, total: int, label: str) -> None:
        seen.append(done)
        if done == 3:
            cancel.set()  # Esc, while the third forward's numbers come in

    with pytest.raises(CalibrationCancelled) as exc:
        calibrate(tiny_llama(1, seed=1), tiny_llama(1, seed=2), rows=4, repeats=3, context=8,
                  progress=progress, cancel=cancel)  # fmt: skip
    assert seen == [1, 2, 3]  # not one forward more
    assert "cancelled" in one_sentence(exc.value)
