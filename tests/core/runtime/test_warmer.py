"""Compile in the order of need (issue 31): before the first round only what the first rounds
use; the rest while the engine is idle, smallest first, one size at a time; the bench still
warms every size before anything is timed.

The GPU is faked (the hardware query, never the maths); the forwards run on the tiny
random-weight pair and are counted by row count."""

from __future__ import annotations

import pytest

from core.dispatch.curve import VerifyCostCurve
from core.runtime.warmer import (
    Warmer,
    WarmSize,
    every_size,
    first_round_sizes,
    prefill_bucket,
    starting_k,
)
from core.runtime.warmup import sampling_configs
from core.settings import Settings
from tests.helpers.forward_rows import H200, forward_rows

GREEDY = Settings(temperature=0.0, rule="greedy")


def _plan(sizes: list[WarmSize]) -> list[tuple[str, int, str, bool]]:
    return [(z.kind, z.rows, z.mode, z.compiled) for z in sizes]


def test_prefill_buckets_are_powers_of_two_up_to_the_chunk():
    assert [prefill_bucket(n, 512) for n in (0, 1, 2, 3, 20, 64, 65, 512, 5000)] == [
        1, 1, 2, 4, 32, 64, 128, 512, 512]


@pytest.mark.parametrize(
    ("settings", "verify_rows"),
    [
        (GREEDY.replace(policy="fixed", k=4), [1, 2, 3, 4, 5]),
        (GREEDY.replace(policy="fixed", k=0), [1]),
        (GREEDY.replace(policy="acceptance-rate", k=3, k_max=8), [1, 2, 3, 4]),
        (GREEDY.replace(policy="accepted-length", k=3, k_max=8), [1, 2, 3, 4]),
        (GREEDY.replace(policy="heuristic", k=5, k_max=5), [1, 2, 3, 4, 5, 6]),  # k at k_max
        # cost-aware with no curve yet: its calibration warms every size before it times them
        (GREEDY.replace(policy="cost-aware", k_max=12), list(range(1, 14))),
    ],
)
def test_the_first_round_set_of_a_speculative_run(settings, verify_rows):
    sizes = first_round_sizes(settings, prompt_tokens=20)
    assert _plan(sizes) == (
        [("draft", 1, "auto", False)]
        + [("verify", r, "auto", False) for r in verify_rows]
        + [("draft-prefill", 32, "auto", False), ("prefill", 32, "auto", False)]
    )
    # only the run's own logits processing, not every kind a session may switch to
    assert {z.configs for z in sizes if z.configs} == {(sampling_configs([settings])[0],)}


def test_target_only_and_draft_only_warm_only_their_model():
    assert _plan(first_round_sizes(GREEDY.replace(mode="target-only"), 100)) == [
        ("verify", 1, "auto", False), ("prefill", 128, "auto", False)]
    assert _plan(first_round_sizes(GREEDY.replace(mode="draft-only", step="compiled"), 5)) == [
        ("draft", 1, "auto", True), ("draft-prefill", 8, "auto", False)]
    # no draft loaded: a speculative run falls back to target steps
    assert _plan(first_round_sizes(GREEDY, 3, has_draft=False)) == [
        ("verify", 1, "auto", False), ("prefill", 4, "auto", False)]


def test_a_forced_dispatch_verifies_under_its_mode_and_the_decode_step_unpatched():
    sizes = first_round_sizes(GREEDY.replace(k=2, dispatch="gemm"), 8)
    assert [(z.rows, z.mode) for z in sizes if z.kind == "verify"] == [
        (1, "auto"), (1, "gemm"), (2, "gemm"), (3, "gemm")]


def _curve(per_row: float) -> VerifyCostCurve:
    """A curve whose verification costs 1 ms plus `per_row` ms a row; draft steps 0.1 ms."""
    rows = range(1, 34)
    return VerifyCostCurve("cuda", "fake", 128, {"auto": {r: 1e-3 + per_row * 1e-3 * r
                                                          for r in rows}},
                           draft_step_s=1e-4)


def test_cost_aware_starts_at_its_first_choice_on_the_curve():
    s = GREEDY.replace(policy="cost-aware", k_max=16)
    flat, steep = _curve(0.0), _curve(2.0)  # an H200's flat stretch; a CPU's rows-priced one
    k_flat, k_steep = starting_k(s, flat), starting_k(s, steep)
    # rows nearly free, the prior's 50% acceptance: 1.75 tokens per 1.2 ms at k = 2 beats
    # 1.5 / 1.1 (k = 1) and 1.875 / 1.3 (k = 3)
    assert k_flat == 2
    assert k_steep == 1  # nothing pays: the first probe proposes one
    rows = [z.rows for z in first_round_sizes(s, 20, curve=flat) if z.kind == "verify"]
    assert rows == list(range(1, k_flat + 2)) and len(rows) < s.k_max + 1


@pytest.fixture
def counted(tiny_pair):
    with forward_rows(target=tiny_pair.target.model, draft=tiny_pair.draft.model) as calls:
        yield calls


