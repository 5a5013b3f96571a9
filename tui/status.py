"""The app's status as one value, and the status line and banner drawn from it.

`Status` is what every feature tells the status line: the models (loading, compiling, warming
while idle), the run (what its first round waits on, and since when), the calibration, the
bench and the active profile, each feature's own frozen part. The app holds it in one reactive
(`SpecDecApp.status`): a feature replaces its part, and `watch_status` redraws the line, the
settings table and the banner. It once was a dozen loose flags repainted by hand at 17 call
sites, and a turn waiting on its prefill said "generating: round 0" for 100 s.

Pure (no widget, no Textual): tests read `Status.text()` at any clock.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from core.settings import Settings

# Shown in the banner in speculative mode on MLX's CPU backend (docs/benchmarks/cpu.md).
CPU_NOTE = ("Speculation cannot pay on MLX's CPU backend, where verifying R rows costs about "
            "R target steps, so expect no speed-up here: the CPU is for checking correctness.")


@dataclass(frozen=True)
class ModelsStatus:
    """The pair: loading, loaded, a first use compiling GPU kernels (its latest line), and the
    idle warm-up's progress until every size is warm (tui/features/models.py)."""

    loading: bool = False
    loaded: bool = False
    compiling: str | None = None
    idle_warming: str | None = None


@dataclass(frozen=True)
class RunStatus:
    """The running turn (tui/features/runs.py): its id, rounds so far, what it waits on before
    its first round and since when, when Enter was pressed; and why the last run fell back to
    target-only (kept after it, for the banner)."""

    run_id: int | None = None
    rounds: int = 0
    waiting: tuple[str, float] | None = None
    turn_started: float | None = None
    fallback_reason: str | None = None


@dataclass(frozen=True)
class CalibrationStatus:
    """A calibration (`c`, or the one a first cost-aware turn runs): `running` for `c`'s,
    `label` its progress ("45% auto: 4 rows") and `since` its start (tui/features/calibration.py)."""

    running: bool = False
    label: str | None = None
    since: float | None = None


@dataclass(frozen=True)
class BenchStatus:
    """The benchmark protocol on the last prompt (`b`) and its progress (tui/features/bench.py)."""

    running: bool = False
    label: str | None = None


@dataclass(frozen=True)
class ProfileStatus:
    """The active profile's name and the settings it had when switched to or saved: the
    status line marks it "(modified)" once a key changed what it set (tui/features/profiles.py)."""

    name: str | None = None
    settings: Settings | None = None


def since(start: float | None, now: float) -> str:
    """" · 12 s" (" · 2 min 10 s" past two minutes) since `start`; "" without one."""
    if start is None:
        return ""
    s = int(now - start)
    return f" · {s} s" if s < 120 else f" · {s // 60} min {s % 60:02d} s"


@dataclass(frozen=True)
class Status:
    """Everything the status line says, one part per feature (`with_(bench=...)` replaces one)."""

    models: ModelsStatus = ModelsStatus()
    run: RunStatus = RunStatus()
    calibration: CalibrationStatus = CalibrationStatus()
    bench: BenchStatus = BenchStatus()
    profile: ProfileStatus = ProfileStatus()

    def with_(self, **parts: Any) -> Status:
        """This status with some parts replaced (each a feature's frozen part)."""
        return dataclasses.replace(self, **parts)

    @property
    def busy(self) -> bool:
        """The engine runs something the user started: a turn, `c` or `b` (one at a time)."""
        return self.run.run_id is not None or self.calibration.running or self.bench.running

    @property
    def timed(self) -> bool:
        """Something whose elapsed time the line shows runs: redrawn once a second."""
        return self.busy and bool(self.run.waiting or self.calibration.label
                                  or self.bench.running)

    def text(self, now: float | None = None) -> str:
        """What the app (a turn) waits on, and for how long: a first turn once said
        "generating: round 0" through 100 s of prefill."""
        now = time.monotonic() if now is None else now
        models, run, cal = self.models, self.run, self.calibration
        if models.compiling:  # a first use stalled on GPU kernel compilation: never looks hung
            return models.compiling
        if models.loading:
            return "loading models…"
        if not models.loaded:
            return "no models loaded"
        if run.run_id is not None:
            if cal.label:  # a cost-aware run calibrating before its first round
                return (f"first turn waits on the calibration: {cal.label}"
                        + since(run.turn_started, now))
            if run.waiting is not None:
                return f"{run.waiting[0]}…" + since(run.waiting[1], now)
            return f"generating: round {run.rounds}"
        if cal.running:
            return f"calibrating: {cal.label or 'starting'}" + since(cal.since, now)
        if self.bench.running:
            return f"benchmarking: {self.bench.label or 'starting'}"
        if models.idle_warming:  # the engine compiles the rest while the user types
            return f"ready · {models.idle_warming}"
        return "ready"

    def style(self) -> str:
        """The dot's colour: yellow while something runs, red without models, else green."""
        if self.models.compiling:
            return "yellow"
        if not self.models.loaded:
            return "red"
        return "yellow" if (self.busy or self.models.loading) else "green"

    def profile_label(self, settings: Settings) -> str:
        """The profile's name, with " (modified)" once a key changed what it set."""
        name, base = self.profile.name, self.profile.settings
        if name is None:
            return "-"
        modified = base is not None and settings.replace(
            target=base.target, draft=base.draft) != base
        return name + (" (modified)" if modified else "")


def status_line(status: Status, settings: Settings, now: float | None = None) -> Text:
    """The line at the top: the state, then the settings a key changes, then the profile."""
    s = settings
    text = Text()

    def item(label: str, value: str, style: str = "bold") -> None:
        text.append(f"{label} ", "dim")
        text.append(value, style)
        text.append("   ")

    text.append("● ", status.style())
    text.append(status.text(now), "bold")
    text.append("   ")
    item("mode", s.mode, "bold magenta")
    item("source", s.draft_source)
    item("rule", s.effective_rule + (" (T=0)" if s.temperature == 0 and s.rule != "greedy"
                                     else ""))
    tv_style = "bold" if s.effective_rule == "mentored" else "dim strike"
    item("TV", f"{s.tv_budget:.2f}", tv_style)
    item("k", str(s.k))
    item("policy", s.policy)
    item("T", f"{s.temperature:g}")
    item("max", str(s.max_tokens))
    item("profile", status.profile_label(s), "italic")
    return text


def banner_notes(info: Any, fallback_reason: str | None, settings: Settings) -> list[str]:
    """The banner's sentences: random weights, speculation off (and why), the last run's
    fall-back, or the CPU note in speculative mode; none is the banner hidden."""
    notes: list[str] = []
    if info is not None and info.random_weights:
        notes.append("Random-weight model shapes: the text is noise; the timings are real.")
    if info is not None and not info.speculation_ok:
        reason = info.speculation_reason or "the pair cannot speculate"
        notes.append(f"Speculation is off, running target-only: {reason}.")
    elif fallback_reason:
        notes.append(f"The last run fell back to target-only: {fallback_reason}.")
    elif info is not None and info.backend == "cpu" and settings.mode == "speculative":
        notes.append(CPU_NOTE)
    return notes
