"""Issue 28, finding 7 on the H200: is the calibration's row plan (core/dispatch/row_plan.py)
as good as timing every row, and what does it cost a first start?

The default now reaches k_max = 32; a calibration times 15 row counts there (1..9, 12, 16, 17,
24, 32, 33 for the default model on CUDA) instead of 33 and interpolates between them. This
measures, in one process on the loaded default pair, after one warm-up of every row 1..33 (so
no timed call compiles):
- ROUNDS (default 3) of each calibration in turn, every row (1..33) and the plan, alternating
  which goes first: each one's wall seconds and medians (repeats 3, context 128, as curve_for);
- per R in 1..33, the plan curve's t_verify against the every-row curve's measured median of
  the same round, and the spread of the every-row medians across rounds (the noise floor);
- the cost-aware choice: for constant per-position acceptance 0.3..0.97, with the lookup's
  free drafts and with the model's measured draft step, the best k (core.cost.prediction.predict,
  k 0..32) priced on each curve, and what the plan's choice costs priced on the every-row curve.

Usage (on the device, PYTHONPATH and SPECDEC_TUI_CACHE set by pack.sh's calls):
    python3 docs/benchmarks/h200/calib_plan.py OUT_DIR
Writes OUT_DIR/calib-plan.json and prints a summary. ROUNDS, TARGET, DRAFT from the environment.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path


def main(out: Path) -> int:
    import mlx.core as mx

    from core.cost.prediction import RoundCost, predict
    from core.decode.engine import Engine
    from core.dispatch import calibrate, current_backend
    from core.dispatch.curve_cache import calibration_rows
    from core.models import load_pair
    from core.runtime.warmup import warm_up
    from core.settings import first_run_settings

    rounds = int(os.environ.get("ROUNDS", "3"))
    pair = load_pair(os.environ.get("TARGET", "default"), os.environ.get("DRAFT", "self:bits=4"))
    engine = Engine.from_pair(pair)
    target, draft = engine.target_model, engine.draft_model
    settings = first_run_settings()
    plan = calibration_rows(settings, target)
    every = list(range(1, settings.k_max + 2))
    b = current_backend()
    print(f"mlx {mx.__version__} on {b.backend} {b.device_name}; plan {plan}", flush=True)
    t0 = time.perf_counter()
    record = warm_up(target, draft, vocab=engine.vocab_size, rows=every, prompt_tokens=128,
                     label=pair.target.name)  # fmt: skip
    print(f"warm-up of rows 1..{every[-1]}: {time.perf_counter() - t0:.1f} s, "
          f"compiled {record.compiled}", flush=True)  # fmt: skip
    runs: list[dict] = []
    curves: dict[str, list] = {"every": [], "plan": []}
    for i in range(rounds):
        order = (("every", every), ("plan", plan)) if i % 2 == 0 else (("plan", plan), ("every", every))
        for name, rows in order:
            t = time.perf_counter()
            curve = calibrate(target, draft, rows=rows, repeats=3, context=128)
            wall = time.perf_counter() - t
            curves[name].append(curve)
            runs.append({"round": i, "name": name, "rows": rows, "wall_s": wall,
                         "times": {str(r): v for r, v in curve.times["auto"].items()},
                         "draft_step_s": curve.draft_step_s})  # fmt: skip
            print(f"round {i} {name}: {len(rows)} row counts in {wall:.2f} s", flush=True)
    per_r = []
    for r in every:
        measured = [c.times["auto"][r] for c in curves["every"]]
        priced = [c.t_verify(r) for c in curves["plan"]]
        errors = [p / m - 1 for p, m in zip(priced, measured, strict=True)]
        per_r.append({"rows": r, "in_plan": r in plan, "every_ms": [m * 1e3 for m in measured],
                      "plan_ms": [p * 1e3 for p in priced],
                      "every_spread": max(measured) / min(measured) - 1,
                      "plan_error": errors, "plan_error_abs_max": max(abs(e) for e in errors)})  # fmt: skip
    decisions = []
    for e_curve, p_curve in zip(curves["every"], curves["plan"], strict=True):
        for source, price in (("lookup", 0.0), ("model", e_curve.draft_step_s or 0.0)):
            for a in (0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.97):
                accept = [a] * 32
                on_every = predict(RoundCost(e_curve.t_verify, price), accept, k_max=32)
                p_price = price if source == "lookup" else (p_curve.draft_step_s or 0.0)
                on_plan = predict(RoundCost(p_curve.t_verify, p_price), accept, k_max=32)
                k_plan = on_plan.best.k
                chosen = on_every.at(k_plan)
                decisions.append({"source": source, "accept": a, "k_every": on_every.best.k,
                                  "k_plan": k_plan,
                                  "plan_choice_tok_s_vs_best": chosen.tok_s
                                  / on_every.best.tok_s})  # fmt: skip
    walls = {n: [r["wall_s"] for r in runs if r["name"] == n] for n in ("every", "plan")}
    summary = {
        "plan": plan,
        "wall_s_median": {n: statistics.median(v) for n, v in walls.items()},
        "plan_error_abs_max": max(x["plan_error_abs_max"] for x in per_r if not x["in_plan"]),
        "every_spread_max": max(x["every_spread"] for x in per_r),
        "worst_decision": min(d["plan_choice_tok_s_vs_best"] for d in decisions),
    }
    doc = {"backend": b.backend, "device": b.device_name, "mlx": mx.__version__,
           "models": {"target": pair.target.spec, "draft": pair.draft.spec if pair.draft else None},
           "warmup": record.to_dict(), "runs": runs, "per_rows": per_r, "decisions": decisions,
           "summary": summary}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "calib-plan.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/out")))
