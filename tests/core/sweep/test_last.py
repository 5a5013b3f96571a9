"""The last sweep's copy (core/sweep/last.py) is a kept file: the app's `w` reads it, so a
hostile one is set aside with one sentence and never hangs, crashes or misleads the view."""

from __future__ import annotations

import json
import os

import pytest

from core.errors import UserError
from core.sweep.last import last_sweep_path, read_sweep, remember
from tests.helpers.kept_faults import UNREADABLE, plant_unreadable

GOOD = {"kind": "specdec-tui sweep", "cells": [{"id": "T=0 a", "speedup": 1.5}]}


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "nan", "inf", "cell-not-object",
                                  "id-not-text", "truncated"])
def test_a_hostile_last_sweep_is_set_aside_in_one_sentence(tmp_path, monkeypatch, kind,
                                                           no_hang) -> None:
    monkeypatch.setenv("SPECDEC_TUI_SWEEP", str(tmp_path / "last.json"))
    path = last_sweep_path()
    if kind in UNREADABLE:
        plant_unreadable(path, kind)
    elif kind in ("nan", "inf"):
        bad = {**GOOD, "cells": [{"id": "x", "speedup": float(kind)}]}
        path.write_text(json.dumps(bad))
    elif kind == "cell-not-object":
        path.write_text(json.dumps({**GOOD, "cells": [7]}))
    elif kind == "id-not-text":
        path.write_text(json.dumps({**GOOD, "cells": [{"id": [1]}]}))
    else:
        path.write_text(json.dumps(GOOD)[:30])
    with pytest.raises(UserError) as exc:
        read_sweep()
    msg = str(exc.value)
    assert str(path) in msg and "set aside" in msg and "\n" not in msg, msg
    assert not os.path.lexists(path)
    assert remember(GOOD) == path and read_sweep()["cells"] == GOOD["cells"]
