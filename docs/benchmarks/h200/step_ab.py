"""The compiled forward against the eager one and mlx-lm, paired per seed: issue 56's goals.

`step = compiled` (core/primitives/compiled.py) runs every forward of up to 64 rows, the 1-row
step and each verification bucket, as one traced graph over the KV cache's preallocated buffer.
Whether that pays on a GPU is what this measures, three parts, each with its arms interleaved
per seed (the order rotated seed to seed, one untimed warm-up request per arm first), so the
host's drift hits every arm alike:

- target: target-only decode on each of TARGETS (the default model, the 7B shape), step eager
  against compiled against mlx-lm's own `generate_step` (greedy, TOKENS new tokens, EOS
  ignored); per request its decode tok/s, and per seed the ratios compiled/mlx-lm,
  eager/mlx-lm and compiled/eager.
- pair: the real pair's shapes (PAIR: target then draft): a chain of CHAIN 1-row steps of each
  model through each step (the draft's and the target's ms a step, and their ratio per step
  kind), then target-only against fixed-8 at TV 0.5 end to end per step kind.
- lookup: the default model on PROMPT_LOOKUP (code-refactor-pasted) greedy, traced: a lookup
  round's time in plain target steps (its mean round over the median plain step of the same
  request), per step kind, and the decode speed over target-only of the lookup and of the
  `default` arm: Settings()'s defaults (model drafts from self:bits=4, fixed k = 4, mentored
  at TV 0), not the app's first-run default (hybrid, cost-aware: core/settings.py
  first_run_settings); both drafting arms at fixed k = 4, so a lookup round verifies 5 rows.

    python3 docs/benchmarks/h200/step_ab.py OUT.json

Environment: PARTS ("target pair lookup"), TARGETS ("default shape:qwen2.5-7b"), PAIR
("shape:qwen2.5-1.5b shape:qwen2.5-0.5b"), LOOKUP_PAIR ("default self:bits=4"), PROMPT
("code-bugfix"), PROMPT_LOOKUP ("code-refactor-pasted"), SEEDS (3), TOKENS (256), CHAIN (64).
Writes one JSON document: per part, every request's numbers and the per-seed ratios (of decode
tok/s; `step ms ...`: of ms a step); each request's `graphs` says how many graphs the compiled
forwards had traced by its end (a count that grows past the warm-up is a retrace in the timed
requests). On the CPU with PARTS as default but every model `shape:tiny` (TARGETS, PAIR and
LOOKUP_PAIR "shape:tiny shape:tiny-draft") it runs in a minute: a check that it works, no
timing.
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

STEPS = ("eager", "compiled")


def interleaved(arms: list[str], seeds: int) -> list[tuple[str, int]]:
    """(arm, seed) in the order they run: per seed every arm, the order rotated by the seed."""
    return [(arm, seed) for seed in range(seeds)
            for arm in arms[seed % len(arms):] + arms[: seed % len(arms)]]


def ratios(reqs: list[dict[str, Any]], key: str, num: str, den: str) -> dict[str, Any]:
    """Per seed, arm `num`'s `key` over arm `den`'s, with their median and range."""
    by = {(r["arm"], r["seed"]): r[key] for r in reqs}
    per = [by[(num, s)] / by[(den, s)] for s in sorted({r["seed"] for r in reqs})
           if by.get((num, s)) and by.get((den, s))]
    return {"per_seed": per, "median": statistics.median(per) if per else None,
            "min": min(per, default=None), "max": max(per, default=None)}


def prompt_ids(pair: Any, name: str) -> list[int]:
    from core.bench.prompts import load_prompt
    from core.models.chat_template import chat_prompt_ids

    return chat_prompt_ids(pair.target.tokenizer, [{"role": "user", "content": load_prompt(name)}])


def ours(engine: Any, ids: list[int], s: Any) -> dict[str, Any]:
    """One request of ours from an empty cache: its summary's speed and the step it ran, and
    the events (for the lookup part)."""
    from core.events import RunSummary

    engine.reset()
    events = []
    t0 = time.perf_counter()
    for item in engine.generate(list(ids), s):
        if isinstance(item, RunSummary):
            return {"e2e_s": time.perf_counter() - t0, "decode_tok_s": item.decode_tok_s,
                    "tokens": item.tokens, "step": item.step, "graphs": item.graphs,
                    "eager_because": item.eager_because, "events": events}
        events.append(item)
    raise RuntimeError("generate ended without a summary")


def mlx_lm(model: Any, ids: list[int], tokens: int) -> dict[str, Any]:
    """mlx-lm's own target-only loop (generate_step, greedy): decode tok/s after the first."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    t0 = time.perf_counter()
    first = None
    n = 0
    for _tok, _ in generate_step(mx.array(ids), model, max_tokens=tokens,
                                 sampler=lambda lp: mx.argmax(lp, axis=-1)):
        n += 1
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    rate = (n - 1) / (end - first) if first is not None and n > 1 and end > first else 0.0
    return {"e2e_s": end - t0, "decode_tok_s": rate, "tokens": n}


