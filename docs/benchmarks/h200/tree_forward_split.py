"""Where a tree round's extra time goes on a GPU: a tree's verification forward against a
chain's of as many rows, with ablations, and the accepted path's K/V gather.

tree-ab.sh's traced requests (docs/benchmarks/trees.md, "Why a tree round cost more") show a
tree verification costing more than the chain's at the same rows and row bucket, and a few
tree rounds costing 5-20 plain steps. This times, on one prefilled cache whose buffer never
changes size (so every shape's cuDNN plan is built once, at its first call), per rows R:

- `step`: a one-row decode, the unit;
- `chain`: the engine's chain verification of R rows (the model's call under
  verification_patches, as core/decode/speculative.py enters it);
- `tree-chain`: core/primitives/tree_forward.py's forward_tree over a chain-shaped tree of
  R - 1 nodes (the same rows and mask as `chain`, through the tree's code);
- `tree`: forward_tree over a tree of four equal branches (R - 1 nodes);
- `tree-norope`: `tree` without the per-row RoPE wrapper (wrong positions, same shapes): what
  the wrapper costs;
- `gather`: keeping the last branch after a `tree` forward by moving its K/V into place, a
  gather and a slice update for keys and values in every layer (the rule before
  docs/decisions/0009-tree-keep-refeed.md; written here as it was, since it left the code),
  against `trim`: CachedModel.keep_tree_path keeping the first branch (a plain trim).

Each is clocked as the Python call that builds the graph (`build`) and the mx.eval after it
(`eval`); the first call of each (mode, R) is kept apart (`first`): it pays what a shape's
first use costs (a plan, a compile). Modes rotate within a pass; pass 0 is the first calls.

    python3 docs/benchmarks/h200/tree_forward_split.py OUT.json

Environment: CONTEXT ("669", code-refactor-pasted's prompt), ROWS ("12 16 23 33 39 48 64 65"),
REPEATS ("10").
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODES = ("chain", "tree-chain", "tree", "tree-norope", "gather", "trim")


def branches(nodes: int, tokens: list[int], ways: int = 4) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`nodes` tokens as `ways` branches off the root, as equal as they split, in preorder."""
    parents: list[int] = []
    sizes = [nodes // ways + (1 if i < nodes % ways else 0) for i in range(ways)]
    for size in sizes:
        for j in range(size):
            parents.append(-1 if j == 0 else len(parents) - 1)
    return tuple(tokens[:nodes]), tuple(parents)


def main(out: Path) -> int:
    import mlx.core as mx
    import numpy as np
    from forward_split import write_probe
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    import core.primitives.tree_forward as tf
    from core.dispatch.patches import verification_patches
    from core.models import load_model
    from core.primitives.cached_model import CachedModel, cache_offset, prefill
    from core.primitives.introspect import vocab_size
    from core.primitives.token_tree import TokenTree

    context = int(os.environ.get("CONTEXT", "669"))
    row_list = [int(x) for x in os.environ.get("ROWS", "12 16 23 33 39 48 64 65").split()]
    repeats = int(os.environ.get("REPEATS", "10"))
    loaded = load_model("default")
    model = loaded.model
    vocab = vocab_size(model)
    rng = np.random.default_rng(0)
    cache = make_prompt_cache(model)
    prompt = [int(x) for x in rng.integers(0, vocab, context)]
    prefill(model, cache, mx.array(prompt, dtype=mx.int32), 256)
    base = cache_offset(cache)
    cm = CachedModel(model, cache, seq=list(prompt))
    real_rows_at = tf._rows_at

    def tree_of(mode: str, r: int) -> TokenTree:
        toks = [int(x) for x in rng.integers(0, vocab, r - 1)]
        if mode == "tree-chain":
            return TokenTree.chain(toks)
        return TokenTree(*branches(r - 1, toks))

    def one(mode: str, r: int) -> tuple[float, float]:
        """(build, eval) seconds of one call; the cache is back at `base` after it."""
        pending = [int(rng.integers(0, vocab))]
        if mode == "step":
            toks = mx.array([pending], dtype=mx.int32)
            t0 = time.perf_counter()
            logits = model(toks, cache=cache)
            t1 = time.perf_counter()
            mx.eval(logits)
        elif mode == "chain":
            toks = mx.array([pending + [int(x) for x in rng.integers(0, vocab, r - 1)]],
                            dtype=mx.int32)
            mx.eval(toks)
            t0 = time.perf_counter()
            with verification_patches(model, "auto", "auto", r):
                logits = model(toks, cache=cache)
            t1 = time.perf_counter()
            mx.eval(logits)
        elif mode in ("gather", "trim"):
            tree = tree_of("tree", r)
            with verification_patches(model, "auto", "auto", r):
                mx.eval(tf.forward_tree(cm, pending, tree, vocab))
            second = [i for i, q in enumerate(tree.parents) if q == -1][1]
            path = tree.path(tree.size - 1 if mode == "gather" else second - 1)
            t0 = time.perf_counter()
            if mode == "gather":
                at = cache_offset(cache) - tree.size
                src = mx.array([at + i for i in path])
                for c in cache:
                    c.keys[..., at : at + len(path), :] = c.keys[..., src, :]
                    c.values[..., at : at + len(path), :] = c.values[..., src, :]
                trim_prompt_cache(cache, tree.size - len(path))
            else:
                cm.keep_tree_path(pending, tree.size, path, [tree.tokens[i] for i in path])
            t1 = time.perf_counter()
            mx.eval([c.keys for c in cache] + [c.values for c in cache])
        else:
            tree = tree_of(mode, r)
            tf._rows_at = (lambda *_: contextlib.nullcontext()) if mode == "tree-norope" else real_rows_at
            try:
                t0 = time.perf_counter()
                with verification_patches(model, "auto", "auto", r):
                    logits = tf.forward_tree(cm, pending, tree, vocab)
                t1 = time.perf_counter()
                mx.eval(logits)
            finally:
                tf._rows_at = real_rows_at
        t2 = time.perf_counter()
        over = cache_offset(cache) - base
        if over > 0:
            trim_prompt_cache(cache, over)
        del cm.seq[base:]
        return t1 - t0, t2 - t1

    samples: dict[str, dict[int, dict[str, list[float]]]] = {
        m: {r: {"build": [], "eval": [], "first": []} for r in row_list} for m in ("step", *MODES)
    }
    for p in range(1 + repeats):
        for r in row_list:
            order = ("step", *MODES) if p == 0 else (*MODES[p % len(MODES):], *MODES[: p % len(MODES)], "step")
            for mode in order:
                build, wait = one(mode, r)
                s = samples[mode][r]
                if p == 0:
                    s["first"].append(build + wait)
                else:
                    s["build"].append(build)
                    s["eval"].append(wait)
    write_probe(out, "tree_forward_split", samples, target="default",
                model=getattr(loaded, "name", "default"), context=context, repeats=repeats,
                buffer=int(cache[0].keys.shape[2]))
    for m in samples:
        for r in row_list:
            v = samples[m][r]
            print(f"{m:11s} R={r:3d} first {v['first'][0] * 1e3:7.2f} build "
                  f"{statistics.median(v['build']) * 1e3:6.2f} eval "
                  f"{statistics.median(v['eval']) * 1e3:6.2f} ms")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
