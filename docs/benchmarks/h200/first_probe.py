"""Where a fresh GPU's first minute goes: issue 31's probe of MLX CUDA's first-use compiles.

Each variant runs in its own process under an empty $MLX_PTX_CACHE_DIR (MLX reads it once), and
times, one after another: MLX's device start, the default model's load, the prompt's prefill and
its first token, one decode step, verification passes of 2..5, 8 and 16 rows, and the 4-bit
self-draft's step. After each step it lists the kernels the step added to the cache (name and
bytes), so the seconds can be pinned on kernels.

Variants:
  quantized  the model as loaded (Q4_1 matrices, a Q8_0 embedding and head: MLX's qmv/qmm)
  dense      every quantized matrix dequantized once at load (cuBLAS GEMMs, nothing to JIT
             but the elementwise and attention kernels)

Run on the GPU machine (PYTHONPATH=/tmp/site:$PWD, the default model fetched):
  python3 docs/benchmarks/h200/first_probe.py OUT_DIR [quantized dense]
Writes OUT_DIR/first-probe.json (per variant: steps with seconds and the kernels each added).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _kernels(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def child(variant: str, out: Path) -> None:
    """One variant, timed step by step; the cache dir is this process's own."""
    t_start = time.perf_counter()
    cache = Path(os.environ["MLX_PTX_CACHE_DIR"])
    steps: list[dict] = []
    seen: dict[str, int] = {}

    def step(name: str, fn) -> object:
        t = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - t
        now = _kernels(cache)
        added = {k: v for k, v in now.items() if k not in seen}
        seen.update(now)
        steps.append({"step": name, "s": round(seconds, 3),
                      "since_start_s": round(time.perf_counter() - t_start, 3),
                      "kernels_added": len(added), "bytes_added": sum(added.values()),
                      "kernels": sorted(added, key=lambda k: -added[k])[:12]})
        print(f"[{variant}] {name}: {seconds:.2f} s, +{len(added)} kernels "
              f"({sum(added.values()) / 1e6:.1f} MB)", flush=True)
        return value

    import mlx.core as mx
    import mlx.nn as nn

    step("device start", lambda: mx.eval(mx.ones(4) + 1))
    from mlx_lm.models.cache import make_prompt_cache

    from core.models.loader import load_model
    from core.models.self_draft import requantized_draft

    loaded = step("load default", lambda: load_model("default"))
    model = loaded.model
    if variant == "dense":
        def densify() -> None:
            swaps = []
            for path, m in model.named_modules():
                if isinstance(m, nn.QuantizedLinear):
                    w = mx.dequantize(m.weight, m.scales, m.get("biases"), m.group_size, m.bits)
                    d = nn.Linear(w.shape[1], w.shape[0], bias="bias" in m)
                    d.weight = w.astype(mx.bfloat16)
                    if "bias" in m:
                        d.bias = m.bias
                    swaps.append((path, d))
                elif isinstance(m, nn.QuantizedEmbedding):
                    w = mx.dequantize(m.weight, m.scales, m.get("biases"), m.group_size, m.bits)
                    d = nn.Embedding(w.shape[0], w.shape[1])
                    d.weight = w.astype(mx.bfloat16)
                    swaps.append((path, d))
            from mlx.utils import tree_unflatten
            model.update_modules(tree_unflatten(swaps))
            mx.eval(model.parameters())
        step("dequantize", densify)
    ids = loaded.tokenizer.encode("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                                  "<|im_start|>assistant\n")
    cache_kv = make_prompt_cache(model)

    def forward(tokens: list[int]) -> int:
        logits = model(mx.array([tokens]), cache=cache_kv)
        tok = mx.argmax(logits[0, -1])
        mx.eval(tok)
        return int(tok.item())

    first = step(f"prefill {len(ids)} + first token", lambda: forward(ids))
    tok = step("decode 1", lambda: forward([first]))
    for r in (2, 3, 4, 5, 8, 16):
        step(f"verify {r}", lambda r=r: forward([tok] * r))
    step("decode again (warm)", lambda: forward([tok]))
    draft = step("derive self:bits=4", lambda: requantized_draft(loaded, 4).model)
    dcache = make_prompt_cache(draft)

    def dstep(tokens: list[int]) -> None:
        mx.eval(mx.argmax(draft(mx.array([tokens]), cache=dcache)[0, -1]))
    step("draft prefill", lambda: dstep(ids))
    step("draft step", lambda: dstep([tok]))
    record = {"variant": variant, "mlx": mx.__version__,
              "device": mx.device_info().get("device_name"), "steps": steps,
              "total_s": round(time.perf_counter() - t_start, 3),
              "cache_bytes": sum(_kernels(cache).values())}
    (out / f"first-probe-{variant}.json").write_text(json.dumps(record, indent=1))


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    if len(sys.argv) > 3 and sys.argv[2] == "--child":
        child(sys.argv[3], out)
        return
    variants = sys.argv[2:] or ["quantized", "dense"]
    doc = {"variants": {}}
    for variant in variants:
        with tempfile.TemporaryDirectory() as ptx:
            env = dict(os.environ, MLX_PTX_CACHE_DIR=ptx, PYTHONUNBUFFERED="1")
            t = time.perf_counter()
            rc = subprocess.call([sys.executable, __file__, str(out), "--child", variant], env=env)
            path = out / f"first-probe-{variant}.json"
            rec = json.loads(path.read_text()) if path.exists() else {}
            doc["variants"][variant] = {"rc": rc, "wall_s": round(time.perf_counter() - t, 2), **rec}
    (out / "first-probe.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
