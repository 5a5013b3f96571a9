"""Host cost of a tree round (core.drafting.tree): index, tree, flattening and mask, per round.

A tree round does, on the host: index the tokens committed since the last round (the suffix
automaton and the pair occurrences), find the earlier occurrences and merge their
continuations into a tree (build_tree), and flatten it for the verification: the rows'
positions by depth, the mask over the tree's own rows (the cached context's part is
prepended on the device) and the greedy rule's arrays (TreeArrays.of); the round is those
three. A lossless round builds the lossless rule's arrays instead (two more: the earlier
siblings and the children's tokens), timed on the same tree (flatten_sampled,
round_sampled). The tree's size is given (the drafter looks tree_nodes up once per depth
and curve, TreeDrafter.nodes_for), so no curve is read per round. This times each
part on a text built to fork a lot: a pasted passage repeated many times with 5% of its words
changed each time (a rename, an edit), so every round merges up to 16 occurrences into a
64-node tree, the worst case of the node budget. The device arrays are made (mx.array) but
never evaluated: the engine evaluates them with the verification.

    python docs/benchmarks/lookup/tree_host_cost.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time

from core.drafting.base import DraftRequest
from core.drafting.tree import TreeDrafter, build_tree
from core.primitives.sampling import LogitsConfig
from core.primitives.token_tree import row_positions, visible
from core.primitives.tree_sampling import TreeArrays

CONTEXTS = (1024, 8192, 32768)
DEPTH = 16
NODES = 64
ROUNDS = 300
NEW_PER_ROUND = 4


def forked_text(n: int, seed: int = 0) -> list[int]:
    """A 300-word passage (ids over a 32k vocabulary) pasted again and again, 5% of its words
    replaced each time."""
    rng = random.Random(seed)
    base = [rng.randrange(32000) for _ in range(300)]
    out: list[int] = []
    while len(out) < n:
        out.extend(w if rng.random() > 0.05 else rng.randrange(32000) for w in base)
    return out[:n]


def time_rounds(ctx: int) -> dict[str, list[float]]:
    text = forked_text(ctx + NEW_PER_ROUND * ROUNDS + 1)
    seq = text[:ctx]
    d = TreeDrafter(min_match=2, budget=NODES)
    d.catch_up(seq)  # the prompt: once per turn
    cfg = LogitsConfig(temperature=0.0)
    parts: dict[str, list[float]] = {"index": [], "tree": [], "flatten": [], "round": [],
                                     "flatten_sampled": [], "round_sampled": [],
                                     "nodes": []}
    for r in range(ROUNDS):
        seq.extend(text[ctx + NEW_PER_ROUND * r : ctx + NEW_PER_ROUND * (r + 1)])
        t0 = time.perf_counter()
        d.offers(seq)  # indexes the new tokens, as the engine's plan does before a round
        t1 = time.perf_counter()
        tree = build_tree(d.occ, DEPTH, NODES, d.min_match)
        t2 = time.perf_counter()
        if tree.size:  # greedy: what a greedy round builds
            TreeArrays.of(tree, sampled=False)
            row_positions(tree, len(seq) - 1, 1)
            visible(tree, 1)
        t3 = time.perf_counter()
        if tree.size:  # what a lossless round builds instead, on the same tree
            TreeArrays.of(tree, sampled=True)
            row_positions(tree, len(seq) - 1, 1)
            visible(tree, 1)
        t4 = time.perf_counter()
        parts["index"].append(t1 - t0)
        parts["tree"].append(t2 - t1)
        parts["flatten"].append(t3 - t2)
        parts["round"].append(t3 - t0)
        parts["flatten_sampled"].append(t4 - t3)
        parts["round_sampled"].append(t2 - t0 + t4 - t3)
        parts["nodes"].append(tree.size)
    # the drafter's own propose (what the round calls), for the record
    t0 = time.perf_counter()
    d.propose(DraftRequest(seq, DEPTH, 32000, cfg, None))
    parts["propose_once"] = [time.perf_counter() - t0]
    return parts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    load = os.getloadavg()  # a shared machine: its load says how far to trust the numbers
    for ctx in CONTEXTS:
        parts = time_rounds(ctx)
        row = {"context": ctx, "depth": DEPTH, "node_budget": NODES,
               "median_nodes": statistics.median(parts["nodes"]),
               "share_at_budget": sum(n >= NODES for n in parts["nodes"]) / ROUNDS}
        for name in ("index", "tree", "flatten", "round", "flatten_sampled", "round_sampled"):
            t = sorted(parts[name])
            row[f"{name}_median_us"] = statistics.median(t) * 1e6
            row[f"{name}_p90_us"] = t[int(0.9 * len(t))] * 1e6
        rows.append(row)
        print(f"{ctx:>6}  nodes {row['median_nodes']:>4.0f} (at budget {row['share_at_budget']:.0%})"
              + "".join(f"  {n} {row[f'{n}_median_us']:.0f}/{row[f'{n}_p90_us']:.0f} us"
                        for n in ("index", "tree", "flatten", "round")))
    if args.json:
        env = {"python": platform.python_version(), "machine": platform.machine(),
               "processor": platform.processor(), "rounds": ROUNDS,
               "new_tokens_per_round": NEW_PER_ROUND,
               "what": "median/p90 microseconds", "cpus": os.cpu_count(),
               "loadavg_before_after": [load, os.getloadavg()]}
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
