"""Host time to build one draft step's lazy graph (no evaluation): the Python and MLX op
construction every backend pays before any kernel runs. Unfused, compiled (core.primitives.compiled), each
greedy and with the engine's sampling (repetition penalty, softmax, categorical draw).

Run: python docs/benchmarks/archive/h200/hostbuild.py [MODEL_SPEC]   (default shape:qwen2.5-0.5b)
"""

import statistics
import sys
import time

import mlx.core as mx

from core.cost.stepcost import _prefilled
from core.models import load_model
from core.primitives.compiled import CompiledForward
from core.primitives.sampling import LogitsConfig, penalize, sample, to_probs

spec = sys.argv[1] if len(sys.argv) > 1 else "shape:qwen2.5-0.5b"
m = load_model(spec).model
V = int(m.model.embed_tokens.weight.shape[0])
cache = _prefilled(m, 64, V)
base = cache[0].offset
cfg = LogitsConfig(temperature=0.7, repetition_penalty=1.1, repetition_context=20)
fused = CompiledForward(m)


def build(n: int, kind: str) -> float:
    """Milliseconds per step to build n chained draft steps, then evaluate them (untimed)."""
    for c in cache:
        c.offset = base
    y = mx.array([1])
    hist = mx.arange(20)
    drafts: list[mx.array] = []
    keys = mx.random.split(mx.random.key(0), n)
    t = time.perf_counter()
    for i in range(n):
        if kind.startswith("compiled"):
            logits = fused.step(y, cache)[:, :V]
        else:
            logits = m(y[None], cache=cache)[0, -1:]
        if kind.endswith("greedy"):
            y = mx.argmax(logits, axis=-1)
        else:
            ctx = mx.concatenate([hist, *drafts]) if drafts else hist
            y = sample(to_probs(penalize(logits, ctx, cfg), cfg), keys[i])
        drafts.append(y)
    dt = (time.perf_counter() - t) / n
    mx.eval(y)
    return dt * 1e3


print(spec, mx.default_device())
for kind in ("greedy", "sampled", "compiled greedy", "compiled sampled"):
    build(4, kind)
    print(f"{kind:18s} host build {statistics.median(build(8, kind) for _ in range(5)):.3f} ms/step")
