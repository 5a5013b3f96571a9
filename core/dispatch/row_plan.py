"""Which row counts a calibration times: the plan, a sorted list of R in 1..k_max + 1.

Why: a calibration once timed every R from 1 to k_max + 1. For k_max = 32 that is 33 row
counts, 561 forward rows a pass and 1,683 over its three timed passes (plus a warm-up pass); a
first `chat --profile hybrid-cost-aware` waited 6 min 35 s on a 2-core CPU before its first
round, so the app's default stayed at k_max = 8 although k up to 32 was measured faster on
every copy prompt on the H200 (docs/benchmarks/never-slower.md, finding 7). The curve is read
by `VerifyCostCurve.t_verify`, which interpolates linearly between measured rows
(core/dispatch/curve.py `interpolate`), so only the rows where the cost bends need a sample:

- every R in 1..9: the k a run uses most, and CUDA's switch from a vector to a matrix kernel at
  8 rows (docs/dispatch.md);
- both sides of every R where MLX's dispatch rules (core/dispatch/kernels.py) predict that some
  weight shape of this target runs another kernel than at R - 1: the cost jumps there, and R - 1
  and R both measured keep the interpolation from drawing a slope across the jump;
- always k_max + 1 (capped at MAX_K + 1), so `covers()` (core/dispatch/curve_cache.py) still
  means "measured up to k_max + 1";
- for a run whose source verifies token trees (draft_source "tree", core/drafting/tree.py),
  also the tree's widest verification, NODE_BUDGET nodes and their root: 64 rows. The tree's
  nodes are sized by the curve and never past its largest measured rows (a flat curve's
  extrapolation is noise), so a curve to k_max + 1 would cap a tree at k_max nodes.

That sparse plan is the CPU's: there no rule depends on R (one loop over rows), the cost is
linear in rows (docs/dispatch.md) and a row of the default model costs ~0.2 s, so the plan is
1..9 and k_max + 1 (10 row counts, 78 forward rows a pass, not 561). On a GPU a row costs
little beside the call, and the cost between tile edges is not a line: on the H200 a curve
of 1..9, 12, 16, 17, 24, 32, 33, interpolated, let the cost-aware lookup copy ~21 drafts a
round where a curve of every row had it copy ~30 (rewrite greedy: 15.5 -> 10.4 accepted a
round, 4.33x -> 3.18x; docs/benchmarks/archive/never-slower-runs.md, 2026-12-01). So a GPU (CUDA, Metal) times every row
1..k_max + 1.

`row_plan` is a pure function of (k_max, the predicted kernel changes, the backend's kind), so
the tests pin it exactly with faked hardware (BackendInfo), never faked rules; `kernel_changes`
reads the changes from a KernelPredictor; `plan_for` joins the two for a target model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

COMMON_ROWS = 9  # every R up to here: the common k, and CUDA's matrix kernel from 8 rows
# The KV length a first-use calibration prefills on the CPU. There a prefill row costs what a
# verified row costs (~0.2 s for the default model on a 2-core CPU): a 128-token context took
# 18.7-20.6 s to prefill against 2.3 s for 16 tokens, once for the target and once for the
# draft, while a 9-row verification cost the same at either length (1.32-1.41 s, measured on
# this CPU with the default model); so the CPU calibrates at 16 and prices longer contexts
# the same, as its cost is. A GPU keeps the context asked for (attention there is no rounding
# error, and its prefill is cheap).
CPU_CONTEXT = 16


def plan_need(k_max: int, tree: bool = False) -> int:
    """The widest verification a run with this k_max can ask for: k_max + 1, capped at
    MAX_K + 1 (the engine never verifies more a chain); for a `tree` run at least a whole
    tree's rows, NODE_BUDGET + 1."""
    from core.drafting.tree import NODE_BUDGET
    from core.settings import MAX_K

    need = min(max(int(k_max), 0), MAX_K) + 1
    return max(need, NODE_BUDGET + 1) if tree else need


def row_plan(k_max: int, boundaries: Iterable[int], backend: str, tree: bool = False) -> list[int]:
    """The row counts a calibration for `k_max` times on a `backend` ("cpu", "cuda",
    "metal"), given the R at which the dispatch rules predict a kernel change (`boundaries`:
    the kernel at R differs from the one at R - 1; those beyond k_max + 1 are not reached).

    Sorted, unique, 1..min(9, need) first, need = k_max + 1 last, and every boundary R within
    reach has R - 1 and R in it; on a GPU every R in 1..need (the module's docstring says why).
    A `tree` run's need is the tree's rows (`plan_need`); the chain's k_max + 1 stays in."""
    need = plan_need(k_max, tree)
    if backend != "cpu":
        return list(range(1, need + 1))
    rows = set(range(1, min(COMMON_ROWS, need) + 1))
    for b in boundaries:
        if 2 <= int(b) <= need:
            rows.update((int(b) - 1, int(b)))
    rows.update((plan_need(k_max), need))
    return sorted(rows)


def kernel_changes(predictor: Any, top: int) -> list[int]:
    """Every R in 2..top at which some weight shape's predicted kernel (KernelPredictor
    .per_shape) differs from its kernel at R - 1: the vector-to-matrix switch of each shape
    (kernels.shape_boundary) and any other change of family on the way (Metal's qmv_wide from
    2 rows, split-K giving way to qmm_t)."""
    out: list[int] = []
    prev = None
    for r in range(1, top + 1):
        kernels = tuple(p.kernel for p in predictor.per_shape(r))
        if prev is not None and kernels != prev:
            out.append(r)
        prev = kernels
    return out


def plan_for(k_max: int, target_model: Any, backend: Any = None, tree: bool = False) -> list[int]:
    """The plan for this target on this machine (`backend`: a BackendInfo; the process's own
    when None; `tree`: a tree source's run): on the CPU the target's linear shapes under
    MLX's dispatch rules give the boundaries; a GPU times every row, so no prediction is
    made for it."""
    from core.dispatch.backend import current_backend
    from core.dispatch.kernels import KernelPredictor

    b = backend or current_backend()
    if b.backend != "cpu":
        return row_plan(k_max, (), b.backend, tree)
    predictor = KernelPredictor(target_model, b)
    return row_plan(k_max, kernel_changes(predictor, plan_need(k_max, tree)), b.backend, tree)


def calibration_context(context: int, backend: Any = None) -> int:
    """The KV length a first-use calibration prefills: `context` on a GPU, at most
    CPU_CONTEXT on the CPU (above); at least 1. The explicit `specdec-tui calibrate
    --context` is not capped: it measures what it is asked to."""
    from core.dispatch.backend import current_backend

    b = backend or current_backend()
    context = max(int(context), 1)
    return min(context, CPU_CONTEXT) if b.backend == "cpu" else context
