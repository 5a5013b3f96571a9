"""Faults put where a kept file was (core/io/kept.py): what the fault-injection tests of
`chat` and the app's session share."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

FAULTS = ("fifo", "dev-zero", "sparse", "nan", "inf", "wrong-type", "truncated")
# Faults of the file itself, whatever its text: a read that hangs, one without end, a huge one.
UNREADABLE = ("fifo", "dev-zero", "sparse")


def plant_unreadable(path: Path, kind: str) -> None:
    """Put the UNREADABLE fault `kind` at `path` (which must not exist): a FIFO, a link to
    /dev/zero, or a 200 MiB sparse file."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(200 << 20)
    else:
        raise ValueError(f"not an unreadable fault: {kind}")


def every_number(doc: Any, f: Any) -> Any:
    """`doc` with every number (never a bool) replaced by f(number)."""
    if isinstance(doc, bool):
        return doc
    if isinstance(doc, int | float):
        return f(doc)
    if isinstance(doc, dict):
        return {k: every_number(v, f) for k, v in doc.items()}
    if isinstance(doc, list):
        return [every_number(v, f) for v in doc]
    return doc


def number_paths(doc: Any, at: tuple = ()) -> list[tuple]:
    """The path of every number in `doc`."""
    if isinstance(doc, bool):
        return []
    if isinstance(doc, int | float):
        return [at]
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in number_paths(v, (*at, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in number_paths(v, (*at, i))]
    return []


def with_value(doc: Any, at: tuple, value: float) -> Any:
    doc = json.loads(json.dumps(doc))
    node = doc
    for k in at[:-1]:
        node = node[k]
    node[at[-1]] = value
    return doc


def spoil(path: Path, fault: str, good: str) -> None:
    """Put `fault` where the kept file `path` (whose intact text is `good`) was."""
    if os.path.lexists(path):
        path.unlink()
    if fault in UNREADABLE:
        plant_unreadable(path, fault)
    elif fault == "nan":
        path.write_text(json.dumps(every_number(json.loads(good), lambda v: math.nan)))
    elif fault == "inf":
        path.write_text(json.dumps(every_number(json.loads(good), lambda v: math.inf)))
    elif fault == "wrong-type":
        path.write_text(json.dumps(every_number(json.loads(good), str)))
    else:
        path.write_text(good[: len(good) // 2])
