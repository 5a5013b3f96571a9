"""Compiles seen, never timed (core/runtime/warmup.py): the watch says nothing for fast work and says
"compiling" within a second for a stall, then its time; the warm-up runs every shape once on
a GPU backend (faked here: the hardware query, never the maths) and nothing on the CPU; the
bench keeps its record. No test depends on this machine's speed: the stalled work waits on an
event the notices set, and the settle rule is checked on a scripted clock."""

from __future__ import annotations

import logging
import threading

import pytest

from core.runtime.compile_watch import THRESHOLD_S, CompileWatch, kernel_cache_dir, notices_to
from core.runtime.warmup import _settle, sampling_configs, tree_rows, verify_rows, warm_up
from tests.helpers.forward_rows import CPU, H200, forward_rows


def test_fast_work_says_nothing():
    notices = []
    with CompileWatch("tiny", on_notice=notices.append, threshold_s=60.0, log_notices=False) as w:
        pass
    assert notices == [] and not w.noticed
    assert not w._thread.is_alive()  # the timer ends with the block


def test_a_stall_is_said_within_a_second_then_its_time(tmp_path, caplog):
    """The block waits until the watch has said "compiling" and given one elapsed update, so
    it ends only once they came, however fast or slow this machine is."""
    assert THRESHOLD_S <= 1.0  # the notice comes within a second of the stall starting
    notices = []
    updated = threading.Event()

    def got(n):
        notices.append(n)
        if n.kind == "progress":
            updated.set()

    watch = CompileWatch("tiny", on_notice=got, threshold_s=0.05, interval_s=0.05,
                         cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="core.runtime.warmup"), watch as w:
        (tmp_path / "kernel.cubin").write_bytes(b"\0" * 2_000_000)  # MLX's cache grows
        assert updated.wait(30), "the watch never said anything"
    kinds = [n.kind for n in notices]
    assert kinds[0] == "started" and kinds[-1] == "done" and "progress" in kinds
    assert kinds.count("started") == 1 and kinds.count("done") == 1
    assert notices[0].text == "compiling GPU kernels for tiny: first use on this machine"
    assert notices[0].elapsed_s >= 0.05
    assert notices[-1].text.startswith("compiled GPU kernels for tiny in ")
    assert notices[-1].text.endswith("(kernel cache +2.0 MB)")
    assert w.noticed and w.cache_growth_bytes == 2_000_000
    # the same lines reach core's log, each carrying its notice (the app's bridge reads it)
    said = [r for r in caplog.records if r.name == "core.runtime.warmup"]
    assert [r.compile_notice.kind for r in said] == kinds


def test_a_stall_without_cache_growth_is_not_called_a_compile(tmp_path):
    gate = threading.Event()
    notices = []
    with CompileWatch("tiny", on_notice=lambda n: (notices.append(n), gate.set()),
                      threshold_s=0.05, interval_s=60.0, cache_dir=tmp_path,
                      log_notices=False) as w:
        assert gate.wait(30)
    assert w.cache_growth_bytes == 0
    assert notices[-1].text.startswith("first use of tiny took ")
    assert notices[-1].text.endswith("no kernel was compiled (the kernel cache did not grow)")


def test_notices_to_shows_each_notice_once():
    shown = []
    gate = threading.Event()
    with notices_to(lambda n: (shown.append(n.kind), gate.set())), \
            CompileWatch("tiny", threshold_s=0.05, interval_s=60.0):
        assert gate.wait(30)
    assert shown == ["started", "done"]


