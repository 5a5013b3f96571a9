"""Where one target forward's time goes, by rows: the host's graph build, the wait for the
device, and the same forward pipelined (issue 28's "the round's own cost").

The calibration times a forward of R rows as one call behind a sync: on the H200 the default
model's one row reads 4-7 ms and every R from 2 to 33 about twice that (run 9's curves,
docs/benchmarks/never-slower.md), so a round costs about two steps whatever it drafts, and the
step after it about two more. Whether that is the host building more graph or the device
running slower kernels decides what would make a round cheaper: this clocks, per R and mode,
the Python call that builds the lazy graph (no evaluation), the mx.eval after it (encode,
device, sync), and a chain of CHAIN forwards each fed the previous one's argmax and queued
with async_eval, read once at the end (the pipelined rate: the larger of host and device per
forward). The KV length advances by one per forward, as in a loop; modes and R interleave
(pass, R, mode), one warm-up pass first. Mode "fused" is MLX's fused attention as the engine
asks for it: on CUDA at bucketed shapes (core/dispatch/bucketed.py, after this probe's first
run, where it was asked at each new KV length).

Run 12's data also has modes "queued-fused" and "queued-plain": the step a round queued before
its read (`overlap_round`), timed at one row. That step left the code after its A/B
(docs/decisions/0001-overlap-round.md), and its modes with it.

    python3 docs/benchmarks/h200/forward_split.py OUT.json

Environment: TARGET ("default"), CONTEXT ("600"), ROWS ("1 2 3 4 8 16 33"), MODES
("auto dense fused"), REPEATS ("5"),
CHAIN ("8").
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def write_probe(out: Path, probe: str, samples: dict[str, dict[int, dict[str, list[float]]]],
                **fields: Any) -> None:
    """A probe's JSON: its name and `fields`, the machine and MLX it ran on, and its samples in
    ms (mode -> rows -> what was clocked -> seconds, as the probe kept them)."""
    import mlx.core as mx

    record = {
        "probe": probe, **fields,
        "device": mx.device_info().get("device_name", str(mx.default_device())),
        "mlx": mx.__version__,
        "platform": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ms": {m: {str(r): {k: [round(x * 1e3, 6) for x in v] for k, v in tab.items()}
                   for r, tab in by_r.items()} for m, by_r in samples.items()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1))


def main(out: Path) -> int:
    import mlx.core as mx
    import numpy as np
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    from core.dispatch.backend import current_backend
    from core.dispatch.calibrate import MODE_SETTINGS
    from core.dispatch.patches import verification_patches
    from core.models import load_model
    from core.primitives.cached_model import cache_offset, prefill

    target = os.environ.get("TARGET", "default")
    context = int(os.environ.get("CONTEXT", "600"))
    row_list = [int(x) for x in os.environ.get("ROWS", "1 2 3 4 8 16 33").split()]
    modes = os.environ.get("MODES", "auto dense fused").split()
    repeats = int(os.environ.get("REPEATS", "5"))
    chain = int(os.environ.get("CHAIN", "8"))
    loaded = load_model(target)
    model = loaded.model
    vocab = int(model.model.embed_tokens.weight.shape[0])
    b = current_backend()
    rng = np.random.default_rng(0)
    cache = make_prompt_cache(model)
    prefill(model, cache, mx.array(rng.integers(0, vocab, context), dtype=mx.int32), 256)
    base = cache_offset(cache)

    def one(r: int, mode: str) -> tuple[float, float]:
        dispatch, attention = MODE_SETTINGS[mode]
        toks = mx.array(rng.integers(0, vocab, (1, r)), dtype=mx.int32)
        mx.eval(toks)
        t0 = time.perf_counter()
        with verification_patches(model, dispatch, attention, r, backend=b):
            logits = model(toks, cache=cache)
        t1 = time.perf_counter()
        mx.eval(logits)
        t2 = time.perf_counter()
        trim_prompt_cache(cache, r - 1)  # the KV length advances by one a call
        return t1 - t0, t2 - t1

    def chained(r: int, mode: str) -> float:
        dispatch, attention = MODE_SETTINGS[mode]
        rest = mx.array(rng.integers(0, vocab, r - 1), dtype=mx.int32)
        y = mx.array([int(rng.integers(0, vocab))], dtype=mx.int32)
        mx.eval(rest, y)
        t0 = time.perf_counter()
        for _ in range(chain):
            toks = mx.concatenate([y, rest])[None] if r > 1 else y[None]
            with verification_patches(model, dispatch, attention, r, backend=b):
                logits = model(toks, cache=cache)
            y = mx.argmax(logits[0, -1:], axis=-1).astype(mx.int32)
            mx.async_eval(y)
            trim_prompt_cache(cache, r - 1)  # lazy offsets: the next forward writes after y
        y.item()
        return (time.perf_counter() - t0) / chain

    samples: dict[str, dict[int, dict[str, list[float]]]] = {
        m: {r: {"build": [], "eval": [], "chain": []} for r in row_list} for m in modes
    }
    for p in range(1 + repeats):
        for r in row_list:
            for mode in (*modes[p % len(modes):], *modes[: p % len(modes)]):
                if r not in samples[mode]:
                    continue
                build, wait = one(r, mode)
                per = chained(r, mode)
                if p:
                    s = samples[mode][r]
                    s["build"].append(build)
                    s["eval"].append(wait)
                    s["chain"].append(per)
        # keep the KV length within a few hundred of the start: every pass adds R x (1 + chain)
        over = cache_offset(cache) - base
        if over > 0:
            trim_prompt_cache(cache, over)
    write_probe(out, "forward_split", samples, target=target,
                model=getattr(loaded, "name", target), context=context, chain=chain,
                repeats=repeats)
    for m in modes:
        for r in row_list:
            med = {k: statistics.median(v) * 1e3 for k, v in samples[m][r].items()}
            print(f"{m:6s} R={r:3d} build {med['build']:.2f} eval {med['eval']:.2f} "
                  f"chain {med['chain']:.2f} ms")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