def part_target(targets: list[str], seeds: int, tokens: int, prompt: str) -> dict[str, Any]:
    out = {target: one_target(target, seeds, tokens, prompt) for target in targets}
    for target, res in out.items():
        print(target, {k: v["median"] for k, v in res.items() if k != "requests"})
    return out


def one_target(target: str, seeds: int, tokens: int, prompt: str) -> dict[str, Any]:
    """The target part for one model (loaded here, released when it returns)."""
    from core.decode.engine import Engine
    from core.models import load_pair
    from core.settings import Settings

    pair = load_pair(target, None)
    engine = Engine.from_pair(pair)
    ids = prompt_ids(pair, prompt)

    def run(arm: str, seed: int) -> dict[str, Any]:
        if arm == "mlx-lm":
            return mlx_lm(pair.target.model, ids, tokens)
        s = Settings(mode="target-only", temperature=0.0, max_tokens=tokens,
                     ignore_eos=True, traced=False, seed=seed, step=arm)
        r = ours(engine, ids, s)
        r.pop("events")
        return r

    arms = [*STEPS, "mlx-lm"]
    for arm in arms:
        run(arm, 99)  # warm-up: every kernel and graph built before a timed request
    reqs = [{"arm": arm, "seed": seed, **run(arm, seed)} for arm, seed in interleaved(arms, seeds)]
    return {"requests": reqs, **{
        f"{a}/{b}": ratios(reqs, "decode_tok_s", a, b)
        for a, b in (("compiled", "mlx-lm"), ("eager", "mlx-lm"), ("compiled", "eager"))}}


def chain_ms(model: Any, ids: list[int], step: str, n: int) -> float:
    """ms a 1-row step over a chain of `n` greedy steps with no host sync inside (as the
    engine drafts), through `step`, from a cache prefilled with `ids`."""
    import mlx.core as mx

    from core.primitives.cached_model import CachedModel
    from core.primitives.introspect import vocab_size

    cm = CachedModel.fresh(model)
    cm.step = step
    cm.prefill(ids[:-1])
    vocab = vocab_size(model)
    x = mx.array(ids[-1:])
    t0 = time.perf_counter()
    for _ in range(n):
        x = mx.argmax(cm.decode(x, vocab), axis=-1)
        mx.async_eval(x)
    mx.eval(x)
    return (time.perf_counter() - t0) * 1e3 / n


def part_pair(specs: list[str], seeds: int, tokens: int, chain: int, prompt: str) -> dict[str, Any]:
    from core.decode.engine import Engine
    from core.models import load_pair
    from core.profile import load_profile

    pair = load_pair(specs[0], specs[1])
    ids = prompt_ids(pair, prompt)[:512]
    arms = [f"{role}-{step}" for step in STEPS for role in ("target", "draft")]
    models = {"target": pair.target.model, "draft": pair.draft.model}
    for arm in arms:
        role, step = arm.split("-")
        chain_ms(models[role], ids, step, 4)  # warm-up, traced
    steps = [{"arm": arm, "seed": seed, "step_ms": chain_ms(models[arm.split("-")[0]], ids,
                                                             arm.split("-")[1], chain)}
             for arm, seed in interleaved(arms, seeds)]
    out: dict[str, Any] = {"steps": steps}
    for step in STEPS:
        out[f"step ms draft/target {step}"] = ratios(steps, "step_ms", f"draft-{step}",
                                                     f"target-{step}")
    for role in ("target", "draft"):
        out[f"step ms {role} compiled/eager"] = ratios(steps, "step_ms", f"{role}-compiled",
                                                       f"{role}-eager")
    engine = Engine.from_pair(pair)
    base = load_profile("fixed-8-tv0.5").settings.replace(max_tokens=tokens, ignore_eos=True,
                                                           traced=False)
    e2e_arms = [f"{row}-{step}" for step in STEPS for row in ("target-only", "fixed-8-tv0.5")]

    def run(arm: str, seed: int) -> dict[str, Any]:
        row, step = arm.rsplit("-", 1)
        s = base.replace(seed=seed, step=step, **({"mode": "target-only"} if row == "target-only"
                                                   else {}))
        r = ours(engine, ids, s)
        r.pop("events")
        return r

    for arm in e2e_arms:
        run(arm, 99)
    reqs = [{"arm": a, "seed": s, **run(a, s)} for a, s in interleaved(e2e_arms, seeds)]
    out["requests"] = reqs
    for step in STEPS:
        out[f"fixed-8-tv0.5/target-only {step}"] = ratios(
            reqs, "decode_tok_s", f"fixed-8-tv0.5-{step}", f"target-only-{step}")
    print("pair", {k: v["median"] for k, v in out.items() if isinstance(v, dict)})
    return out


