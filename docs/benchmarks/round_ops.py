"""What a round costs beyond the models' forwards, counted (never timed): issue 28.

On a host-bound GPU what a round pays besides its forwards is the host's time to issue its
MLX calls and the idle device each host sync leaves; a CPU clock cannot show either, so this
counts them. Every function of `mlx.core` (and `mx.random.split`) is wrapped; a call is "in
the models" when an mlx-lm or mlx.nn frame is on its stack, else it is the round's own and
is counted by the function of ours that made it. `eval` calls are the round's host syncs
(a plain step's one read, its token's `.item()`, comes with the next step already queued).
Runs the real engine on the tiny random pair (`shape:tiny` / `shape:tiny-draft`) on a flat
fake curve, so the rounds are the code's, not the CPU's choice.

    python docs/benchmarks/round_ops.py OUT.json     (from the repo root; ~30 s on 2 cores)

Cases: plain target steps (greedy, sampled), lookup rounds (greedy, copying a repeated
prompt), the model at k = 3 (greedy, sampled), and the model's first round after 60
target-only rounds (its catch-up of 60 tokens).
"""

from __future__ import annotations

import json
import platform
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL_FILES = ("mlx_lm", "/mlx/nn/")


def install_counter() -> Counter[tuple[str, str]]:
    """Wrap mlx.core's functions; return the (function, caller) counter they add to."""
    import mlx.core as mx

    seen: Counter[tuple[str, str]] = Counter()

    def wrap(name: str, fn: Any) -> Any:
        def counted(*a: Any, **k: Any) -> Any:
            f, where = sys._getframe(1), "?"
            while f is not None:
                path = f.f_code.co_filename
                if any(m in path for m in MODEL_FILES):
                    where = "model"
                    break
                if "/core/" in path:
                    where = path.split("/core/")[-1] + ":" + f.f_code.co_name
                    break
                f = f.f_back
            seen[(name, where)] += 1
            return fn(*a, **k)

        return counted

    for name in dir(mx):
        obj = getattr(mx, name)
        if name.startswith("_") or isinstance(obj, type) or not callable(obj):
            continue
        try:
            setattr(mx, name, wrap(name, obj))
        except (AttributeError, TypeError):
            continue
    mx.random.split = wrap("random.split", mx.random.split)
    return seen


def case(engine: Any, seen: Counter[tuple[str, str]], name: str, prompt: list[int], s: Any,
         source: Any = None, keep: Any = None) -> dict[str, Any]:
    """Run `s` (after one unrecorded run), and average the counts over the rounds `keep`
    selects (a RoundEvent, its index, whether one was kept already -> bool); `source(i)`:
    the settings of round i, where they change within the run."""
    list(engine.generate(prompt, s))
    engine.reset()
    rounds: list[Counter[tuple[str, str]]] = []
    i = 0
    gen = engine.generate(prompt, s, settings_source=source and (lambda: source(i)))
    while True:
        seen.clear()
        item = next(gen)
        if not hasattr(item, "index"):
            break
        if keep(item, i, bool(rounds)):
            rounds.append(Counter(seen))
        i += 1
    engine.reset()
    n = len(rounds)
    total: Counter[tuple[str, str]] = Counter()
    for r in rounds:
        total.update(r)
    own = {f"{op} @ {where}": v / n for (op, where), v in total.items() if where != "model"}
    return {
        "case": name,
        "rounds": n,
        "own_calls": sum(v for (op, w), v in total.items() if w != "model") / n if n else None,
        "syncs": sum(v for (op, w), v in total.items() if op == "eval") / n if n else None,
        "model_calls": sum(v for (op, w), v in total.items() if w == "model") / n if n else None,
        "by_call": dict(sorted(own.items(), key=lambda kv: -kv[1])),
    }


def main(out: Path) -> int:
    seen = install_counter()
    from core.decode.engine import Engine
    from core.dispatch import VerifyCostCurve
    from core.models import load_pair
    from core.settings import Settings
    from core.version import tool_version

    engine = Engine.from_pair(load_pair("shape:tiny", "shape:tiny-draft"))
    step = 1e-3
    engine.set_cost_curve(VerifyCostCurve("cpu", "", 16, {"auto": {1: step, 9: 1.2 * step}},
                                          draft_step_s=0.3 * step))
    # The target's own greedy text, then a repeat of it: the lookup has something to copy
    # that the target agrees with, and new text after it.
    lead = [5, 6, 7, 8, 9, 10]
    s0 = Settings(mode="target-only", temperature=0.0, max_tokens=60, ignore_eos=True)
    text = lead + list(list(engine.generate(lead, s0))[-1].token_ids)
    engine.reset()
    prompt = text[:40] + text[6:40]
    base = Settings(mode="speculative", policy="fixed", k=3, max_tokens=80, ignore_eos=True,
                    traced=False)
    greedy, sampled = base.replace(temperature=0.0), base.replace(temperature=0.7)
    plain = lambda ev, i, _: not ev.source and i > 0  # noqa: E731
    drafted = lambda ev, i, _: bool(ev.source) and i > 0  # noqa: E731 - after its first catch-up

    def stretch(i: int) -> Any:  # the model for 2 rounds, target-only for 60, then the model
        return greedy.replace(mode="target-only") if 2 <= i < 62 else greedy

    first_after = lambda ev, i, kept: i >= 62 and bool(ev.source) and not kept  # noqa: E731
    cases = [
        case(engine, seen, "plain step, greedy", prompt,
             greedy.replace(mode="target-only"), keep=plain),
        case(engine, seen, "plain step, T = 0.7", prompt,
             sampled.replace(mode="target-only"), keep=plain),
        case(engine, seen, "lookup round, greedy", prompt,
             greedy.replace(draft_source="lookup", k=8), keep=drafted),
        case(engine, seen, "model round k = 3, greedy", prompt, greedy, keep=drafted),
        case(engine, seen, "model round k = 3, T = 0.7", prompt, sampled, keep=drafted),
        case(engine, seen, "model round after 60 target steps, greedy", prompt, greedy,
             source=stretch, keep=first_after),
    ]
    doc = {
        "schema": 1,
        "what": "MLX calls per round outside the models' forwards, counted (round_ops.py)",
        "environment": {"python": platform.python_version(), "machine": platform.machine(),
                        "specdec_tui": tool_version(), "pair": "shape:tiny / shape:tiny-draft"},
        "cases": cases,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    for c in cases:
        print(f"{c['case']}: {c['own_calls']} own MLX calls a round, {c['syncs']} syncs, "
              f"{c['model_calls']} in the models ({c['rounds']} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "round-ops.json")))
