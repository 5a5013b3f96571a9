"""The last sweep: where `specdec-tui sweep` leaves a copy of its JSON for the app to show.

Why a fixed place: the app's sweep view (tui/screens/sweep.py) shows "the last sweep's
frontier" without asking for a path; the CLI rewrites the copy after every block, as its own
--json. It lives in the user data folder (beside saved profiles), or at $SPECDEC_TUI_SWEEP
(the tests point it at a folder of their own), never in the working folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.io.kept import SWEEP_ENV, last_sweep_path  # noqa: F401 (where the copy lives)


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
    may have written; one sentence when it is missing or is not a sweep."""
    from core.io.untrusted import JSON_MAX_BYTES, UntrustedFileError, check_depth, read_bounded
    from core.sweep.grid import SweepError

    p = Path(path) if path is not None else last_sweep_path()
    if not p.is_file():
        raise SweepError(f"There is no sweep at {p} yet: run `specdec-tui sweep` first.")
    text = read_bounded(p, JSON_MAX_BYTES, "sweep").decode("utf-8", errors="replace")
    check_depth(text, str(p))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UntrustedFileError(f"{p} is not JSON ({exc}).") from None
    if not isinstance(data, dict) or data.get("kind") != "specdec-tui sweep":
        raise SweepError(f"{p} is not a sweep's JSON (`specdec-tui sweep --json`).")
    if not isinstance(data.get("cells"), list):
        raise SweepError(f"{p} holds no cells.")
    return data
