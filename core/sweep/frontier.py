"""The frontier: speed against what the text gave up, its Pareto front, and the recommendation.

Pure functions of recorded cells (the summaries a sweep's JSON keeps), so the tests check them
on hand-made cells and the app reads them from a file without MLX. A cell is a mapping with at
least `id`, `speedup` (median E2E of target-only over the cell's, same prompt) and `nll_delta`
(the target's NLL per token of the cell's text minus target-only's, same seeds); `task_success`
(share of checked outputs that passed) where a prompt had a check; `copied` and `repetition`
(core/bench/copying.py) where its texts were kept.

Why the recommendation reads more than NLL: the target finds its own prompt likely, so a cell
whose text is the prompt copied back shows a negative NLL given up (a lookup or hybrid draft at
TV = 1 accepts every copied token: the fastest cell, and the one that did not do the task). A
cell is recommended only when it reads right against target-only: task success no lower,
copying and repetition within a margin, and it is neither draft-only nor a cell that stopped
speculating; the reason each other cell is excluded is kept and shown.

Why per temperature: speed is measured against the target-only run with the same sampling and
NLL against that run's text, so cells of different temperatures answer different questions;
the front and the recommendation are computed within one temperature, never across.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.bench.copying import NLL_COPY_TOLERANCE

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


MARGIN = 0.10  # how much more than target-only a cell may copy of the prompt or repeat itself
# What `allow` may lift: a default bound, or a kind of cell never recommended by default.
ALLOWABLE = ("worse-task", "copies", "repeats", "draft-only", "no-speculation")
BOUND_KEYS = ("max_nll_delta", "min_task", "margin", "allow")  # frontier_summary's, as saved


def kind_of(cell: Cell) -> str:
    """'target-only', 'draft-only' or 'speculative' (a hand-made cell: by its id)."""
    kind = cell.get("kind")
    if kind:
        return str(kind)
    name = str(cell.get("id", ""))
    return next((k for k in ("target-only", "draft-only") if k in name), "speculative")


def baseline(cells: Iterable[Cell]) -> Cell | None:
    """The group's target-only cell: what every default bound compares against."""
    return next((c for c in cells if kind_of(c) == "target-only"), None)


def nll_untrusted(cell: Cell, base: Cell | None) -> bool:
    """Whether the cell copies more of the prompt than target-only: its NLL given up then
    reads low for the wrong reason (the target finds its own prompt likely)."""
    mine, theirs = _num(cell, "copied"), _num(base or {}, "copied")
    return mine is not None and theirs is not None and mine > theirs + NLL_COPY_TOLERANCE


def exclusion(cell: Cell, base: Cell | None, max_nll_delta: float | None = None,
              min_task: float | None = None, margin: float = MARGIN,
              allow: Iterable[str] = ()) -> str | None:
    """Why the cell may not be recommended (one phrase, with its numbers), or None when it may.

    Default bounds, against the group's target-only cell: task success no lower, the share
    copied from the prompt and the share of repeated 4-grams at most `margin` above; draft-only
    and a speculative cell that stopped speculating (it fell back, or proposed nothing) are
    never recommended. `allow` lifts any of these (ALLOWABLE); `max_nll_delta` and `min_task`
    are the user's own bounds on top."""
    allowed = set(allow)
    kind = kind_of(cell)
    if _num(cell, "speedup") is None:
        return "no speed measured"
    if kind == "draft-only" and "draft-only" not in allowed:
        return "draft-only: the draft's text, not the target's"
    if kind == "speculative" and "no-speculation" not in allowed and (
        cell.get("fallback_reason") or ("acceptance" in cell and cell["acceptance"] is None)
    ):
        return "stops speculating: " + str(cell.get("fallback_reason") or "no draft was proposed")
    task, copied, rep = _num(cell, "task_success"), _num(cell, "copied"), _num(cell, "repetition")
    b = base or {}
    b_task, b_copied, b_rep = _num(b, "task_success"), _num(b, "copied"), _num(b, "repetition")
    why = []
    if "copies" not in allowed and copied is not None and b_copied is not None and (
        copied > b_copied + margin
    ):
        why.append(f"copies the prompt: {copied:.0%} against {b_copied:.0%}")
    if "repeats" not in allowed and rep is not None and b_rep is not None and rep > b_rep + margin:
        why.append(f"repeats itself: {rep:.0%} of its 4-grams against {b_rep:.0%}")
    if "worse-task" not in allowed and task is not None and b_task is not None and task < b_task:
        why.append(f"fails the task more: {task:.0%} against {b_task:.0%}")
    if min_task is not None and (task is None or task < min_task):
        why.append("no task success measured" if task is None
                   else f"task success {task:.0%} below {min_task:.0%}")
    n = _num(cell, "nll_delta")
    if max_nll_delta is not None and n is None:
        why.append("no NLL given up measured")
    elif max_nll_delta is not None and n is not None and n > max_nll_delta:
        why.append(f"gives up {n:+.3f} nats/token, over {max_nll_delta:g}")
    return "; ".join(why) or None