def test_the_first_round_warm_up_runs_only_its_forwards(engine, counted):
    before = engine.cache_state()
    w = Warmer(engine, backend=H200, chunk=8, label="tiny")
    record = w.first_round(GREEDY.replace(k=2), prompt_tokens=20)
    assert record.ran and record.backend == "cuda" and record.rows == [1, 2, 3]
    assert counted["target"] == [8, 1, 2, 3]  # one chunk's prefill, rows 1..k + 1
    assert counted["draft"] == [8, 1, 1]  # its prefill, two chained steps, one config
    assert engine.cache_state() == before  # the warmer's caches are its own
    # the same first round again: nothing left to warm, no forward
    counted.clear()
    w.first_round(GREEDY.replace(k=2), prompt_tokens=20)
    assert counted == {}


def test_the_idle_warmer_goes_smallest_first_and_skips_what_ran(engine, counted):
    w = Warmer(engine, backend=H200, chunk=8)
    w.first_round(GREEDY.replace(k=2), prompt_tokens=20)
    every = [GREEDY, Settings(temperature=0.7, top_p=0.9, repetition_penalty=1.1)]
    w.plan_idle(every_size(every, rows=range(1, 7), chunk=8))
    counted.clear()
    steps = []
    while (p := w.idle_step()) is not None:
        steps.append(p)
    assert [s.done for s in steps] == list(range(1, len(steps) + 1))
    assert steps[-1].finished and steps[-1].total == len(steps)
    ran = w.ran[-len(steps):]
    assert [z.order() for z in ran] == sorted(z.order() for z in ran)  # smallest first
    # rows 1..3 ran greedy in the first round: now only the other configs' processing, with
    # one forward each; rows 4..6 in full; the chunk's prefills ran in the first round
    assert counted["target"] == [1, 2, 3, 4, 5, 6]
    assert counted["draft"] == [1, 1] * 2  # the two sampled configs' chained steps
    assert w.idle_step() is None and not w.idle_pending


def test_an_idle_step_prefers_what_the_current_settings_use_next(engine, counted):
    w = Warmer(engine, backend=H200, chunk=8)
    w.plan_idle(every_size([GREEDY], rows=range(1, 10), chunk=8))
    first = first_round_sizes(GREEDY.replace(k=6, k_max=8), 0, chunk=8)
    order = []
    for _ in range(8):
        p = w.idle_step(first)
        order.append(p.last)
    assert order[:1] == ["draft step"]
    assert order[1:8] == [f"verification of {r} row{'s' * (r > 1)}" for r in range(1, 8)]


def test_nothing_is_warmed_on_the_cpu(engine, counted):
    w = Warmer(engine)  # this machine: MLX's CPU backend compiles nothing at first use
    record = w.first_round(GREEDY, prompt_tokens=20)
    w.plan_idle(every_size([GREEDY], rows=range(1, 4)))
    assert not record.ran and "CPU" in record.reason
    assert w.idle_step() is None and counted == {}


def test_bench_still_warms_every_size_before_timing(engine):
    """run_protocol warms all rows its settings can verify, not the first rounds' only."""
    import json

    from core import bench

    kw = dict(tokens=4, seeds=1, invocations=1, warmup=0, traced=False, quality=False,
              predict=False)
    report = bench.run_protocol(engine, list(range(5, 25)),
                                [GREEDY.replace(policy="accepted-length", k=2, k_max=6)],
                                compile_warmup=True, **kw)
    w = json.loads(report.to_json())["environment"]["warmup"]
    assert w["ran"] is True and w["rows"] == list(range(1, 8))  # k_max + 1, not k + 1
    assert isinstance(w["compiled"], bool)


def test_a_tree_source_s_sessions_warm_its_tree_verifications_while_idle(engine, monkeypatch):
    """Settings that draft trees add one idle size per tree row count and mode (the tree's
    own forward and rules), after the plain verifications of the same rows; the warmer runs
    them on its own cache, each once."""
    import core.primitives.tree_forward as tf

    fed: list[int] = []
    real = tf.forward_tree

    def forward_tree(cm, pending, tree, vocab):  # noqa: ANN001, ANN202
        fed.append(len(pending) + tree.size)
        return real(cm, pending, tree, vocab)

    monkeypatch.setattr(tf, "forward_tree", forward_tree)
    tree = GREEDY.replace(mode="speculative", draft_source="tree")
    sizes = every_size([tree], rows=range(1, 4), chunk=8, has_draft=False)
    trees = [z for z in sizes if z.kind == "tree"]
    assert [z.rows for z in trees] == list(range(2, 65))
    assert trees[0].describe() == "tree verification of 2 rows"
    assert not [z for z in every_size([GREEDY], rows=range(1, 4)) if z.kind == "tree"]
    w = Warmer(engine, backend=H200, chunk=8)
    before = engine.cache_state()
    record = w.run(sizes)
    assert record.tree_rows == list(range(2, 65)) and fed == list(range(2, 65))
    assert engine.cache_state() == before
    fed.clear()
    w.run(sizes)
    assert fed == []  # each once
