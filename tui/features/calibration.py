"""The verify-cost calibration, as SpecDecApp's feature (tui/features/base.py): `c`, the one a
first cost-aware turn runs (the bridge's), its progress, the curve it gives, a stop or a failure.

Every write of the calibration's state is here: it once was spread over four files.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tui.engine_info import CurveInfo
from tui.features.base import Feature, RecordedRunShown
from tui.messages import Calibrated, CalibrationProgress, CalibrationStopped, EngineFailed
from tui.status import CalibrationStatus
from tui.widgets.kernels import KernelsPanel


@dataclass
class CalibrationState:
    """The curve the Kernels panel and the predictions read (measured, kept or recorded)."""

    curve: CurveInfo | None = None


class CalibrationFeature(Feature):
    """`c`, and the bridge's calibration messages."""

    calibration_state: CalibrationState

    @property
    def curve(self) -> CurveInfo | None:
        """The curve shown: measured (`c`, a first turn), kept, or a profile's recorded one."""
        return self.calibration_state.curve

    def on_recorded_run_shown(self, message: RecordedRunShown) -> None:
        """A profile's stored calibration becomes the curve shown (none if unreadable); a run
        recorded without one leaves the curve as it was."""
        if message.run.calibration:
            self.calibration_state.curve = curve_from_dict(message.run.calibration)

    @property
    def calibrating(self) -> bool:
        """`c`'s calibration runs (a first turn's runs inside its run)."""
        return self.status.calibration.running

    @property
    def calibration_label(self) -> str | None:
        """The running calibration's progress ("45% auto: 4 rows"), None when none runs."""
        return self.status.calibration.label

    def action_calibrate(self) -> None:
        if not self.can_start("calibrate"):
            return
        self.set_status(calibration=CalibrationStatus(running=True))
        self.notify("calibrating verify cost vs rows: see the Kernels panel", timeout=2)
        self.show_panel("kernels")
        self.bridge.calibrate(self.settings)

    def on_calibration_progress(self, message: CalibrationProgress) -> None:
        part = self.status.calibration
        since = time.monotonic() if part.label is None else part.since
        label = f"{message.fraction:.0%} {message.label}"
        # the status line carries the percentage (`c` showed none)
        self.set_status(calibration=CalibrationStatus(part.running, label, since))
        self.query_one(KernelsPanel).show(self.info, self.runs_state.stats, self.curve, label)

    def on_calibrated(self, message: Calibrated) -> None:
        self.set_status(calibration=CalibrationStatus())
        self.calibration_state.curve = message.curve
        kept = getattr(message.curve, "kept_at", None)
        self.notify(f"calibration kept from {kept} reused (c measures again)" if kept
                    else "calibration done: see the Kernels panel", timeout=2)
        self.refresh_panels(all_panels=True)

    def on_calibration_stopped(self, message: CalibrationStopped) -> None:
        """Esc stopped a calibration: the curve stays as it was (a turn it ran before ends
        without generating: tui/features/runs.py says so on its message)."""
        self.set_status(calibration=CalibrationStatus())
        self.notify("calibration cancelled: the curve is as it was", timeout=3)
        self.refresh_panels(all_panels=True)

    def on_engine_failed(self, message: EngineFailed) -> None:
        """The calibration raised: nothing runs any more (the notification is runs')."""
        if message.task == "calibrate":
            self.set_status(calibration=CalibrationStatus())


def curve_from_dict(data: dict[str, Any]) -> CurveInfo | None:
    """A stored calibration back into a CurveInfo (via core.dispatch when it can)."""
    try:
        from core.dispatch import VerifyCostCurve
        from tui.session import curve_info

        return curve_info(VerifyCostCurve.from_dict(data))
    except Exception:  # a profile from another version: show no curve rather than fail
        return None
