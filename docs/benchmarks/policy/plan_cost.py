"""Host cost of the engine's plan between pipelined target steps, per draft source (issue 28).

While no source drafts, a speculative run's plain target steps are pipelined, and after each
one the engine asks who would draft next (core/decode/speculative.py `drafts_now`:
core.decode.engine.Engine._plan, host work only), and the policies that said k = 0 observe
the step (their cost scale moves with its seconds, as on the GPU). On a host-bound GPU that time is in every
step's path: run 6 (docs/benchmarks/never-slower.md) measured the default and the hybrid at
1.17-1.19 times their own median step a token where they drafted nothing, target-only at
1.02-1.05. This times exactly that plan, per step, on the default model's tokenizer and the
H200's kept calibration of run 5 (so the policies decide as they did there), and the same
with R rows costing R steps (MLX's CPU backend, where nothing pays), over a
copy-rich answer (the prompt's text again, re-tokenized: the lookup offers at most steps).
No MLX work runs: the plan reads host state only.

    python docs/benchmarks/policy/plan_cost.py OUT.json   (~20 s on 2 cores)
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "benchmarks"))
sys.path.insert(0, str(ROOT / "docs" / "benchmarks" / "h200"))  # round_autopsy's row_settings

from rawdata import load_json  # noqa: E402
from round_autopsy import row_settings  # noqa: E402

from core.bench.prompts import load_prompt  # noqa: E402
from core.cost.guard import NULL_GUARD  # noqa: E402
from core.models.chat_template import chat_prompt_ids  # noqa: E402

CURVE = ROOT / "docs/benchmarks/data/h200-2026-12-01-s9/calibration/default-256-interleaved.json.xz"
PROMPTS = ("code-refactor-pasted", "code-bugfix")
ROWS = ("lookup", "default", "cost-aware")
STEPS = 256


def main(out: Path) -> int:
    from core.decode.engine import Engine
    from core.dispatch.curve import VerifyCostCurve
    from core.models import load_pair

    pair = load_pair("default", "self:bits=4")
    engine = Engine.from_pair(pair)
    tok = pair.target.tokenizer
    results = []
    for prices, curve in curves(load_json(CURVE)).items():
        engine.set_cost_curve(VerifyCostCurve.from_dict(curve))
        results += plans(engine, tok, prices)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    doc = {"what": "the engine's plan between plain steps (docs/benchmarks/policy/plan_cost.py)",
           "commit": commit, "machine": platform.machine(), "processor": platform.processor(),
           "python": platform.python_version(), "curve": str(CURVE.relative_to(ROOT)),
           "results": results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc))
    return 0


def curves(h200: dict) -> dict[str, dict]:
    """The H200's prices as calibrated, and the same with R rows costing R single-row steps
    (MLX's CPU backend; nothing pays there, so every plan weighs whether a probe could)."""
    steps = json.loads(json.dumps(h200))
    for mode, per_r in steps["times"].items():
        one = per_r["1"]
        steps["times"][mode] = {r: one * int(r) for r in per_r}
    return {"h200": h200, "rows-cost-steps": steps}


def plans(engine: Any, tok: Any, prices: str) -> list[dict]:
    """Every prompt and row's plan times under the engine's current curve."""
    results = []
    for prompt in PROMPTS:
        text = load_prompt(prompt)
        ids = chat_prompt_ids(tok, [{"role": "user", "content": text}])
        answer = list(tok.encode(text))[:STEPS]
        for row in ROWS:
            s = row_settings(row, tokens=STEPS)
            times = []
            rng = random.Random(0)
            for _rep in range(3):  # the first pass warms Python's caches; all are kept
                engine.reset()
                engine.forget_guards()
                guard = engine._measured_guard(s) or NULL_GUARD
                guard.begin_run()
                engine.drafter(s.draft_source)
                seq = list(ids)
                for i, t in enumerate(answer):
                    seq.append(t)
                    t0 = time.perf_counter()
                    plan = engine._plan(seq, s, STEPS - i, guard)
                    times.append(time.perf_counter() - t0)
                    # What the engine does after each plain step (core/decode/speculative.py):
                    # the policies that said k = 0 observe it, the guard too. The step's
                    # seconds vary as the H200's did (about 4 ms, 10% spread), so each
                    # policy's cost scale moves as it does there.
                    step_s = 0.004 * (1.0 + 0.1 * rng.gauss(0.0, 1.0))
                    for p in plan.declined:
                        p.observe(0, 0, step_s)
                    guard.observe_step(step_s)
            results.append({"prices": prices, "prompt": prompt, "row": row, "steps": len(times),
                            "median_ms": statistics.median(times) * 1e3,
                            "mean_ms": statistics.fmean(times) * 1e3,
                            "last_k": plan.k, "plan_ms": [round(x * 1e3, 4) for x in times]})
            print(f"{prices:16s} {prompt:22s} {row:10s} plan a step: median "
                  f"{results[-1]['median_ms']:.3f} ms, mean {results[-1]['mean_ms']:.3f} ms")
    return results


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
