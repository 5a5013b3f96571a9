"""The calibration's row plan (core/dispatch/row_plan.py): which row counts it times.

A calibration once timed every R in 1..k_max + 1 (33 row counts at k_max = 32, 6 min 35 s on
this CPU), which kept the default at k_max = 8. On the CPU the plan times 1..9, both sides of
every R where MLX's dispatch rules predict a kernel change for the target, and k_max + 1; on a
GPU every R (the interpolated GPU plan cut the H200's copies, row_plan.py says how much).
Pinned here exactly for the default model's weight shapes on a faked CPU, H200 and M2 (the
hardware query faked, never the rules); checked for every k_max and boundary set with
hypothesis; and counted forward by forward on the tiny random-weight pair: the calibration
(curve_for's and the engine's own) and curve_for's warm-up run exactly the plan's rows.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.dispatch.backend import backend_info
from core.dispatch.bucketed import ROW_BUCKETS
from core.dispatch.kernels import KernelPredictor, LinearShape, predict_kernel
from core.dispatch.row_plan import kernel_changes, plan_for, plan_need, row_plan
from core.settings import MAX_K, Settings
from tests.helpers.forward_rows import CPU, H200, forward_rows

M2 = backend_info(query=lambda: ("metal", {"device_name": "Apple M2",
                                           "architecture": "applegpu_g14g"}))
M3_MAX = backend_info(query=lambda: ("metal", {"device_name": "Apple M3 Max",
                                               "architecture": "applegpu_g15s"}))

# The default target's weight shapes (SmolLM2-135M, Q4_1 GGUF as MLX loads it: 4-bit group 32
# with float32 scales, its tied head 8-bit), as core.dispatch.kernels.linear_shapes reads them.
DEFAULT_SHAPES = [
    LinearShape("mlp", 576, 1536, 4, 32, True, "float32", count=60),
    LinearShape("mlp", 1536, 576, 4, 32, True, "float32", count=30),
    LinearShape("attention", 576, 576, 4, 32, True, "float32", count=60),
    LinearShape("attention", 576, 192, 4, 32, True, "float32", count=60),
    LinearShape("lm_head", 576, 49152, 8, 32, True, "float32", count=1),
]
ONE_TO_9 = list(range(1, 10))


def _plan(k_max: int, backend) -> list[int]:  # noqa: ANN001
    return plan_for(k_max, DEFAULT_SHAPES, backend)


def test_the_default_model_s_predicted_kernel_changes_per_machine():
    """What the plan brackets: none on the CPU, CUDA's matrix kernels from 8 rows, the M2's
    head from 6 and its small shapes from 14, the M3 Max's qmv_wide from 2 and GEMMs from 13."""
    assert kernel_changes(KernelPredictor(DEFAULT_SHAPES, CPU), 33) == []
    assert kernel_changes(KernelPredictor(DEFAULT_SHAPES, H200), 33) == [8]
    assert kernel_changes(KernelPredictor(DEFAULT_SHAPES, M2), 33) == [6, 14]
    assert kernel_changes(KernelPredictor(DEFAULT_SHAPES, M3_MAX), 33) == [2, 13]


