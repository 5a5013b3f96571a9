"""tui/screens/compare.py with a recorded run others may have edited: what its rows show of
the run's environment and settings is text with no terminal escapes (the screen's layout and
plots: tests/tui/test_plots_and_compare.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.text import Text

from core.profile import Profile, ProfileStore
from core.settings import Settings
from tests.helpers.profile import make_run
from tui.screens.compare import model_rows, profile_run, result_rows, settings_rows

ESC = "\u001b]52;c;aGVsbG8=\u0007"  # OSC 52: would set the terminal's clipboard


def test_escapes_in_a_recorded_run_never_reach_the_compare_rows(tmp_path: Path) -> None:
    store = ProfileStore(tmp_path, presets=None)
    run = make_run()
    run = dataclasses.replace(run, environment={**run.environment, "device_name": f"cpu{ESC}",
                                                "specdec_tui": f"0.1{ESC}"},
                              settings=Settings(target=f"shape:tiny{ESC}"))
    store.save(Profile("esc", Settings(target=f"shape:tiny{ESC}"), "", run))
    a = profile_run(store.load("esc"))
    cells = [*settings_rows(a, a), *result_rows(a, a), *model_rows(a, a)]
    text = " ".join(c.plain for row in cells for c in row if isinstance(c, Text))
    assert "cpu" in text and "shape:tiny" in text and "\x1b" not in text and "\x07" not in text
