"""The last sweep: where `specdec-tui sweep` leaves a copy of its JSON for the app to show.

Why a fixed place: the app's sweep view (tui/screens/sweep.py) shows "the last sweep's
frontier" without asking for a path; the CLI rewrites the copy after every block, as its own
--json. It lives in the user data folder (beside saved profiles), or at $SPECDEC_TUI_SWEEP
(the tests point it at a folder of their own), never in the working folder.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from core.io.kept import SWEEP_ENV, last_sweep_path  # noqa: F401 (where the copy lives)

COPY_MAX_BYTES = 64 << 20  # the largest grid (MAX_CELLS) writes a few MB


def remember(data: dict[str, Any]) -> Path | None:
    """Write the copy (replaced whole); None when its folder cannot be made or written: the
    sweep's own outputs matter more than the app's copy, so a failure here costs nothing."""
    from core.io.atomic import write_atomic

    path = last_sweep_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, allow_nan=False) + "\n")
    except OSError:
        return None
    return path


def read_sweep(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A sweep's JSON (the last one by default), bounded and checked like every file others
    may have written; one sentence when it is missing or is not a sweep. The kept copy is
    read by core.io.kept.read_kept: a bad one is set aside (the next sweep writes it again)
    and the sentence says so."""
    from core.io.kept import read_kept
    from core.io.untrusted import JSON_MAX_BYTES, UntrustedFileError, check_depth, read_bounded
    from core.sweep.grid import SweepError

    if path is None:
        p = last_sweep_path()
        notices: list[str] = []
        data = read_kept(p, "last sweep's copy", check_sweep, COPY_MAX_BYTES,
                         then="the next `specdec-tui sweep` writes it again", notices=notices)
        if data is not None:
            return data
        if notices:
            raise SweepError(notices[0])
        raise SweepError(f"There is no sweep at {p} yet: run `specdec-tui sweep` first.")
    p = Path(path)
    if not p.is_file():
        raise SweepError(f"There is no sweep at {p} yet: run `specdec-tui sweep` first.")
    text = read_bounded(p, JSON_MAX_BYTES, "sweep").decode("utf-8", errors="replace")
    check_depth(text, str(p))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UntrustedFileError(f"{p} is not JSON ({exc}).") from None
    try:
        return check_sweep(data)
    except ValueError as exc:
        raise SweepError(f"{p} is not a sweep's JSON (`specdec-tui sweep --json`): {exc}.") from None


def check_sweep(data: Any) -> dict[str, Any]:
    """A sweep's document: its kind, its cells (objects, each with a text id) and every number
    in it finite (a NaN speed-up sorted and drew the view as if it were the best)."""
    from core.io.kept import KeptFileError

    if not isinstance(data, dict) or data.get("kind") != "specdec-tui sweep":
        raise KeptFileError("it is not a sweep's JSON")
    cells = data.get("cells")
    if not isinstance(cells, list):
        raise KeptFileError("it holds no cells")
    for i, c in enumerate(cells):
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise KeptFileError(f"cell {i + 1} is not a cell with an id")
        if not isinstance(c.get("apply", {}), dict):
            raise KeptFileError(f"cell {i + 1}'s settings are not an object")
        for key in _CELL_NUMBERS:
            v = c.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise KeptFileError(f"cell {i + 1}'s {key} is {v!r}, not a number")
    _finite(data, "it")
    return data


# What a cell's row shows as numbers (tui/screens/sweep.py formats them: a string there was a
# ValueError in the app).
_CELL_NUMBERS = ("temperature", "speedup", "speedup_min", "speedup_max", "acceptance",
                 "nll_delta", "mean_tv", "task_success")


def _finite(value: Any, where: str) -> None:
    """Every number under `value` finite (JSON's NaN and Infinity parse to floats)."""
    from core.io.kept import KeptFileError

    if isinstance(value, float) and not math.isfinite(value):
        raise KeptFileError(f"{where} holds {value}, not a finite number")
    if isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{k!s}")
    elif isinstance(value, list):
        for v in value:
            _finite(v, where)
