"""One rank of tests/core/runtime/test_distributed.py, launched N times by mlx.launch (ring backend).

Usage (from the repo root): mlx.launch -n 2 -p PORT --python PY -- tests/helpers/distributed_worker.py
OUT_DIR JOB [CLI ARGS...]. Each rank writes OUT_DIR/rank{R}.json; the test compares the ranks with each other
and with the unsharded twin every rank also builds (same seeds, same weights). Not a test
module itself: pytest never collects it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `core`

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

from core.decode.engine import Engine  # noqa: E402
from core.events import RoundEvent, RunSummary  # noqa: E402
from core.runtime.distributed import current_spmd, shard_model  # noqa: E402
from core.settings import Settings  # noqa: E402
from tests.helpers.tiny import (  # noqa: E402
    PROMPT,
    VOCAB,
    llama_args,
    next_token_logits,
    noisy_copy,
    softmax,
    tiny_llama,
)

# A prompt with a repeat, so the lookup (and hybrid) sources have something to copy.
REPEATING = [*PROMPT, 11, 12, 13, 14, 15, 16, 17, *PROMPT, 11, 12]
LAW_RUNS = int(os.environ.get("SPECDEC_TEST_LAW_RUNS", "120"))


def summary(items: Iterable[RoundEvent | RunSummary]) -> RunSummary:
    *_, last = items
    assert isinstance(last, RunSummary)
    return last


def models() -> tuple[Any, Any, Any]:
    """The sharded target, its unsharded twin and the (replicated) draft."""
    spmd = current_spmd()
    assert spmd is not None, "launched without a group of two ranks"
    target, twin = tiny_llama(2, seed=1), tiny_llama(2, seed=1)
    draft = noisy_copy(twin, 0.4, seed=7)
    shard_model(target, spmd.group, "tiny_llama")
    return target, twin, draft


def engines(target: Any, twin: Any, draft: Any) -> tuple[Engine, Engine]:
    spmd = current_spmd()
    sharded = Engine(target, draft, vocab_size=VOCAB)
    sharded.spmd = spmd
    return sharded, Engine(twin, draft, vocab_size=VOCAB)


def job_engine() -> dict[str, Any]:
    target, twin, draft = models()
    sharded, ref = engines(target, twin, draft)
    out: dict[str, Any] = {}

    # The sharded forward's logits: equal bit for bit on every rank, close to the unsharded.
    ids = mx.array([REPEATING])
    logits = target(ids)[0].astype(mx.float32)
    twin_logits = twin(ids)[0].astype(mx.float32)
    out["logits_sha256"] = hashlib.sha256(np.array(logits).tobytes()).hexdigest()
    out["logits_max_diff"] = float(mx.abs(logits - twin_logits).max().item())

    # Greedy: every draft source's output against the unsharded target's own greedy output.
    out["greedy"] = {}
    for source in ("model", "lookup", "hybrid"):
        s = Settings(mode="speculative", rule="greedy", temperature=0.0, k=4, max_tokens=24,
                     ignore_eos=True, draft_source=source, traced=False)
        sharded.reset()
        ref.reset()
        got = summary(sharded.generate(REPEATING, s))
        want = summary(ref.generate(REPEATING, s.replace(mode="target-only")))
        out["greedy"][source] = {
            "sharded": list(got.token_ids), "unsharded": list(want.token_ids),
            "per_source": got.per_source,
        }

    # Traced rounds time the collectives; untraced ones split nothing.
    s = Settings(mode="speculative", rule="lossless", temperature=1.0, k=3, max_tokens=12,
                 ignore_eos=True, seed=5)
    out["traced"] = dict(summary(sharded.generate(PROMPT, s.replace(traced=True))).phase_s)
    out["untraced"] = dict(summary(sharded.generate(PROMPT, s.replace(traced=False))).phase_s)

    # A cancelled turn, then a new turn on the same caches: every rank's caches stay equal.
    s = Settings(mode="speculative", rule="lossless", temperature=1.0, k=3, max_tokens=30,
                 ignore_eos=True, draft_source="hybrid", seed=11, traced=False)
    sharded.reset()
    cancel = threading.Event()
    first: list[int] = []
    for item in sharded.generate(REPEATING, s, cancel=cancel):
        if isinstance(item, RoundEvent):
            first.extend(t.id for t in item.tokens)
            if item.index == 2:  # decided by the event stream, so on every rank alike
                cancel.set()
        else:
            out["cancelled"] = {"stop": item.stop_reason, "tokens": list(item.token_ids)}
    out["cache_after_cancel"] = sharded.cache_state()
    turn2 = [*REPEATING, *first, 20, 21, 22]
    got = summary(sharded.generate(turn2, s.replace(seed=12)))
    out["turn2"] = {"tokens": list(got.token_ids), "prompt": turn2}
    out["cache_after_turn2"] = sharded.cache_state()

    # Lossless: the first token of many seeded runs follows the target's law (unsharded p).
    s = Settings(mode="speculative", rule="lossless", temperature=1.0, k=3, max_tokens=4,
                 ignore_eos=True, draft_source="model", traced=False)
    firsts = []
    for seed in range(LAW_RUNS):
        stop = threading.Event()  # one round per run: the first token is all that is tested
        for item in sharded.generate(PROMPT, s.replace(seed=seed), cancel=stop):
            if isinstance(item, RoundEvent):
                if item.index == 0:
                    firsts.append(item.tokens[0].id)
                stop.set()
    out["law"] = {
        "firsts": firsts,
        "p": softmax(next_token_logits(twin, [PROMPT])[0]).tolist(),
        "q": softmax(next_token_logits(draft, [PROMPT])[0]).tolist(),
    }
    return out


def job_cli_die() -> None:
    """Rank 1 dies in its third speculative round; rank 0 runs the real CLI to its end."""
    spmd = current_spmd()
    assert spmd is not None
    if spmd.rank == 1:
        plain = Engine._speculative_round
        rounds = [0]

        def dying(self: Engine, *args: Any, **kwargs: Any) -> RoundEvent:
            rounds[0] += 1
            if rounds[0] == 3:
                os._exit(9)
            return plain(self, *args, **kwargs)

        Engine._speculative_round = dying  # type: ignore[method-assign]
    from core.cli import main

    sys.exit(main(sys.argv[3:]))


def wide_llama(seed: int) -> Any:
    """One llama layer wide enough that its verification's compute is measurable beside a busy
    loopback's collectives (tiny_llama's 64 wide computes in microseconds: less than the error
    of any price, so what is left of its verification after pricing is noise around zero)."""
    from mlx_lm.models import llama

    mx.random.seed(seed)
    model = llama.Model(llama_args(hidden=512, layers=1, inter=2048, vocab=VOCAB))
    mx.eval(model.parameters())
    return model


def job_comm(runs: int) -> dict[str, Any]:
    """`runs` traced generations, each pricing its collectives afresh as a new process would
    (the probe after the first round that queues a size: what once raced): per run its phase
    seconds, every round's comm and total, its tokens and the prices every rank charged."""
    import core.runtime.comm_meter as comm

    spmd = current_spmd()
    assert spmd is not None, "launched without a group of two ranks"
    target, draft = wide_llama(seed=3), tiny_llama(1, seed=7)
    shard_model(target, spmd.group, "wide_llama")
    sharded = Engine(target, draft, vocab_size=VOCAB)
    sharded.spmd = spmd
    out: dict[str, Any] = {"runs": []}
    for i in range(runs):
        comm.reset_comm_prices()  # at the same point of the loop on every rank
        s = Settings(mode="speculative", rule="lossless", temperature=1.0, k=3, max_tokens=4,
                     ignore_eos=True, seed=100 + i, traced=True)
        rounds: list[dict[str, float]] = []
        t0 = time.perf_counter()
        for item in sharded.generate(PROMPT, s):
            if isinstance(item, RoundEvent):
                rounds.append(dataclasses.asdict(item.timings))
            else:
                out["runs"].append({
                    "phase_s": dict(item.phase_s), "rounds": rounds,
                    "tokens": list(item.token_ids),
                    "prices": sorted([n, v] for n, v in comm._prices.items()),
                    "seconds": time.perf_counter() - t0,
                })
    return out


def main() -> None:
    """JOB engine writes OUT_DIR/rank{R}.json, then runs the CLI with the arguments after it
    in the same processes (one launch, one import: this machine's cores are few)."""
    out_dir, job = Path(sys.argv[1]), sys.argv[2]
    if job == "cli-die":
        job_cli_die()
        return
    result = job_comm(int(sys.argv[3])) if job == "comm" else job_engine()
    spmd = current_spmd()
    assert spmd is not None
    (out_dir / f"rank{spmd.rank}.json").write_text(json.dumps(result))
    if job == "engine" and len(sys.argv) > 3:
        from core.cli import main as cli

        sys.exit(cli(sys.argv[3:]))


if __name__ == "__main__":
    main()
