"""Where the verify and draft time goes on MLX CUDA: a probe for issues 7 and 8.

A: one linear layer of the 7B shape at M rows: quantized_matmul (MLX's qmv/qmm) against
   dequantize-then-matmul (dense GEMM on the fly) and a dense weight.
B: the whole 7B verification at R rows (800-token context, KV advancing) with plain attention,
   MLX's quantized kernels against dequantize-then-matmul in every linear layer.
C: the pipelined decode step of both shapes under MLX CUDA graph settings (one subprocess
   each, since MLX reads them once): default, graphs off, 250 ops per graph.

Run on the GPU machine: python3 docs/benchmarks/h200/probe.py OUT_DIR [A B C]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn


def _t(fn, n: int = 20, rep: int = 5) -> float:
    """Median ms per call of `fn`, n calls evaluated together per repeat.

    (The probe run of 2026-11-29 evaluated only the last of the n calls, so its part A numbers
    are per-call overheads divided by n; docs/benchmarks/archive/h200.md uses parts B and C only.)
    """
    mx.eval(fn())
    mx.synchronize()
    out = []
    for _ in range(rep):
        t = time.perf_counter()
        mx.eval([fn() for _ in range(n)])
        mx.synchronize()
        out.append((time.perf_counter() - t) / n)
    return statistics.median(out) * 1e3


def part_a() -> dict:
    res = {}
    shapes = {"qkv_o": (3584, 3584), "kv": (3584, 512), "gate_up": (3584, 18944),
              "down": (18944, 3584), "lm_head": (3584, 152064)}
    for name, (k, n) in shapes.items():
        w = mx.random.normal((n, k)).astype(mx.bfloat16) * 0.02
        wq, s, b = mx.quantize(w, group_size=64, bits=4)
        wd = mx.dequantize(wq, s, b, group_size=64, bits=4)
        mx.eval(wq, s, b, wd)
        for m in (1, 2, 5, 8, 9, 16, 32):
            x = mx.random.normal((m, k)).astype(mx.bfloat16)
            mx.eval(x)
            q = _t(lambda x=x, wq=wq, s=s, b=b: mx.quantized_matmul(
                x, wq, s, b, transpose=True, group_size=64, bits=4))
            dq = _t(lambda x=x, wq=wq, s=s, b=b: x @ mx.dequantize(
                wq, s, b, group_size=64, bits=4).T)
            d = _t(lambda x=x, wd=wd: x @ wd.T)
            res[f"{name}/{m}"] = {"qmm": q, "dequant_mm": dq, "dense": d}
            print("A", name, m, f"qmm {q:.3f} dequant+mm {dq:.3f} dense {d:.3f} ms", flush=True)
    return res


def _dequant_call(self, x):
    w = mx.dequantize(self.weight, self.scales, self.get("biases"), group_size=self.group_size,
                      bits=self.bits, mode=getattr(self, "mode", "affine"))
    y = x @ w.T
    if "bias" in self:
        y = y + self["bias"]
    return y


def part_b() -> dict:
    from core.dispatch import verification_patches
    from core.models import load_model

    lm = load_model("shape:qwen2.5-7b")
    model = lm.model
    from core.cost.stepcost import _prefilled

    vocab = int(model.model.embed_tokens.weight.shape[0])
    cache = _prefilled(model, 800, vocab)
    res = {}
    orig = nn.QuantizedLinear.__call__
    for mode in ("qmm", "dequant"):
        if mode == "dequant":
            nn.QuantizedLinear.__call__ = _dequant_call
        try:
            for r in (1, 2, 5, 8, 9, 12, 16):
                ts = []
                for _ in range(8):
                    x = mx.random.randint(0, vocab, (1, r))
                    mx.eval(x)
                    t = time.perf_counter()
                    with verification_patches(model, "auto", "plain", rows=r):
                        y = model(x, cache=cache)
                    mx.eval(y)
                    ts.append(time.perf_counter() - t)
                    for c in cache:
                        c.trim(r - 1)
                res[f"{mode}/{r}"] = statistics.median(ts[2:]) * 1e3
                print("B", mode, r, f"{res[f'{mode}/{r}']:.2f} ms", flush=True)
        finally:
            nn.QuantizedLinear.__call__ = orig
    return res


STEP_CODE = r"""
import json, sys, statistics, time
import mlx.core as mx
from core.models import load_model
from core.cost.stepcost import _prefilled
out = {}
for spec in ("shape:qwen2.5-0.5b", "shape:qwen2.5-7b"):
    m = load_model(spec).model
    vocab = int(m.model.embed_tokens.weight.shape[0])
    cache = _prefilled(m, 800, vocab)
    base = cache[0].offset
    def run(n, chained=False):
        for c in cache: c.offset = base
        y = mx.argmax(m(mx.array([[1]]), cache=cache)[0, -1:], axis=-1)
        if chained:
            for _ in range(n - 1):
                y = mx.argmax(m(y[None], cache=cache)[0, -1:], axis=-1)
            mx.eval(y); return
        mx.async_eval(y)
        for _ in range(n - 1):
            y2 = mx.argmax(m(y[None], cache=cache)[0, -1:], axis=-1)
            mx.async_eval(y2); y.item(); y = y2
        y.item()
    for name, ch in (("pipelined", False), ("chained8", True)):
        run(8, ch); ts = []
        for _ in range(5):
            t = time.perf_counter(); run(8, ch); ts.append((time.perf_counter() - t) / 8)
        out[f"{spec}/{name}"] = statistics.median(ts) * 1e3
print(json.dumps(out))
"""


def part_c() -> dict:
    res = {}
    for label, env in (("default", {}), ("graphs_off", {"MLX_USE_CUDA_GRAPHS": "0"}),
                       ("ops250", {"MLX_MAX_OPS_PER_BUFFER": "250"}),
                       ("ops40", {"MLX_MAX_OPS_PER_BUFFER": "40"})):
        p = subprocess.run([sys.executable, "-c", STEP_CODE], env={**os.environ, **env},
                           capture_output=True, text=True, timeout=240)
        line = (p.stdout.strip().splitlines() or ["{}"])[-1]
        try:
            res[label] = json.loads(line)
        except ValueError:
            res[label] = {"error": (p.stderr or p.stdout)[-800:]}
        print("C", label, res[label], flush=True)
    return res


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    parts = sys.argv[2:] or ["A", "B", "C"]
    for part in parts:
        t = time.perf_counter()
        r = {"A": part_a, "B": part_b, "C": part_c}[part]()
        (out / f"probe-{part}.json").write_text(json.dumps(r, indent=1))
        print(f"part {part} took {time.perf_counter() - t:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
