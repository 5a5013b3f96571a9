"""A target sharded over two processes (core/runtime/distributed.py), on this machine's ring backend.

The launched tests start two ranks with mlx.launch (the same launcher users run), each running
tests/helpers/distributed_worker.py or the real CLI, and compare what the ranks wrote: with each
other (they must agree on everything but their clocks) and with the unsharded twin of the
target every rank also builds. The rest checks the pieces in this process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

import core.runtime.comm_meter as comm
import core.runtime.distributed as dist
from core.decode.trace import RoundTimer, active_timer
from core.events import PHASES, PhaseTimings, RoundEvent
from tests.helpers import REPO as ROOT
from tests.helpers.tiny import VOCAB, assert_matches, assert_rejects, tiny_llama

WORKER = ROOT / "tests" / "helpers" / "distributed_worker.py"
# MLX's launcher (mlx/_distributed_utils/launch.py, 0.32) puts each rank's stdin pipe in the
# write list of its forwarding loop's select; a pipe is always writable, so the loop never
# waits and each rank's thread spins, as its main loop does on an exhausted stdin: 5-15 s of
# CPU a launch here, taken from the ranks it launched. These tests send the ranks no input, so
# the launcher runs with the write list left out of its select and a stdin that stays open and
# empty (launch()); the rest (hostfile, the ranks' environment, the forwarded output) is its own.
LAUNCH = ("import select, sys; import mlx._distributed_utils.launch as launch; "
          "launch.select = lambda r, w, x, t: select.select(r, [], x, t); sys.exit(launch.main())")
TIMEOUT_S = 240  # a hang would be a failure, never a stuck suite


def free_port_pair() -> int:
    """A base port whose next one is free too (the ring listens on one port per rank)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000:
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise RuntimeError("no free pair of ports")