def part_lookup(specs: list[str], seeds: int, tokens: int, prompt: str) -> dict[str, Any]:
    from core.decode.engine import Engine
    from core.models import load_pair
    from core.settings import Settings

    pair = load_pair(specs[0], specs[1])
    engine = Engine.from_pair(pair)
    ids = prompt_ids(pair, prompt)
    arms = [f"{row}-{step}" for step in STEPS for row in ("target-only", "lookup", "default")]

    def run(arm: str, seed: int) -> dict[str, Any]:
        row, step = arm.rsplit("-", 1)
        extra = {"target-only": {"mode": "target-only"}, "lookup": {"draft_source": "lookup"},
                 "default": {}}[row]
        s = Settings(temperature=0.0, max_tokens=tokens, ignore_eos=True, traced=True,
                     seed=seed, step=step, **extra)
        r = ours(engine, ids, s)
        events = r.pop("events")
        plain = [e.timings.total for e in events if not e.proposed and e.rows == 1]
        copies = [e.timings.total for e in events if e.proposed and e.source == "lookup"]
        step_s = statistics.median(plain) if plain else None
        r["plain_step_ms"] = step_s * 1e3 if step_s else None
        r["lookup_rounds"] = len(copies)
        r["lookup_round_ms"] = statistics.fmean(copies) * 1e3 if copies else None
        r["round_in_steps"] = (statistics.fmean(copies) / step_s) if copies and step_s else None
        return r

    for arm in arms:
        run(arm, 99)
    reqs = [{"arm": a, "seed": s, **run(a, s)} for a, s in interleaved(arms, seeds)]
    out: dict[str, Any] = {"requests": reqs}
    for step in STEPS:
        for row in ("lookup", "default"):
            out[f"{row}/target-only {step}"] = ratios(reqs, "decode_tok_s", f"{row}-{step}",
                                                      f"target-only-{step}")
        costs = [r["round_in_steps"] for r in reqs
                 if r["arm"] == f"lookup-{step}" and r["round_in_steps"]]
        out[f"lookup round in plain steps {step}"] = statistics.median(costs) if costs else None
    print("lookup", {k: (v["median"] if isinstance(v, dict) else v) for k, v in out.items()
                     if k != "requests"})
    return out


def main(out: Path) -> int:
    import mlx.core as mx

    parts = os.environ.get("PARTS", "target pair lookup").split()
    seeds = int(os.environ.get("SEEDS", "3"))
    tokens = int(os.environ.get("TOKENS", "256"))
    prompt = os.environ.get("PROMPT", "code-bugfix")
    doc: dict[str, Any] = {
        "what": "compiled vs eager step vs mlx-lm (docs/benchmarks/h200/step_ab.py)",
        "mlx": mx.__version__, "device": str(mx.default_device()),
        "device_name": mx.device_info().get("device_name"), "host": platform.node(),
        "seeds": seeds, "tokens": tokens, "prompt": prompt, "parts": {}}
    if "target" in parts:
        targets = os.environ.get("TARGETS", "default shape:qwen2.5-7b").split()
        doc["parts"]["target"] = part_target(targets, seeds, tokens, prompt)
    if "pair" in parts:
        specs = os.environ.get("PAIR", "shape:qwen2.5-1.5b shape:qwen2.5-0.5b").split()
        doc["parts"]["pair"] = part_pair(specs, seeds, tokens, int(os.environ.get("CHAIN", "64")),
                                         prompt)
    if "lookup" in parts:
        doc["parts"]["lookup"] = part_lookup(
            os.environ.get("LOOKUP_PAIR", "default self:bits=4").split(), seeds, tokens,
            os.environ.get("PROMPT_LOOKUP", "code-refactor-pasted"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
