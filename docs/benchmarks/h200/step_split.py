"""Where a plain target step's time goes, per step, target-only against the default: run 6,
finding 3 (docs/benchmarks/never-slower.md).

Run 6 measured the default and the hybrid at 1.17-1.19 times their own median step a token
on benches where they drafted nothing, target-only at 1.02-1.05. The pipelined loop
(core/decode/single.py) does per step: build the next step's graph (`PipelinedSteps.step`),
queue it (`mx.async_eval`), wait for the current token (its `.item()`), hand the event to the
consumer, and, in a speculative run, plan who would draft next (`Engine._plan`). This clocks
each of those host pieces per step, with no sync added: the build and the queueing by
wrapping them, the plan likewise, the consumer by its own clock between the event and its
return; what is left of the step's gap is the wait for the device (and the loop's own work).
Rows interleave per seed (rotated) after one warm-up request each, as the bench's do.

    python3 docs/benchmarks/h200/step_split.py OUT.json

Per request it also counts the loop's stretches of plain steps, the restarts among them (a
stretch begun right after a plain step: the one before ended for a round that then did not
draft) and the plans that chose a source, with run 6's statistic, E2E over tokens x the
median step the bench keeps (`excess`).

Environment: TARGET ("default"), PROMPT ("code-bugfix"), TEMPERATURE ("0.7"; not TEMP,
which names the temporary folder MLX compiles in: TEMP=0.7 fails there), SEEDS ("3"),
TOKENS ("256"), ROWS ("target-only default").
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
sys.path.insert(0, str(Path(__file__).resolve().parent))  # round_autopsy's row_settings

PIECES = ("build", "queue", "plan", "consumer")


NS_DIGITS = 6  # a step's pieces are kept in ms to 1 ns, time.perf_counter's resolution


def main(out: Path) -> int:
    import mlx.core as mx
    from round_autopsy import row_settings

    import core.decode.single as single
    from core.bench.prompts import load_prompt
    from core.bench.requests import Request
    from core.decode.engine import Engine
    from core.events import RunSummary
    from core.models import load_pair
    from core.models.chat_template import chat_prompt_ids
    from core.runtime.calibration import curve_for

    target = os.environ.get("TARGET", "default")
    temp = float(os.environ.get("TEMPERATURE", "0.7"))
    seeds = int(os.environ.get("SEEDS", "3"))
    tokens = int(os.environ.get("TOKENS", "256"))
    rows = os.environ.get("ROWS", "target-only default").split()
    prompt = os.environ.get("PROMPT", "code-bugfix")
    pair = load_pair(target, "self:bits=4")
    engine = Engine.from_pair(pair)
    ids = chat_prompt_ids(pair.target.tokenizer, [{"role": "user", "content": load_prompt(prompt)}])

    def settings(row: str, seed: int) -> Any:
        return row_settings(row, target, temp, tokens, seed)

    spec = [r for r in rows if r != "target-only"]
    if spec:
        curve_for(engine, settings(spec[0], 0), context=len(ids))

    clock: dict[str, float] = dict.fromkeys(PIECES, 0.0)  # this step's host seconds so far

    def timed(piece: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                clock[piece] += time.perf_counter() - t

        return wrapper

    single.PipelinedSteps.step = timed("build", single.PipelinedSteps.step)  # type: ignore[method-assign]
    single.mx = _Queued(mx, timed("queue", mx.async_eval))  # the loop's module only
    engine._plan = timed("plan", engine._plan)  # type: ignore[method-assign]
    # This request's loop: its stretches of plain steps, those that began right after a plain
    # step (a restart: the stretch before ended for a round that then did not draft), and
    # the plans that chose a source.
    counts = {"stretches": 0, "restarts": 0, "drafting_plans": 0}
    last_plain = [False]  # the event before was a plain step
    stretch_of, plan_of = engine._single_model_rounds, engine._plan

    def stretch(*a: Any, **k: Any) -> Any:
        counts["stretches"] += 1
        counts["restarts"] += last_plain[0]
        yield from stretch_of(*a, **k)

    def planned(*a: Any, **k: Any) -> Any:
        p = plan_of(*a, **k)
        counts["drafting_plans"] += p.drafter is not None
        return p

    engine._single_model_rounds = stretch  # type: ignore[method-assign]
    engine._plan = planned  # type: ignore[method-assign]

    def request(row: str, seed: int) -> dict[str, Any]:
        """One request as the bench runs it (engine reset, its consumer `Request.add`); per
        plain step, the host pieces since the event before (the consumer of that event, the
        plan, this step's build and queueing) and what is left of the gap: the wait."""
        s = settings(row, seed)
        engine.reset()
        req = Request()
        steps: list[dict[str, float]] = []
        for k in clock:
            clock[k] = 0.0
        for k in counts:
            counts[k] = 0
        rounds = tokens = 0
        last_plain[0] = False
        t0 = last = time.perf_counter()
        for item in engine.generate(list(ids), s):
            now = time.perf_counter()
            if isinstance(item, RunSummary):
                break
            rounds += item.proposed > 0
            tokens += len(item.tokens)
            last_plain[0] = not item.proposed
            if not item.proposed and item.rows == 1:
                rec = {k: v * 1e3 for k, v in clock.items()}
                rec["gap"] = (now - last) * 1e3
                rec["timer"] = item.timings.total * 1e3  # what the bench's step_ms takes
                rec["rest"] = rec["gap"] - sum(rec[k] for k in PIECES)
                # ms to the clock's whole nanoseconds: the digits past them are the float
                # subtraction's, and they were half of each file's bytes (the GPU set-up must
                # fit three calls with the data: tests/tools/device/test_pack_fit.py)
                steps.append({k: round(v, NS_DIGITS) for k, v in rec.items()})
            for k in clock:
                clock[k] = 0.0
            last = now
            t_c = time.perf_counter()
            req.add(item, False)  # the bench's consumer: in the next event's gap
            clock["consumer"] += time.perf_counter() - t_c
        e2e = time.perf_counter() - t0
        # Run 6's finding 3 statistic: E2E over tokens x the median step the bench keeps.
        step = statistics.median([x["timer"] for x in steps]) if steps else None
        return {"row": row, "seed": seed, "e2e_s": e2e, "steps": steps, "rounds": rounds,
                "tokens": tokens, **counts,
                "excess": e2e * 1e3 / (tokens * step) if step else None}

    for row in rows:
        request(row, 99)  # a warm-up request each
    reqs = []
    for seed in range(seeds):
        for row in rows[seed % len(rows):] + rows[: seed % len(rows)]:
            reqs.append(request(row, seed))
    summary = {}
    for row in rows:
        mine = [x for r in reqs if r["row"] == row for x in r["steps"][1:]]
        summary[row] = {k: statistics.median([x[k] for x in mine]) for k in (*PIECES, "rest", "gap")}
        summary[row]["mean_gap"] = statistics.fmean([x["gap"] for x in mine])
        theirs = [r for r in reqs if r["row"] == row]
        for k in ("rounds", *counts):
            summary[row][k] = statistics.fmean([r[k] for r in theirs])
        summary[row]["excess"] = statistics.median([r["excess"] for r in theirs if r["excess"]])
        print(row, {k: round(v, 3) for k, v in summary[row].items()})
    doc = {"what": "a plain step's host pieces (docs/benchmarks/h200/step_split.py)",
           "target": target, "prompt": prompt, "temperature": temp, "tokens": tokens,
           "mlx": mx.__version__, "device": str(mx.default_device()), "host": platform.node(),
           "summary": summary, "requests": reqs}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc))
    return 0


class _Queued:
    """mlx.core as core/decode/single.py sees it, with its async_eval clocked."""

    def __init__(self, mx: Any, async_eval: Any) -> None:
        self._mx, self.async_eval = mx, async_eval

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mx, name)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
