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
                  progress=progress, cancel=cancel)
    assert seen == [1, 2, 3]  # not one forward more
    assert "cancelled" in one_sentence(exc.value)


def test_a_calibration_times_the_compiled_forward_and_auto_records_its_choice() -> None:
    """Mode "compiled" times the target's rows through the compiled forward (its graphs
    traced before any sample); step auto then records the step the pair runs here, and the
    draft's chain is timed through it."""
    from core.dispatch import calibrate
    from core.dispatch.curve import compiled_pays
    from tests.helpers.tiny import tiny_llama

    target, draft = tiny_llama(2, seed=1), tiny_llama(1, seed=2)
    curve = calibrate(target, draft, rows=[1, 4, 9], repeats=3, context=8,
                      modes=("auto", "compiled"), step="auto")
    assert set(curve.times) == {"auto", "compiled"}
    assert set(curve.times["compiled"]) == {1, 4, 9}
    assert curve.step == ("compiled" if compiled_pays(curve) else "eager")
    eager = calibrate(target, draft, rows=[1, 4], repeats=1, context=8, step="eager")
    assert eager.step == "eager" and "compiled" not in eager.times
