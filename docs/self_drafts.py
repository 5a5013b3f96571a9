"""Measure how often each self-draft of the default model agrees with it (greedy, teacher-forced).

Run from the repository root:  python docs/self_drafts.py [--tokens 64] [--json out.json]
Writes a Markdown table to stdout; docs/self-drafts.md quotes its output.

Agreement: the target answers each prompt greedily (up to --tokens tokens, stopping at EOS);
then each draft reads prompt + answer in one forward pass, and we count the positions where
the draft's argmax equals the target's token. Cost: seconds per single-token decode step
(median of --steps) and of a verify forward over r rows, measured on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlx.core as mx  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache  # noqa: E402

from core import models as M  # noqa: E402

PROMPTS = {
    "code": "Write a Python function that checks whether a number is prime.",
    "story": "Tell me a short story about a dragon who learns to bake bread.",
    "fact": "Why is the sky blue?",
}
DRAFTS = [
    "self:layers=15",
    "self:layers=22",
    "self:bits=2,group=32",
    "self:bits=3,group=32",
    "self:bits=3,group=64",
    "self:bits=4,group=32",
    "self:bits=4,group=64",
    "self:bits=3,group=32 +head",  # variant: embeddings/tied head kept at the target's Q8_0
    "self:bits=2,group=32 +head",
]


def greedy(model, ids: list[int], n: int, eos: set[int]) -> list[int]:
    cache = make_prompt_cache(model)
    logits = model(mx.array(ids)[None], cache=cache)
    out: list[int] = []
    for _ in range(n):
        tok = int(mx.argmax(logits[0, -1]).item())
        out.append(tok)
        if tok in eos:
            break
        logits = model(mx.array([[tok]]), cache=cache)
    return out


def argmaxes(model, ids: list[int]) -> list[int]:
    return mx.argmax(model(mx.array(ids)[None])[0], axis=-1).tolist()


def step_seconds(model, ids: list[int], rows: int, steps: int) -> float:
    """Median seconds of one forward over `rows` new tokens after a prefilled prompt."""
    cache = make_prompt_cache(model)
    mx.eval(model(mx.array(ids)[None], cache=cache))
    times = []
    for _ in range(steps):
        x = mx.array([ids[-rows:]])
        t = time.perf_counter()
        mx.eval(model(x, cache=cache))
        times.append(time.perf_counter() - t)
        trim_prompt_cache(cache, rows)
    return statistics.median(times)


def param_bytes(model) -> int:
    """Bytes a decode step streams on a GPU: packed weights as stored, floats at 16 bits."""
    return sum(
        v.size * 2 if mx.issubdtype(v.dtype, mx.floating) else v.nbytes
        for _, v in tree_flatten(model.parameters())
    )


def expected_speedup(alpha: float, c: float, verify: dict[int, float], k_max: int = 8) -> tuple[float, int]:
    """max over k of (1 - a^(k+1)) / ((1 - a) (k c + V(k+1))) (Leviathan et al., 2023)."""
    best = (0.0, 0)
    for k in range(1, k_max + 1):
        tokens = (1 - alpha ** (k + 1)) / (1 - alpha) if alpha < 1 else k + 1
        s = tokens / (k * c + verify[k + 1])
        best = max(best, (s, k))
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    target = M.load_model("default")
    eos = set(target.tokenizer.eos_token_ids)
    cases = {}
    for name, prompt in PROMPTS.items():
        ids = M.chat_prompt_ids(target.tokenizer, [{"role": "user", "content": prompt}])
        answer = greedy(target.model, ids, args.tokens, eos)
        cases[name] = (ids, answer)
        tf = argmaxes(target.model, ids + answer[:-1])[len(ids) - 1 :]
        same = sum(a == b for a, b in zip(tf, answer, strict=True)) / len(answer)
        print(f"{name}: {len(answer)} target tokens (teacher-forced self-check {same:.0%})", file=sys.stderr)

    ids0 = cases["fact"][0]
    t_step = step_seconds(target.model, ids0, 1, args.steps)
    verify = {r: step_seconds(target.model, ids0, r, args.steps) / t_step for r in range(2, 10)}
    t_bytes = param_bytes(target.model)
    print(f"target step {t_step * 1e3:.1f} ms; verify V(r) = {verify}", file=sys.stderr)

    rows = []
    for spec in DRAFTS:
        keep = spec.endswith("+head")
        clean = spec.replace(" +head", "")
        if keep:
            _, o = M.parse_options(clean, "self:")
            draft = M.requantized_draft(target, int(o["bits"]), int(o["group"]), keep_head=True)
        else:
            draft = M.derive_self_draft(target, clean)
        per = {}
        for name, (ids, answer) in cases.items():
            pred = argmaxes(draft.model, ids + answer[:-1])[len(ids) - 1 :]
            per[name] = sum(a == b for a, b in zip(pred, answer, strict=True)) / len(answer)
        alpha = statistics.mean(per.values())
        c_cpu = step_seconds(draft.model, ids0, 1, args.steps) / t_step
        c_mem = param_bytes(draft.model) / t_bytes if not clean.startswith("self:layers") else None
        if c_mem is None:
            n = draft.num_layers
            shared = param_bytes(target.model) - sum(
                param_bytes(layer) for layer in target.model.layers[n:]
            )
            c_mem = shared / t_bytes
        s_cpu, k_cpu = expected_speedup(alpha, c_cpu, verify)
        s_mem, k_mem = expected_speedup(alpha, c_mem, dict.fromkeys(range(2, 10), 1.0))
        rows.append(
            dict(spec=spec, **per, mean=alpha, c_cpu=c_cpu, c_mem=c_mem,
                 s_cpu=s_cpu, k_cpu=k_cpu, s_mem=s_mem, k_mem=k_mem)
        )
        print(f"{spec}: {per} mean {alpha:.3f}", file=sys.stderr)
        del draft

    print("| draft | code | story | fact | mean α | c (CPU) | S (CPU), k | c (bytes) | S (bandwidth-bound), k |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| `{r['spec']}` | {r['code']:.0%} | {r['story']:.0%} | {r['fact']:.0%} | "
            f"{r['mean']:.1%} | {r['c_cpu']:.2f} | {r['s_cpu']:.2f}, k={r['k_cpu']} | "
            f"{r['c_mem']:.2f} | {r['s_mem']:.2f}, k={r['k_mem']} |"
        )
    print(f"\ntarget step {t_step * 1e3:.0f} ms; V(r) on this CPU: "
          + ", ".join(f"V({r})={v:.2f}" for r, v in verify.items()))
    print("tokens per prompt: " + ", ".join(f"{k} {len(v[1])}" for k, v in cases.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "verify": verify, "t_step": t_step}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