def test_kernel_cache_is_cuda_s_ptx_folder(tmp_path):
    import mlx.core as mx

    assert kernel_cache_dir("metal") is None and kernel_cache_dir("cpu") is None
    assert kernel_cache_dir("cuda", {"MLX_PTX_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert kernel_cache_dir("cuda", {}).parts[-3:] == ("mlx", mx.__version__, "ptx")


class _ScriptedSteps:
    """A warm-up's single-row step on a scripted clock: each step takes the next duration."""

    def __init__(self, durations):
        self.durations, self.now, self.steps = list(durations), 0.0, 0

    def clock(self):
        return self.now

    def step(self, _cache):
        self.now += self.durations[self.steps]
        self.steps += 1

    def progress(self):
        pass


@pytest.mark.parametrize(
    ("durations", "lockstep", "steps", "settled"),
    [
        ([5.0, 1.0, 0.90, 9.0], False, 3, True),  # 1.0 then 0.9: within 20%, stop there
        ([5.0, 1.0, 0.90, 9.0], True, 4, True),  # a sharded target runs every try
        ([1.0, 2.0, 1.0, 2.0, 1.0, 2.0], False, 6, False),  # never settles: bounded
    ],
)
def test_settle_stops_when_two_steps_agree(durations, lockstep, steps, settled):
    run = _ScriptedSteps(durations)
    times, ok = _settle(None, run, len(durations), 0.2, lockstep, run.clock)
    assert run.steps == steps and ok is settled
    assert times == pytest.approx(durations[:steps])


def test_warm_up_runs_every_shape_once_on_a_gpu(tiny_pair):
    target, draft = tiny_pair.target.model, tiny_pair.draft.model
    with forward_rows(target=target, draft=draft) as calls:
        record = warm_up(target, draft, vocab=tiny_pair.vocab_size, rows=[1, 2, 3, 5],
                         prompt_tokens=20, chunk=8, modes=("auto", "gemv"), label="tiny",
                         backend=H200)
    assert record.ran and record.backend == "cuda" and record.rows == [1, 2, 3, 5]
    assert record.prompt_tokens == 20 and record.seconds > 0
    settle = len(record.settle_s)
    assert 2 <= settle <= 8 and record.settled in (True, False)
    # prefill in chunks, each row count once per mode, then the settle check's single rows
    assert calls["target"] == [8, 8, 4] + [1, 2, 3, 5] * 2 + [1] * settle
    # the draft: its prefill, then two chained steps per kind of sampling
    configs = len(sampling_configs())
    assert calls["draft"] == [8, 8, 4] + [1] * (2 * configs)
    d = record.to_dict()
    assert set(d) >= {"seconds", "compiled", "settled", "cache_growth_bytes"}
    assert d["cache_growth_bytes"] is None or d["cache_growth_bytes"] >= 0


def test_warm_up_does_nothing_on_the_cpu(tiny_pair):
    target = tiny_pair.target.model
    with forward_rows(target=target) as calls:
        record = warm_up(target, None, vocab=tiny_pair.vocab_size, rows=[1, 2], backend=CPU)
    assert not record.ran and record.reason and calls["target"] == []
    assert record.to_dict()["settled"] is None


def test_rows_cover_the_longest_proposal_and_the_calibration():
    from core.settings import Settings

    spec = [Settings(mode="speculative", policy="fixed", k=4),
            Settings(mode="speculative", policy="cost-aware", k=2, k_max=12)]
    assert verify_rows(spec) == list(range(1, 14))
    assert verify_rows([Settings(mode="target-only")]) == [1]
    assert verify_rows([Settings(mode="target-only")], extra=9) == list(range(1, 10))
    kinds = {(c.greedy, c.top_p < 1, c.repetition_penalty != 1)
             for c in sampling_configs([Settings(temperature=0.7, top_p=0.9)])}
    assert kinds == {(True, False, False), (False, False, False), (False, True, False)}


def test_bench_json_carries_the_warm_up_record(engine, tiny_pair):
    import json

    from core import bench
    from core.settings import Settings

    ids = list(range(5, 25))
    kw = dict(tokens=4, seeds=1, invocations=1, warmup=0, traced=False, quality=False,
              predict=False)
    forced = bench.run_protocol(engine, ids, [Settings(k=2)], compile_warmup=True, **kw)
    doc = json.loads(forced.to_json())
    w = doc["environment"]["warmup"]
    assert w["ran"] is True and w["rows"] == [1, 2, 3] and w["prompt_tokens"] >= len(ids)
    assert isinstance(w["seconds"], float) and isinstance(w["compiled"], bool)
    assert w["settled"] in (True, False) and "cache_growth_bytes" in w
    plain = bench.run_protocol(engine, ids, [Settings(k=2)], **kw)  # this CPU: nothing to compile
    w = json.loads(plain.to_json())["environment"]["warmup"]
    assert w["ran"] is False and "CPU" in w["reason"]


def test_warm_up_leaves_the_engine_s_caches_alone(engine):
    from core.runtime.warmup import warm_up_engine

    before = engine.cache_state()
    record = warm_up_engine(engine, prompt_tokens=4, rows=[1, 2], force=True)
    assert record.ran and engine.cache_state() == before


def test_the_compiled_mode_warms_the_compiled_forward_of_every_row_count(tiny_pair, monkeypatch):
    """Mode "compiled" (a step other than eager) runs each row count through the compiled
    forward, no model call: its graphs and fused kernels are built before anything is timed."""
    from core.primitives.compiled import CompiledForward

    compiled: list[int] = []
    real = CompiledForward.forward

    def forward(self, tokens, cache, last=None):  # noqa: ANN001, ANN202
        compiled.append(int(tokens.shape[0]))
        return real(self, tokens, cache, last)

    monkeypatch.setattr(CompiledForward, "forward", forward)
    target = tiny_pair.target.model
    with forward_rows(target=target) as calls:
        record = warm_up(target, None, vocab=tiny_pair.vocab_size, rows=[1, 2, 9],
                         prompt_tokens=20, chunk=8, modes=("auto", "compiled"),
                         backend=H200)
    settle = len(record.settle_s)
    assert compiled == [1, 2, 9]
    assert calls["target"] == [8, 8, 4] + [1, 2, 9] + [1] * settle  # "auto" alone called it


def test_a_tree_run_warms_every_tree_row_count_under_each_mode(tiny_pair, monkeypatch):
    """A tree's verification is its own forward (core/primitives/tree_forward.py: the tree's
    mask, each row rotated at its depth) and its own acceptance: `tree_rows` runs one tree
    forward per row count per mode (the compiled step's unpatched, as its rounds run it),
    with the greedy and lossless rules, on the warm-up's cache, taken back after."""
    import core.primitives.tree_forward as tf
    from core.settings import Settings

    fed: list[tuple[int, int]] = []
    real = tf.forward_tree

    def forward_tree(cm, pending, tree, vocab):  # noqa: ANN001, ANN202
        fed.append((len(pending) + tree.size, cm.offset()))
        out = real(cm, pending, tree, vocab)
        assert out.shape[0] == len(pending) + tree.size
        return out

    monkeypatch.setattr(tf, "forward_tree", forward_tree)
    target = tiny_pair.target.model
    with forward_rows(target=target) as calls:
        record = warm_up(target, None, vocab=tiny_pair.vocab_size, rows=[1, 2],
                         tree_rows=[2, 3, 65], prompt_tokens=20, chunk=8,
                         modes=("auto", "gemv", "compiled"), backend=H200)
    assert [r for r, _ in fed] == [2, 3, 65] * 3
    assert {offset for _, offset in fed} == {20}  # each taken back: the prompt's cache
    assert record.tree_rows == [2, 3, 65]
    settle = len(record.settle_s)
    assert calls["target"] == [8, 8, 4] + [1, 2] * 2 + [1] * settle  # no model call by trees
    # which settings verify trees, and how wide: the tree's nodes and root, up to 64
    tree = Settings(mode="speculative", draft_source="tree", policy="cost-aware", k_max=8)
    assert tree_rows([tree]) == list(range(2, 65))
    assert tree_rows([tree.replace(draft_source="lookup"), Settings(mode="target-only")]) == []
    assert tree_rows([tree.replace(mode="target-only")]) == []


def test_the_bench_and_chat_warm_up_of_a_tree_run_warms_its_trees(engine):
    """warm_up_engine (the bench's and `chat`'s warm-up) reads the tree rows from the
    settings it is given: a tree source's run warms them, another's none."""
    from core.runtime.warmup import warm_up_engine
    from core.settings import Settings

    tree = Settings(mode="speculative", draft_source="tree", k=2)
    record = warm_up_engine(engine, [tree], prompt_tokens=4, rows=[1, 2], force=True)
    assert record.ran and record.tree_rows == list(range(2, 65))
    record = warm_up_engine(engine, [tree.replace(draft_source="lookup")], prompt_tokens=4,
                            rows=[1, 2], force=True)
    assert record.tree_rows == []
