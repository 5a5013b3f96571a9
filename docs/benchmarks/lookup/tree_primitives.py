"""Primitives in one verification's graph: a tree forward against a chain forward of the
same rows, counted from MLX's own graph export (`mx.export_to_dot`), nothing evaluated.

A step on a GPU is host-bound: its cost follows the primitives the backend dispatches. If a
tree round cost more than a chain round of as many rows because its forward had more
primitives (the per-row RoPE, the explicit mask), this count would show it.

    python docs/benchmarks/lookup/tree_primitives.py OUT.json     (from the repo root)

The default model (SmolLM2-135M), a 300-token context, trees of two branches of equal depth.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ROWS = (9, 17, 33, 65)
CONTEXT = 300


def primitives(arr: object) -> Counter[str]:
    """The primitives of the graph that computes `arr`, by name."""
    import mlx.core as mx

    fd, path = tempfile.mkstemp(suffix=".dot")
    os.close(fd)
    try:
        mx.export_to_dot(path, arr)
        text = Path(path).read_text()
    finally:
        os.unlink(path)
    return Counter(re.findall(r'label\s*=\s*"([A-Za-z]+)', text))


def main(out: Path) -> int:
    import mlx.core as mx

    from core.models import load_pair
    from core.primitives.cached_model import CachedModel
    from core.primitives.introspect import vocab_size
    from core.primitives.token_tree import TokenTree
    from core.primitives.tree_forward import forward_tree

    pair = load_pair("default", None)
    model = pair.target.model
    vocab = vocab_size(model)
    context = list(range(100, 100 + CONTEXT))
    cases = []
    for rows in ROWS:
        chain = CachedModel.fresh(model)
        chain.prefill(context)
        c = primitives(chain.forward(mx.array(list(range(500, 500 + rows))), vocab))
        nodes = rows - 1  # the root's row (the pending token) and the nodes
        half = nodes // 2
        parents = ([-1, *range(half - 1)] + [-1, *range(half, nodes - 1)])[:nodes]
        tree = TokenTree(tokens=tuple(range(600, 600 + nodes)), parents=tuple(parents))
        fork = CachedModel.fresh(model)
        fork.prefill(context)
        t = primitives(forward_tree(fork, [499], tree, vocab))
        cases.append({"rows": rows, "chain": sum(c.values()), "tree": sum(t.values()),
                      "more_in_tree": {k: t[k] - c[k] for k in sorted(set(c) | set(t))
                                       if t[k] != c[k]}})
        print(cases[-1])
    doc = {"what": "primitives of one verification's graph (tree_primitives.py)",
           "model": pair.target.name if hasattr(pair.target, "name") else "default",
           "context": CONTEXT, "mlx": mx.__version__, "host": platform.node(), "cases": cases}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