@pytest.mark.parametrize(
    ("k_max", "cpu", "h200", "m2"),
    [
        (1, [1, 2], [1, 2], [1, 2]),
        (4, [1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
        (8, ONE_TO_9, ONE_TO_9, ONE_TO_9),  # the old default's rows, all three
        (16, [*ONE_TO_9, 17], list(range(1, 18)), list(range(1, 18))),
        (32, [*ONE_TO_9, 33], list(range(1, 34)), list(range(1, 34))),
    ],
)
def test_the_plan_for_the_default_model_exactly(k_max, cpu, h200, m2):
    assert _plan(k_max, CPU) == cpu
    assert _plan(k_max, H200) == h200
    assert _plan(k_max, M2) == m2


def test_k_max_32_times_fewer_rows_than_every_row_count():
    """33 row counts (561 forward rows a pass) before and on a GPU; 10 (78 rows) on the CPU."""
    assert (len(_plan(32, CPU)), sum(_plan(32, CPU))) == (10, 78)
    assert (len(_plan(32, H200)), sum(_plan(32, H200))) == (33, 561)


def test_a_tree_run_times_rows_up_to_the_tree_s_node_budget():
    """A tree verifies up to NODE_BUDGET nodes and its root: 64 rows, past any chain's k_max
    + 1. A tree run's plan reaches them (every row on a GPU; on the CPU its sparse plan with
    the chain's k_max + 1 and 64 both timed); any other source's plan is as before."""
    from core.drafting.tree import NODE_BUDGET

    assert NODE_BUDGET + 1 == 64 == ROW_BUCKETS[-1]  # the widest tree fits the last row bucket
    assert plan_need(8, tree=True) == plan_need(32, tree=True) == 64
    assert plan_need(32) == 33
    assert plan_for(32, DEFAULT_SHAPES, H200, tree=True) == list(range(1, 65))
    assert plan_for(8, DEFAULT_SHAPES, H200, tree=True) == list(range(1, 65))
    assert plan_for(32, DEFAULT_SHAPES, CPU, tree=True) == [*ONE_TO_9, 33, 64]
    assert plan_for(8, DEFAULT_SHAPES, CPU, tree=True) == [*ONE_TO_9, 64]
    assert plan_for(16, DEFAULT_SHAPES, M2, tree=True) == list(range(1, 65))
    assert _plan(32, H200) == list(range(1, 34))  # not a tree: the chain's rows


def test_calibration_rows_reach_the_tree_s_rows_for_a_tree_source(monkeypatch):
    import sys

    from core.dispatch.curve_cache import calibration_rows

    monkeypatch.setattr(sys.modules["core.dispatch.backend"], "current_backend", lambda: H200)
    s = Settings(mode="speculative", policy="cost-aware", draft_source="tree", k_max=16)
    assert calibration_rows(s, DEFAULT_SHAPES) == list(range(1, 65))
    assert calibration_rows(s.replace(draft_source="lookup"), DEFAULT_SHAPES) == list(range(1, 18))


@st.composite
def _backends(draw):  # noqa: ANN001, ANN202
    return draw(st.sampled_from([CPU, H200, M2, M3_MAX]))


@settings(max_examples=300, deadline=None)
@given(k_max=st.integers(0, MAX_K), boundaries=st.sets(st.integers(1, 64), max_size=8),
       backend=st.sampled_from(["cpu", "cuda", "metal"]))
def test_every_plan_is_sorted_starts_at_one_ends_at_need_and_brackets_each_boundary(
        k_max, boundaries, backend):
    plan = row_plan(k_max, boundaries, backend)
    need = plan_need(k_max)
    assert need == min(k_max, MAX_K) + 1
    assert plan == sorted(set(plan))
    assert plan[: min(9, need)] == list(range(1, min(9, need) + 1))
    assert plan[-1] == need and all(1 <= r <= need for r in plan)
    for b in boundaries:
        if 2 <= b <= need:  # a change within reach: both sides measured, no slope across it
            assert b - 1 in plan and b in plan
    if backend == "cpu":  # linear in rows: 1..9 and the top, nothing between
        pairs = {r for b in boundaries if 2 <= b <= need for r in (b - 1, b)}
        assert plan == sorted(set(range(1, min(9, need) + 1)) | {need} | pairs)
    else:  # a row costs little beside the call there, and the cost is no line between edges
        assert plan == list(range(1, need + 1))


_shapes = st.builds(
    LinearShape,
    role=st.sampled_from(["attention", "mlp", "lm_head"]),
    k=st.sampled_from([64, 128, 576, 1536, 2048, 3584, 4096, 8192]),
    n=st.sampled_from([32, 192, 576, 1536, 3584, 4096, 49152, 152064]),
    bits=st.sampled_from([2, 3, 4, 6, 8]),
    group_size=st.sampled_from([32, 64, 128]),
    quantized=st.booleans(),
    dtype=st.sampled_from(["float16", "bfloat16", "float32"]),
)


@settings(max_examples=150, deadline=None)
@given(shapes=st.lists(_shapes, min_size=1, max_size=5), backend=_backends(),
       k_max=st.integers(0, MAX_K))
def test_a_plan_brackets_every_kernel_change_the_rules_predict(shapes, backend, k_max):
    """Any weight shapes on any faked machine: wherever some shape's kernel at R is not its
    kernel at R - 1 (MLX's rules, core/dispatch/kernels.py), R - 1 and R are both timed."""
    plan = plan_for(k_max, shapes, backend)
    for r in range(2, plan_need(k_max) + 1):
        if any(predict_kernel(s, r, backend) != predict_kernel(s, r - 1, backend) for s in shapes):
            assert r - 1 in plan and r in plan, (r, plan)


# -- the calibration measures the plan's rows, forward by forward (tiny random-weight pair) ---


@pytest.fixture
def as_h200(monkeypatch):
    """This process's machine read as an H200 (the hardware query faked, never the maths):
    the plan takes every row and the warm-up runs, as on a GPU."""
    import sys

    import core.dispatch.backend as backend_module

    monkeypatch.setattr(backend_module, "current_backend", lambda: H200)
    # the module, not the function core.dispatch re-exports under the same name
    monkeypatch.setattr(sys.modules["core.dispatch.calibrate"], "current_backend", lambda: H200)
    return H200


def test_curve_for_warms_and_times_exactly_the_plan_s_rows(engine, tmp_path, as_h200):
    """k_max = 16 on a (faked) H200: the warm-up runs each planned row count once and nothing
    else, the calibration one warm-up and three timed passes of the plan, the progress counts
    to the plan's total, and the curve holds exactly the plan's rows."""
    from core.dispatch.curve_cache import calibration_rows
    from core.runtime.calibration import curve_for

    s = Settings(mode="speculative", policy="cost-aware", draft_source="hybrid", k_max=16)
    plan = calibration_rows(s, engine.target_model)
    assert plan == list(range(1, 18))
    seen = []
    with forward_rows(target=engine.target_model) as calls:
        result = curve_for(engine, s, context=16, folder=tmp_path,
                           progress=lambda done, total, label: seen.append((done, total)))
    settle = len(result.warmup.settle_s)
    assert result.warmup.ran and result.warmup.rows == plan
    # on CUDA the fused attention is measured beside "auto" (plain there): two modes
    assert set(result.curve.times) == {"auto", "fused"}
    # warm-up: prefill, each planned R once a mode, the settle steps; then the calibration:
    # its prefill and 1 + 3 passes over the plan, the modes interleaved at each R (nothing
    # else runs the target)
    timed = [r for _ in range(4) for r in plan for _mode in ("auto", "fused")]
    assert calls["target"] == [16, *plan * 2, *[1] * settle, 16, *timed]
    assert result.curve.rows == plan and result.curve.calls == 8 * len(plan)
    total = 8 * len(plan) + 4  # + the draft's chain, timed once per pass
    assert seen[-1] == (total, total) and {t for _, t in seen} == {total}


def test_the_engine_s_own_calibration_times_the_same_plan(engine):
    """The calibration a round waits on when no caller calibrated (curve_cache.quick_curve)
    times the plan too: on this CPU, 1..9 and k_max + 1, three timed passes and no untimed one
    (the CPU compiles nothing at first use)."""
    from core.dispatch.curve_cache import quick_curve

    s = Settings(mode="speculative", policy="cost-aware", k_max=32)
    with forward_rows(target=engine.target_model) as calls:
        curve = quick_curve(engine.target_model, engine.draft_model, s, 16)
    plan = [*ONE_TO_9, 33]
    assert calls["target"] == [16, *plan * 3]
    assert curve.rows == plan
    assert curve.t_verify(20) > curve.t_verify(9)  # priced between the measured rows


def test_a_tree_run_s_own_calibration_reaches_the_tree_s_rows(engine):
    """A tree source's run calibrates to the tree's 64 rows (on this CPU: 1..9, within which
    the chain's k_max + 1, and 64), so its nodes are sized on measured rows up to its budget."""
    from core.dispatch.curve_cache import quick_curve
    from core.drafting.tree import tree_nodes

    s = Settings(mode="speculative", policy="cost-aware", draft_source="tree", k_max=4)
    with forward_rows(target=engine.target_model) as calls:
        curve = quick_curve(engine.target_model, engine.draft_model, s, 16)
    plan = [*ONE_TO_9, 64]
    assert calls["target"] == [16, *plan * 3]
    assert curve.rows == plan and max(curve.rows) - 1 == 63  # tree_nodes' cap: 63 nodes
    assert 4 <= tree_nodes(curve, 4) <= 63


def test_a_narrow_start_keeps_the_plan_below_its_rows(engine, tmp_path, as_h200):
    """max_rows (core/runtime/warm_start.py) keeps every forward at or below it, and the curve
    still reaches it."""
    from core.dispatch.curve_cache import capped
    from core.runtime.calibration import curve_for

    assert capped([*ONE_TO_9, 12, 16, 17, 24, 32, 33], 14) == [*ONE_TO_9, 12, 14]
    assert capped([*ONE_TO_9, 33], 7) == [1, 2, 3, 4, 5, 6, 7]
    assert capped([1, 2, 3], 9) == [1, 2, 3]
    s = Settings(mode="speculative", policy="cost-aware", k_max=6)
    with forward_rows(target=engine.target_model) as calls:
        result = curve_for(engine, s, context=4, folder=tmp_path, max_rows=5)
    assert max(calls["target"]) == 5 and result.curve.rows == [1, 2, 3, 4, 5]


def test_a_first_use_calibration_prefills_16_tokens_on_the_cpu_and_the_context_on_a_gpu():
    """calibration_context: on the CPU a prefill row costs a verified row and the KV length
    moves nothing (row_plan.py's measurement), so at most CPU_CONTEXT there; a GPU keeps it."""
    from core.dispatch.row_plan import CPU_CONTEXT, calibration_context

    assert CPU_CONTEXT == 16
    assert [calibration_context(c, CPU) for c in (1, 16, 128, 4000)] == [1, 16, 16, 16]
    assert [calibration_context(c, H200) for c in (1, 16, 128, 4000)] == [1, 16, 128, 4000]
    assert [calibration_context(c, M2) for c in (0, 128)] == [1, 128]
    assert calibration_context(500) == 16  # this machine: MLX's CPU backend


def test_curve_for_prefills_at_most_16_tokens_on_the_cpu(engine, tmp_path):
    """The app asks curve_for for a 128-token context; on this CPU its calibration prefills 16
    (the warm-up skips the CPU: nothing compiles there), and the curve says so."""
    from core.runtime.calibration import curve_for

    s = Settings(mode="speculative", policy="cost-aware", k_max=4)
    with forward_rows(target=engine.target_model) as calls:
        result = curve_for(engine, s, context=128, folder=tmp_path)
    assert calls["target"] == [16, *[1, 2, 3, 4, 5] * 3]
    assert result.curve.context_len == 16
