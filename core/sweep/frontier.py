"""The frontier: speed against what the text gave up, its Pareto front, and the recommendation.

Pure functions of recorded cells (the summaries a sweep's JSON keeps), so the tests check them
on hand-made cells and the app reads them from a file without MLX. A cell is a mapping with at
least `id`, `speedup` (median E2E of target-only over the cell's, same prompt) and `nll_delta`
(the target's NLL per token of the cell's text minus target-only's, same seeds); `task_success`
(share of checked outputs that passed) where a prompt had a check.

Why per temperature: speed is measured against the target-only run with the same sampling and
NLL against that run's text, so cells of different temperatures answer different questions;
the front and the recommendation are computed within one temperature, never across.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Cell = Mapping[str, Any]


def _num(cell: Cell, key: str) -> float | None:
    v = cell.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def dominates(a: Cell, b: Cell) -> bool:
    """`a` is at least as fast and gives up at most as much as `b`, and is better in one."""
    sa, sb, na, nb = _num(a, "speedup"), _num(b, "speedup"), _num(a, "nll_delta"), _num(b, "nll_delta")
    if sa is None or sb is None or na is None or nb is None:
        return False
    return sa >= sb and na <= nb and (sa > sb or na < nb)


def pareto_front(cells: Iterable[Cell]) -> list[str]:
    """The ids of the cells no other cell dominates, fastest first (cells without both a
    speedup and an NLL given up are not on the frontier: they are not measured on both axes)."""
    pts = [c for c in cells if _num(c, "speedup") is not None and _num(c, "nll_delta") is not None]
    front = [c for c in pts if not any(dominates(o, c) for o in pts if o is not c)]
    front.sort(key=lambda c: (-float(c["speedup"]), float(c["nll_delta"]), str(c["id"])))
    return [str(c["id"]) for c in front]


def feasible(cell: Cell, max_nll_delta: float | None, min_task: float | None) -> bool:
    """Whether a cell keeps within the bounds: NLL given up at most `max_nll_delta`, task
    success at least `min_task`. A cell not measured on a bounded axis does not keep within
    it (it cannot be shown to)."""
    if _num(cell, "speedup") is None:
        return False
    if max_nll_delta is not None:
        n = _num(cell, "nll_delta")
        if n is None or n > max_nll_delta:
            return False
    if min_task is not None:
        t = _num(cell, "task_success")
        if t is None or t < min_task:
            return False
    return True


def recommend(cells: Iterable[Cell], max_nll_delta: float | None = None,
              min_task: float | None = None) -> Cell | None:  # fmt: skip
    """The fastest cell within the bounds (ties: the one that gave up less, then by id);
    None when no cell keeps within them. With an NLL bound alone the answer is on the
    Pareto front: anything dominating it would be feasible and at least as fast."""
    ok = [c for c in cells if feasible(c, max_nll_delta, min_task)]
    if not ok:
        return None
    nll = lambda c: _num(c, "nll_delta")  # noqa: E731
    return min(ok, key=lambda c: (-float(c["speedup"]),
                                  math.inf if nll(c) is None else nll(c), str(c["id"])))  # fmt: skip


def by_temperature(cells: Sequence[Cell]) -> dict[float, list[Cell]]:
    """Cells grouped by their temperature, in the order first seen."""
    out: dict[float, list[Cell]] = {}
    for c in cells:
        out.setdefault(float(c.get("temperature", 0.0)), []).append(c)
    return out


def frontier_summary(cells: Sequence[Cell], max_nll_delta: float | None = None,
                     min_task: float | None = None) -> dict[str, Any]:  # fmt: skip
    """Per temperature: the front's ids and the recommendation within the bounds (its id, or
    None with the reason): what the JSON's `frontier` keeps and the renderings read."""
    groups = {}
    for t, group in by_temperature(cells).items():
        rec = recommend(group, max_nll_delta, min_task)
        groups[f"{t:g}"] = {
            "temperature": t,
            "front": pareto_front(group),
            "recommended": str(rec["id"]) if rec is not None else None,
            "why_none": None if rec is not None else _why_none(group, max_nll_delta, min_task),
        }
    return {"max_nll_delta": max_nll_delta, "min_task": min_task, "groups": groups}


def _why_none(cells: Sequence[Cell], max_nll_delta: float | None,
              min_task: float | None) -> str:  # fmt: skip
    if min_task is not None and all(_num(c, "task_success") is None for c in cells):
        return "no prompt of the sweep has a check, so no cell can show a task success."
    bounds = []
    if max_nll_delta is not None:
        bounds.append(f"an NLL given up of at most {max_nll_delta:g}")
    if min_task is not None:
        bounds.append(f"a task success of at least {min_task:.0%}")
    return "no cell kept within " + " and ".join(bounds) + "." if bounds else "no cell was measured."
