"""Recording a run into a Profile: the listener that keeps its rounds, and where it ran.

A recorded run carries its environment (backend, device, library versions, time) so numbers
from two machines are never compared unknowingly; the backend is the one name
core.dispatch.backend gives, so a profile and a bench report never describe a run two ways.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.events import RoundEvent, RunSummary
from core.profile.records import Profile, ProfileError, RecordedRun, validate_name
from core.settings import Settings


def record_environment() -> dict[str, Any]:
    """Where a run happened, so numbers from two machines are never compared unknowingly."""
    import os
    import platform
    from importlib import metadata

    import mlx.core as mx

    from core.dispatch.backend import backend_name
    from core.version import tool_version

    try:
        info = {str(k): v for k, v in mx.device_info().items()}
    except Exception:  # older MLX or a backend without the query: the rest still helps
        info = {}

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {
        "backend": backend_name(),
        "device_name": str(info.get("device_name", "")),
        "device_info": info,
        "mlx": version("mlx"),
        "mlx_lm": version("mlx-lm"),
        # The code that measured: the checkout's version, commit and whether it had edits
        # (core/version.py); from an installed wheel the version alone (commit None).
        "specdec_tui": tool_version()["version"],
        "specdec_tui_commit": tool_version()["commit"],
        "specdec_tui_dirty": tool_version()["dirty"],
        "os": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        # MLX's tuning variables change timings: on CUDA, MLX_CUDA_SDPA_CACHE_SIZE decides
        # whether multi-row attention rebuilds a cuDNN plan every round (docs/benchmarks).
        "mlx_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("MLX_")},
    }


class ProfileRecorder:
    """The profile writer listener: keeps one run's rounds and summary, then makes a Profile."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        description: str = "",
        settings_changes: tuple[tuple[int, dict[str, Any]], ...] = (),
    ) -> None:
        """`settings`: the first round's; `settings_changes`: (round, changed fields) for each
        later round that ran with others (tui.settings_watch.SettingsWatch)."""
        self.name = validate_name(name)
        self.settings = settings
        self.settings_changes = tuple((int(i), dict(c)) for i, c in settings_changes)
        self.description = description
        self.rounds: list[RoundEvent] = []
        self.summary: RunSummary | None = None

    def add(self, item: RoundEvent | RunSummary) -> None:
        """Take one item the engine yielded; anything else is a wiring bug, so it raises."""
        if isinstance(item, RoundEvent):
            self.rounds.append(item)
        elif isinstance(item, RunSummary):
            self.summary = item
        else:
            raise TypeError(
                f"ProfileRecorder takes RoundEvent or RunSummary, not {type(item).__name__}"
            )

    def profile(
        self,
        *,
        prompt: str = "",
        calibration: Any = None,
        environment: dict[str, Any] | None = None,
    ) -> Profile:
        """The recorded profile; `calibration` is a VerifyCostCurve or its dict, or None."""
        if self.summary is None:
            raise ProfileError("The run has not finished yet, so there is no run to record.")
        if calibration is not None and not isinstance(calibration, dict):
            calibration = calibration.to_dict()
        run = RecordedRun(
            environment=record_environment() if environment is None else environment,
            rounds=tuple(self.rounds),
            summary=self.summary,
            prompt=prompt,
            calibration=calibration,
            settings=self.settings,
            settings_changes=self.settings_changes,
        )
        return Profile(self.name, self.settings, self.description, run)
