"""tui/status.py: the app's status as one value; what the status line says, at any clock."""

from __future__ import annotations

import dataclasses

from core.settings import Settings
from tui.engine_info import PairInfo
from tui.status import (
    CPU_NOTE,
    BenchStatus,
    CalibrationStatus,
    ModelsStatus,
    ProfileStatus,
    RunStatus,
    Status,
    banner_notes,
    since,
    status_line,
)

READY = Status(models=ModelsStatus(loaded=True))


def test_what_a_turn_waits_on_is_said_with_its_time() -> None:
    assert Status().text(0.0) == "no models loaded"
    assert Status(models=ModelsStatus(loading=True)).text(0.0) == "loading models…"
    assert READY.text(0.0) == "ready"
    waiting = READY.with_(run=RunStatus(run_id=1, waiting=("prefilling 812 prompt tokens", 10.0),
                                        turn_started=9.0))
    assert waiting.text(22.0) == "prefilling 812 prompt tokens… · 12 s"
    first = waiting.with_(calibration=CalibrationStatus(label="45% auto: 4 rows", since=9.0))
    assert first.text(139.0) == "first turn waits on the calibration: 45% auto: 4 rows · 2 min 10 s"
    rounds = READY.with_(run=RunStatus(run_id=1, rounds=5))
    assert rounds.text(0.0) == "generating: round 5"
    # a compile outranks everything: a first use never looks hung
    compiling = rounds.with_(models=ModelsStatus(loaded=True, compiling="compiling GPU kernels"))
    assert compiling.text(0.0) == "compiling GPU kernels" and compiling.style() == "yellow"


def test_calibration_bench_and_idle_warmup() -> None:
    cal = READY.with_(calibration=CalibrationStatus(running=True))
    assert cal.text(0.0) == "calibrating: starting" and cal.busy and cal.style() == "yellow"
    cal = cal.with_(calibration=CalibrationStatus(True, "50% auto: 8 rows", 1.0))
    assert cal.text(4.0) == "calibrating: 50% auto: 8 rows · 3 s" and cal.timed
    bench = READY.with_(bench=BenchStatus(True, "20% seed 1"))
    assert bench.text(0.0) == "benchmarking: 20% seed 1" and bench.busy and bench.timed
    idle = READY.with_(models=ModelsStatus(loaded=True, idle_warming="warming 3/9"))
    assert idle.text(0.0) == "ready · warming 3/9" and not idle.busy and not idle.timed
    assert idle.style() == "green" and Status().style() == "red"
    # a run past its wait repaints with its rounds, not once a second
    assert not READY.with_(run=RunStatus(run_id=2, rounds=3)).timed


def test_the_profile_is_marked_modified_once_a_key_changed_what_it_set() -> None:
    base = Settings()
    named = READY.with_(profile=ProfileStatus("ux-run1", base))
    assert named.profile_label(base) == "ux-run1"
    assert named.profile_label(base.replace(k=base.k + 1)) == "ux-run1 (modified)"
    # the loaded models are not what a profile sets
    assert named.profile_label(base.replace(target="shape:tiny")) == "ux-run1"
    assert READY.profile_label(base) == "-"
    line = status_line(named, base.replace(k=base.k + 1), 0.0).plain
    assert line.startswith("● ready") and "profile ux-run1 (modified)" in line
    assert f"k {base.k + 1}" in line


def test_banner() -> None:
    info = PairInfo("t", "d", "T", "D", backend="cpu")
    speculative = Settings().replace(mode="speculative")
    assert banner_notes(info, None, speculative) == [CPU_NOTE]
    assert banner_notes(info, None, speculative.replace(mode="target-only")) == []
    assert banner_notes(info, "no draft", speculative) == [
        "The last run fell back to target-only: no draft."]
    off = dataclasses.replace(info, speculation_ok=False, random_weights=True)
    notes = banner_notes(off, None, speculative)
    assert notes[0].startswith("Random-weight") and "Speculation is off" in notes[1]
    assert banner_notes(None, None, speculative) == []


def test_since() -> None:
    assert since(None, 5.0) == "" and since(0.0, 119.9) == " · 119 s"
    assert since(0.0, 130.0) == " · 2 min 10 s"