def launch(*command: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Two ranks over the ring backend: `mlx.launch -n 2 -- python COMMAND...`."""
    args = [sys.executable, "-c", LAUNCH, "-n", "2", "--backend", "ring",
            "-p", str(free_port_pair()), "--python", sys.executable, "--", *command]
    empty, held = os.pipe()  # the launcher's stdin, open and never written (see LAUNCH)
    try:
        return subprocess.run(args, cwd=ROOT, stdin=empty, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        os.close(empty)
        os.close(held)


# The chat the engine launch ends with: the real CLI under the launcher, in the same processes.
CHAT = ("chat", "--target", "shape:tiny,dense", "--draft", "shape:tiny-draft,dense",
        "--max-tokens", "8", "hello")


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str]:
    """What each rank of the worker's engine job wrote (greedy, law, cancel, trace), and the
    launch's stderr, which ends with a chat run by the CLI on both ranks."""
    out = tmp_path_factory.mktemp("ranks")
    proc = launch(str(WORKER), str(out), "engine", *CHAT)
    files = [out / f"rank{r}.json" for r in (0, 1)]
    if not all(f.exists() for f in files):  # mlx.launch exits 0 even when a rank failed
        pytest.fail(f"a rank wrote nothing:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return [json.loads(f.read_text()) for f in files], proc.stderr


@pytest.fixture(scope="module")
def ranks(launched: tuple[list[dict[str, Any]], str]) -> list[dict[str, Any]]:
    return launched[0]


# -- launched: two ranks over the ring ---------------------------------------------------------


def test_ranks_agree_on_everything_but_their_clocks(ranks: list[dict[str, Any]]) -> None:
    a, b = ({k: v for k, v in r.items() if k != "traced"} for r in ranks)
    assert a == b


def test_sharded_logits_equal_bit_for_bit_across_ranks(ranks: list[dict[str, Any]]) -> None:
    # Two ranks: all_sum is a + b on one, b + a on the other, so the logits agree exactly;
    # against the unsharded target they differ only by the order of the partial sums.
    assert ranks[0]["logits_sha256"] == ranks[1]["logits_sha256"]
    assert ranks[0]["logits_max_diff"] < 1e-4


@pytest.mark.parametrize("source", ["model", "lookup", "hybrid"])
def test_greedy_equals_the_unsharded_target_for_every_source(
    ranks: list[dict[str, Any]], source: str
) -> None:
    for r in ranks:
        got = r["greedy"][source]
        assert got["sharded"] == got["unsharded"]
        assert len(got["sharded"]) == 24
        used = {name for name, v in got["per_source"].items() if v.get("proposed")}
        assert {"model": {"model"}, "lookup": {"lookup"}, "hybrid": {"lookup"}}[source] <= used


def test_lossless_first_token_follows_the_target_law(ranks: list[dict[str, Any]]) -> None:
    law = ranks[0]["law"]
    counts = np.bincount(law["firsts"], minlength=VOCAB)
    assert counts.sum() == 120
    assert_matches(counts, np.array(law["p"]), "sharded lossless, first token vs p")
    assert_rejects(counts, np.array(law["q"]), "the same draws vs the draft's q")


def test_cancel_and_a_new_turn_keep_every_rank_s_caches_equal(
    ranks: list[dict[str, Any]],
) -> None:
    for r in ranks:
        assert r["cancelled"]["stop"] == "cancelled"
        committed = r["turn2"]["prompt"] + r["turn2"]["tokens"]
        state = r["cache_after_turn2"]
        assert state["target_seq"] == committed[: len(state["target_seq"])]
        assert len(state["target_seq"]) == len(committed) - 1
        assert state["draft_seq"] == committed[: len(state["draft_seq"])]
    assert ranks[0]["cache_after_cancel"] == ranks[1]["cache_after_cancel"]
    assert ranks[0]["cache_after_turn2"] == ranks[1]["cache_after_turn2"]


def test_traced_rounds_time_the_collectives_untraced_split_nothing(
    ranks: list[dict[str, Any]],
) -> None:
    for r in ranks:
        assert r["traced"]["comm"] > 0.0, r["traced"]
        # A 64-wide target's verification computes in microseconds, less than a busy ring's
        # price error: what pricing leaves of it may be 0 here. The priced test's wider
        # target checks that pricing keeps the verification's compute.
        assert all(v >= 0.0 for v in r["traced"].values()), r["traced"]
        assert all(v == 0.0 for v in r["untraced"].values())


PRICED_RUNS = 20


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Each rank's PRICED_RUNS traced generations, every one pricing its collectives afresh."""
    out = tmp_path_factory.mktemp("priced")
    proc = launch(str(WORKER), str(out), "comm", str(PRICED_RUNS))
    files = [out / f"rank{r}.json" for r in (0, 1)]
    if not all(f.exists() for f in files):
        pytest.fail(f"a rank wrote nothing:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return [json.loads(f.read_text())["runs"] for f in files]


def test_priced_collectives_never_read_zero_nor_differ_between_ranks(
    priced: list[list[dict[str, Any]]],
) -> None:
    """The race the first priced design lost one time in four (a rank read a phase 0.0):
    20 traced generations, each probing its sizes again, on both ranks. Every run charges
    comm and keeps some verification (its target is wide enough for compute to show beside
    the collectives' price; the draft phase, a 64-wide draft and one tiny collective, may be
    all price); both ranks charge the same prices, agree on every token, and every round's
    phases are non-negative and sum to its total."""
    a, b = priced
    assert len(a) == len(b) == PRICED_RUNS
    for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
        assert ra["tokens"] == rb["tokens"], i
        assert ra["prices"] == rb["prices"] and len(ra["prices"]) >= 2, i  # agreed ids, rows
        assert all(price > 0.0 for *_, price in ra["prices"]), i
        for rank, run in enumerate((ra, rb)):
            where = f"run {i}, rank {rank}: {run['phase_s']}"
            assert run["phase_s"]["comm"] > 0.0, where
            assert run["phase_s"]["verify"] > 0.0, where
            for t in run["rounds"]:
                assert all(t[p] >= 0.0 for p in PHASES), where
                assert sum(t[p] for p in PHASES) == pytest.approx(t["total"], abs=1e-6), where


def test_the_cli_under_the_launcher_prints_once(launched: tuple[Any, str]) -> None:
    err = launched[1]
    assert err.count("tokens / rounds") == 1, err[-3000:]
    assert err.count("random-weight model") == 1
    words = " ".join(err.replace("│", " ").split())  # however the table wrapped its cells
    assert "comm (priced)" in words  # the chat's run is traced, its comm priced and said so
    assert "exited with code" not in err


def test_a_rank_that_dies_ends_the_others_with_a_sentence() -> None:
    t0 = time.monotonic()
    proc = launch(str(WORKER), "-", "cli-die", "chat", "--target", "shape:tiny,dense",
                  "--draft", "shape:tiny-draft,dense", "--max-tokens", "48", "hello")
    assert time.monotonic() - t0 < TIMEOUT_S
    assert "Node with rank 1 exited with code 9" in proc.stderr
    # "lost its peers inside a collective" (the ring failed the wait) or "was stopped" (the
    # launcher's SIGTERM came first); MLX's own "[ring] ..." lines may share its line.
    assert "specdec-tui: rank 0 of 2 " in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


# -- in this process ---------------------------------------------------------------------------


def test_comm_is_carved_out_of_the_phase_it_happened_in() -> None:
    timer = RoundTimer(traced=True)
    assert active_timer() is timer
    time.sleep(0.02)
    timer.add_comm(0.01)
    timer.mark("verify")
    t = timer.finish()
    assert active_timer() is None
    assert t.comm == pytest.approx(0.01)
    assert t.verify >= 0.009
    assert sum(getattr(t, p) for p in PHASES) == pytest.approx(t.total, abs=1e-6)
    RoundTimer(traced=False)
    assert active_timer() is None  # untraced rounds are never metered


def test_a_price_is_read_after_the_round_s_clock_stops_and_capped_by_its_phase(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A callable price (a size not probed yet) is read by `finish`, with the round closed
    (its probe's own collectives are not metered) and its seconds out of the round: the
    phases still sum to the round's total. A price above the phase's own time takes all of
    it, never more."""
    import core.decode.trace as trace

    now = [100.0]
    monkeypatch.setattr(trace.time, "perf_counter", lambda: now[0])
    seen: list[RoundTimer | None] = []

    def probe() -> float:
        seen.append(active_timer())
        now[0] += 7.0  # a probe's collectives: after the clock stopped, so never counted
        return 0.25

    timer = RoundTimer(traced=True)
    timer.add_comm(probe)
    now[0] += 1.0
    timer.mark("verify")
    timer.add_comm(0.5)
    timer.add_comm(0.75)  # 1.25 s priced inside a phase of 1 s: the phase's all
    now[0] += 1.0
    timer.mark("sample")
    assert seen == []  # nothing read while the round runs
    t = timer.finish()
    assert seen == [None]
    assert (t.verify, t.sample, t.comm, t.total) == pytest.approx((0.75, 0.0, 1.25, 2.0))
    assert sum(getattr(t, p) for p in PHASES) == pytest.approx(t.total)


def test_the_meter_prices_all_sum_in_traced_rounds_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside a traced round the meter only queues the collective (no probe, no sync: two
    barriers a layer serialised a sharded round); the round's end probes each new size once,
    in bursts, and every later round reuses the price. Untraced rounds are never priced."""
    calls: list[tuple[Any, ...]] = []

    def slow_sum(x: mx.array, *args: Any, **kwargs: Any) -> mx.array:
        calls.append(tuple(x.shape))
        time.sleep(0.01)
        return x * 2  # two ranks that each held x

    def gather(x: mx.array, **kwargs: Any) -> mx.array:
        calls.append(("gather", *x.shape))
        return mx.concatenate([x * 3, x])  # the other rank's burst waited for this one

    monkeypatch.setattr(mx.distributed, "all_sum", slow_sum)
    monkeypatch.setattr(mx.distributed, "all_gather", gather)
    comm.install_comm_meter()
    group = _FakeGroup(2, rank=0)
    try:
        timer = RoundTimer(traced=False)
        mx.distributed.all_sum(mx.ones(3), group=group)
        assert timer.finish().comm == 0.0 and calls == [(3,)] and comm._prices == {}
        probe_calls = (1 + comm.PROBE_CHAIN) * comm.PROBE_BURSTS + 1  # meet+burst, share
        for n in range(2):  # the second round finds the size priced already
            calls.clear()
            timer = RoundTimer(traced=True)
            for _ in range(3):
                mx.distributed.all_sum(mx.ones(3), group=group)
            assert calls == [(3,)] * 3  # queued as they came, nothing else
            time.sleep(0.1)  # the phase's own work: comm is carved out of at most its time
            timer.mark("verify")
            t = timer.finish()
            assert len(calls) == 3 + (probe_calls if n == 0 else 0)
            price = comm._prices[comm.SMALLEST_CLASS]  # 12 bytes: the smallest class
            assert 0.009 <= price < 0.018  # one collective's seconds: the least rank's, not 2x
            assert t.comm == pytest.approx(3 * price)
            assert t.verify == pytest.approx(t.total - t.comm, abs=1e-3)
    finally:
        comm.uninstall_comm_meter()
    assert mx.distributed.all_sum is slow_sum and comm._prices == {}


def test_collectives_are_priced_by_size_class() -> None:
    """A price per power of two of bytes, at least 4 KiB: shapes that cost alike share one
    probe (a TP = 2 round of a 72B queues rows x 8192 bf16 and a few int32 decisions)."""
    assert comm.size_class((1,), mx.int32) == comm.size_class((1, 2, 512), mx.float32) == 4096
    assert comm.size_class((1, 3, 512), mx.float32) == comm.size_class((1, 4, 512), mx.float32)
    assert comm.size_class((1, 1, 8192), mx.bfloat16) == 16384
    assert comm.size_class((1, 9, 8192), mx.bfloat16) == 262144


def test_rounds_recorded_before_comm_existed_still_load() -> None:
    old = {"index": 0, "tokens": [[1, "target"]], "timings": {"verify": 0.5, "total": 0.6}}
    ev = RoundEvent.from_dict(old)
    assert ev.timings == PhaseTimings(verify=0.5, total=0.6) and ev.timings.comm == 0.0


def test_not_launched_is_rank0_and_never_joins_a_group(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in dist.LAUNCH_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(dist, "_group", None)
    assert dist.launched_group() is None and dist.current_spmd() is None
    assert dist.is_rank0() and dist.rank0_only(lambda: 7)() == 7
    dist.refuse_app_when_launched()  # nothing to refuse


class _FakeGroup:
    def __init__(self, size: int, rank: int = 1) -> None:
        self._size, self._rank = size, rank

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank


def test_launched_followers_write_nothing_and_the_app_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dist, "_group", _FakeGroup(2, rank=1))
    assert dist.rank0_only(lambda: 7)() is None
    from core.cli import main

    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specdec-tui: The app runs in one process, not over 2 launched ranks")
    assert err.count("\n") == 1


def test_a_follower_prints_only_its_errors() -> None:
    class Sink:
        text = ""

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    sink = Sink()
    stream = dist._ErrorsOnly(1, sink)
    stream.write("a summary table\nspecdec-tui: the spec is wrong.\nmore ")
    stream.write("noise\nTraceback (most recent call last):\n  File x\n")
    assert sink.text == (
        "specdec-tui (rank 1): the spec is wrong.\nTraceback (most recent call last):\n  File x\n"
    )


def test_a_target_whose_heads_do_not_split_is_refused_in_a_sentence() -> None:
    model = tiny_llama(1, seed=0)  # 4 heads, 2 key-value heads
    with pytest.raises(dist.DistributedError, match="its 4 attention heads do not split into 3"):
        dist.shard_model(model, _FakeGroup(3), "tiny")
    with pytest.raises(dist.DistributedError, match="2 key-value heads do not split into 4"):
        dist.shard_model(model, _FakeGroup(4), "tiny")


def test_which_specs_load_through_mlx_lm_sharded_loading(tmp_path: Path) -> None:
    assert dist.mlx_source("mlx-community/Qwen2.5-7B-Instruct-4bit") is not None
    assert dist.mlx_source(str(tmp_path)) == str(tmp_path)
    for spec in ("default", "shape:qwen2.5-72b", "self:bits=4", "x.gguf", "./missing"):
        assert dist.mlx_source(spec) is None


# --------------------------------------------------------------------------- folded in from test_hostile_input.py


@pytest.mark.usefixtures("wide_console")
def test_a_lost_peer_sentence_does_not_promise_a_message_a_killed_rank_never_left(
    monkeypatch,
) -> None:
    import core.runtime.distributed as D

    class Group:
        def rank(self) -> int:
            return 1

        def size(self) -> int:
            return 2

    monkeypatch.setattr(D, "_group", Group())
    said = D.lost_peer_sentence(RuntimeError("[ring] Recv failed with errno=104"))
    assert said is not None and "rank 1 of 2 lost its peers" in said
    assert "unless it was killed" in said and "its own message says why" not in said
