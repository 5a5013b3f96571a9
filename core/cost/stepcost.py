"""Decode-step cost of one model, scheduled every way the engine can: the draft-cost question.

Speculation pays only when k draft steps cost well under the target steps they replace, so
this measures one greedy decode step at a real context length: evaluated per step,
pipelined with async_eval (mlx-lm's generate_step schedule; also on a stream of its own, as
mlx-lm runs it), chained lazily over k steps,
and through the compiled fused step (core.primitives.compiled), plus mlx-lm's own generate_step as the
peer. It also counts the primitives in one step's graph (what the device must launch).

Run: python -m core.cost.stepcost --model shape:qwen2.5-0.5b --context 800 --json out.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import make_prompt_cache

from core.primitives.cached_model import prefill
from core.primitives.compiled import CompiledForward, supports


def _prefilled(model: nn.Module, context: int, vocab: int) -> list[Any]:
    """A cache holding `context` seeded random tokens (the KV length the steps run at)."""
    cache = make_prompt_cache(model)
    prefill(model, cache, mx.random.randint(0, vocab, (context,), key=mx.random.key(1)))
    return cache


def _time_steps(run: Callable[[int], None], steps: int, repeats: int) -> float:
    """Median over repeats of (wall time of `steps` steps) / steps."""
    run(4)  # warm (and trace, for compiled steps)
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        run(steps)
        out.append((time.perf_counter() - t) / steps)
    return statistics.median(out)


def count_primitives(model: nn.Module, context: int, vocab: int) -> dict[str, Any]:
    """Nodes in one decode step's lazy graph (weights excluded): the work the device launches."""
    cache = _prefilled(model, min(context, 64), vocab)
    y = mx.argmax(model(mx.array([[1]]), cache=cache)[0, -1], axis=-1)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "g.dot"
        mx.export_to_dot(str(path), y)
        text = path.read_text()
    # export_to_dot writes one line per primitive: `id [label ="Name", shape=rectangle]`.
    ops = Counter(m.group(1) for m in re.finditer(r'label ="([^"]+)", shape=rectangle', text))
    return {"total": sum(ops.values()), "by_op": dict(ops.most_common())}


def measure(model: nn.Module, vocab: int, *, context: int = 800, steps: int = 64,
            repeats: int = 5) -> dict[str, Any]:
    """Seconds per greedy decode step under each schedule (see module docstring)."""
    res: dict[str, Any] = {"context": context, "steps": steps, "repeats": repeats}
    cache = _prefilled(model, context, vocab)
    base = cache[0].offset

    # mlx-lm's generate_step runs on mx.new_stream; on the H200 it was 22% faster than our
    # default-stream schedule for the 0.5B shape in one run (4.43 vs 5.65 ms): measure both.
    own_stream = mx.new_stream(mx.default_device())

    def rewind() -> None:
        for c in cache:
            c.offset = base

    def schedules(step: Callable[[mx.array], mx.array]) -> dict[str, Callable[[int], None]]:
        """The three ways to run n greedy steps of `step(token[1]) -> logits[1, V]`."""

        def nxt(y: mx.array) -> mx.array:
            return mx.argmax(step(y), axis=-1)

        def per_step(n: int) -> None:
            rewind()
            y = mx.array([1])
            for _ in range(n):
                y = nxt(y)
                mx.eval(y)

        def pipelined(n: int) -> None:  # mlx-lm generate_step's schedule
            rewind()
            y = nxt(mx.array([1]))
            mx.async_eval(y)
            for _ in range(n - 1):
                y2 = nxt(y)
                mx.async_eval(y2)
                y.item()
                y = y2
            y.item()

        def chained8(n: int) -> None:  # a k = 8 draft loop with no host sync inside
            rewind()
            y = mx.array([1])
            for i in range(n):
                y = nxt(y)
                if (i + 1) % 8 == 0:
                    mx.eval(y)
            mx.eval(y)

        def pipelined_stream(n: int) -> None:  # the same on a stream of its own, as mlx-lm does
            with mx.stream(own_stream):
                pipelined(n)

        return {"per_step": per_step, "pipelined": pipelined, "chained8": chained8,
                "pipelined_stream": pipelined_stream}

    def unfused(y: mx.array) -> mx.array:
        return model(y[None], cache=cache)[0, -1:]

    steppers: dict[str, Callable[[mx.array], mx.array]] = {"": unfused}
    if supports(model) is None:
        fused = CompiledForward(model)
        steppers["fused_"] = lambda y: fused.step(y, cache)
    for prefix, step in steppers.items():
        for name, run in schedules(step).items():
            res[f"{prefix}{name}_s"] = _time_steps(run, steps, repeats)

    # The peer: mlx-lm's own generate_step (greedy, pipelined), over the same context length.
    from mlx_lm.generate import generate_step

    prompt = mx.random.randint(0, vocab, (context,), key=mx.random.key(1))

    def mlx_lm_run(n: int) -> None:
        for i, _ in enumerate(generate_step(prompt, model, max_tokens=n)):
            if i == 0:
                t_first[0] = time.perf_counter()

    t_first = [0.0]
    mlx_lm_run(4)
    times = []
    for _ in range(repeats):
        mlx_lm_run(steps + 1)
        times.append((time.perf_counter() - t_first[0]) / steps)
    res["mlx_lm_generate_step_s"] = statistics.median(times)
    try:
        res["primitives_per_step"] = count_primitives(model, context, vocab)
    except Exception as exc:  # graph export is diagnostic only
        res["primitives_per_step"] = f"unavailable: {exc}"
    return res


def main(argv: list[str] | None = None) -> int:
    from core.models import load_model
    from core.profile import record_environment

    p = argparse.ArgumentParser(prog="python -m core.cost.stepcost", description=__doc__)
    p.add_argument("--model", action="append", required=True, help="model spec (repeatable)")
    p.add_argument("--context", type=int, default=800)
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    out: dict[str, Any] = {"environment": record_environment(), "models": {}}
    for spec in args.model:
        lm = load_model(spec)
        vocab = int(lm.model.model.embed_tokens.weight.shape[0])
        r = measure(lm.model, vocab, context=args.context, steps=args.steps, repeats=args.repeats)
        out["models"][spec] = r
        print(spec, {k: (round(v * 1e3, 3) if isinstance(v, float) and k.endswith("_s") else v)
                     for k, v in r.items()}, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
