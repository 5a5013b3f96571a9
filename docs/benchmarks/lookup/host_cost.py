"""Host cost of a lookup round as the conversation grows: the suffix index against a scan.

A round of the lookup source does, on the host: index the tokens committed since the last
round, ask for the longest earlier repeat, copy up to k tokens. This times exactly that
(core.drafting.lookup.LookupDrafter, the engine's own code path) at context lengths up to 32k,
against the baseline it replaces (scan backwards for the last n tokens, n from 4 down to 1,
as prompt-lookup implementations do). No MLX work is timed: mx.array of the ids is built
lazily and never evaluated here (the engine evaluates it with the verification).

    python docs/benchmarks/lookup/host_cost.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time

import mlx.core as mx

from core.drafting.base import DraftRequest
from core.drafting.lookup import LookupDrafter
from core.drafting.suffix_index import scan_longest_repeat
from core.primitives.sampling import LogitsConfig

CONTEXTS = (1024, 4096, 16384, 32768)
K = 8
ROUNDS = 400


def conversation(n: int, seed: int = 0) -> list[int]:
    """Text-like ids: Zipf-distributed words over a 32k vocabulary, with pasted passages
    repeated now and then (what a chat about a document looks like)."""
    rng = random.Random(seed)
    weights = [1.0 / (r + 1) for r in range(32000)]
    out: list[int] = []
    while len(out) < n:
        if out and rng.random() < 0.1:
            start = rng.randrange(len(out))
            out.extend(out[start : start + rng.randint(20, 200)])
        else:
            out.extend(rng.choices(range(32000), weights, k=50))
    return out[:n]


def time_rounds(ctx: int, use_index: bool) -> list[float]:
    """Per-round host seconds for ROUNDS rounds after `ctx` tokens, 3 new tokens a round."""
    text = conversation(ctx + 3 * ROUNDS + 1)
    seq = text[:ctx]
    drafter = LookupDrafter(min_match=2)
    drafter.catch_up(seq)  # the prompt's prefill: once per turn, not per round
    cfg = LogitsConfig(temperature=0.0)
    keys = mx.random.split(mx.random.key(0), K)
    out = []
    for r in range(ROUNDS):
        seq.extend(text[ctx + 3 * r : ctx + 3 * r + 3])
        t0 = time.perf_counter()
        if use_index:
            if drafter.offers(seq):  # what the engine asks before a round
                drafter.propose(DraftRequest(seq, K, 32000, cfg, keys))
        else:
            m = scan_longest_repeat(seq, n_max=4, n_min=2)
            if m is not None:
                start = m.end + 1
                _ = seq[start : start + K]
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for ctx in CONTEXTS:
        for name, use in (("suffix index", True), ("scan n=4..2", False)):
            t = time_rounds(ctx, use)
            row = {
                "context": ctx, "method": name,
                "median_ms": statistics.median(t) * 1e3,
                "p90_ms": sorted(t)[int(0.9 * len(t))] * 1e3,
                "max_ms": max(t) * 1e3,
            }
            rows.append(row)
            print(f"{ctx:>6} {name:<14} median {row['median_ms']:.4f} ms  "
                  f"p90 {row['p90_ms']:.4f} ms  max {row['max_ms']:.3f} ms")
    if args.json:
        env = {"python": platform.python_version(), "machine": platform.machine(),
               "processor": platform.processor(), "rounds": ROUNDS, "k": K}
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