def recommend(cells: Iterable[Cell], max_nll_delta: float | None = None,
              min_task: float | None = None, margin: float = MARGIN,
              allow: Iterable[str] = ()) -> Cell | None:
    """The fastest cell that reads right (`exclusion` finds no reason against it; ties: the one
    that gave up less, then by id); None when every cell is excluded. With an NLL bound alone
    the answer is on the Pareto front: anything dominating it would be feasible and at least as
    fast."""
    group = list(cells)
    base = baseline(group)
    ok = [c for c in group
          if exclusion(c, base, max_nll_delta, min_task, margin, allow) is None]
    if not ok:
        return None
    nll = lambda c: _num(c, "nll_delta")  # noqa: E731
    return min(ok, key=lambda c: (-float(c["speedup"]),
                                  math.inf if nll(c) is None else nll(c), str(c["id"])))


def by_temperature(cells: Sequence[Cell]) -> dict[float, list[Cell]]:
    """Cells grouped by their temperature, in the order first seen."""
    out: dict[float, list[Cell]] = {}
    for c in cells:
        out.setdefault(float(c.get("temperature", 0.0)), []).append(c)
    return out


def frontier_summary(cells: Sequence[Cell], max_nll_delta: float | None = None,
                     min_task: float | None = None, margin: float = MARGIN,
                     allow: Iterable[str] = ()) -> dict[str, Any]:
    """Per temperature: the front's ids, the recommendation (its id, or None with the reason)
    and every excluded cell's reason: what the JSON's `frontier` keeps and the renderings read."""
    allow = sorted(set(allow))
    groups = {}
    for t, group in by_temperature(cells).items():
        base = baseline(group)
        rec = recommend(group, max_nll_delta, min_task, margin, allow)
        excluded = {str(c["id"]): why for c in group
                    if (why := exclusion(c, base, max_nll_delta, min_task, margin, allow))}
        groups[f"{t:g}"] = {
            "temperature": t,
            "front": pareto_front(group),
            "recommended": str(rec["id"]) if rec is not None else None,
            "why_none": None if rec is not None else _why_none(group, max_nll_delta, min_task),
            "excluded": excluded,
            "nll_untrusted": [str(c["id"]) for c in group if nll_untrusted(c, base)],
        }
    return {"max_nll_delta": max_nll_delta, "min_task": min_task, "margin": margin,
            "allow": allow, "groups": groups}


def _why_none(cells: Sequence[Cell], max_nll_delta: float | None,
              min_task: float | None) -> str:
    if min_task is not None and all(_num(c, "task_success") is None for c in cells):
        return "no prompt of the sweep has a check, so no cell can show a task success."
    bounds = ["reads right (the default bounds against target-only)"]
    if max_nll_delta is not None:
        bounds.append(f"an NLL given up of at most {max_nll_delta:g}")
    if min_task is not None:
        bounds.append(f"a task success of at least {min_task:.0%}")
    return "no cell " + " and ".join(bounds) + "."
