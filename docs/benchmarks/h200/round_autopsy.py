"""Where a request's time goes, event by event, untraced: issue 28, finding 7.

Run 5's lookup rounds at T = 0.7 cost tens of milliseconds by the guard's rates
(docs/benchmarks/never-slower.md), while an isolated round of the same rows costs about 13 ms
on the same GPU (rare_round.py, beside this). This runs the bench's own requests (engine
reset, real lookup, the cost-aware policy and its guard, the kept calibration) untraced, and
clocks every piece the decode loop calls without adding a sync: each event's gap (the
consumer's clock from the previous event), each round's own call (it ends with its host
sync), the engine's `_plan`, `_ensure_curve`, the drafters' calls, and the guard's verdicts.
Rows interleave per seed as the bench's do (rotated), after one warm-up request each.

    python3 docs/benchmarks/h200/round_autopsy.py OUT.json

Environment: TARGET ("default"), PROMPT ("code-rename"), TEMPERATURE ("0.7"; not TEMP,
which names the temporary folder MLX compiles in: TEMP=0.7 fails there), SEEDS ("3"),
TOKENS ("256"), ROWS ("target-only lookup default").
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def row_settings(row: str, target: str = "default", temp: float = 0.7, tokens: int = 256,
                 seed: int = 0) -> Any:
    """A never-slower row's settings ("default": the app's first run, else a profile) with
    the bench's flags as docs/benchmarks/h200/never_slower.py passes them: exactly `tokens`,
    untraced, no repetition penalty. Shared by the probes beside this and policy/plan_cost.py.
    A row may carry overrides as the bench's --profile does (`target-only:step=compiled`).
    """
    from core.flags import parse_profile_spec
    from core.profile import load_profile
    from core.settings import first_run_settings

    name, overrides = parse_profile_spec(row)
    base = first_run_settings() if name == "default" else load_profile(name).settings
    return dataclasses.replace(base, target=target, temperature=temp, max_tokens=tokens,
                               ignore_eos=True, traced=False, seed=seed,
                               repetition_penalty=1.0, **overrides)


class Clocks:
    """Host seconds per named call, and the calls in order for the current request."""

    def __init__(self) -> None:
        self.calls: dict[str, list[float]] = defaultdict(list)

    def wrap(self, obj: Any, name: str, label: str) -> None:
        fn = getattr(obj, name)

        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.calls[label].append(time.perf_counter() - t)

        setattr(obj, name, timed)


def main(out: Path) -> int:
    import mlx.core as mx

    from core.bench.prompts import load_prompt
    from core.decode.engine import Engine
    from core.events import RunSummary
    from core.models import load_pair
    from core.models.chat_template import chat_prompt_ids
    from core.runtime.calibration import curve_for

    t_start = time.perf_counter()
    target = os.environ.get("TARGET", "default")
    temp = float(os.environ.get("TEMPERATURE", "0.7"))
    seeds = int(os.environ.get("SEEDS", "3"))
    tokens = int(os.environ.get("TOKENS", "256"))
    rows = os.environ.get("ROWS", "target-only lookup default").split()
    pair = load_pair(target, None if rows == ["target-only", "lookup"] else "self:bits=4")
    engine = Engine.from_pair(pair)
    prompt = os.environ.get("PROMPT", "code-rename")
    ids = chat_prompt_ids(pair.target.tokenizer, [{"role": "user", "content": load_prompt(prompt)}])
    spec = [r for r in rows if r != "target-only"]
    if spec:
        curve_for(engine, row_settings(spec[-1], target, temp, tokens, 0), context=len(ids))
    clocks = Clocks()
    for name in ("_plan", "_ensure_curve", "_speculative_round", "drafter"):
        clocks.wrap(engine, name, name)

    def request(row: str, seed: int) -> dict[str, Any]:
        s = row_settings(row, target, temp, tokens, seed)
        engine.reset()
        clocks.calls.clear()
        events: list[dict[str, Any]] = []
        wrapped: set[int] = set()
        t0 = last = time.perf_counter()
        summary = None
        for item in engine.generate(list(ids), s):
            now = time.perf_counter()
            for d in engine.caches.drafters.values():  # built lazily per request: wrap once each
                if id(d) not in wrapped:
                    wrapped.add(id(d))
                    for m in ("catch_up", "propose", "offers"):
                        if hasattr(d, m):
                            clocks.wrap(d, m, f"{d.name}.{m}")
            if isinstance(item, RunSummary):
                summary = item
                continue
            events.append({"gap_ms": (now - last) * 1e3, "source": item.source or "none",
                           "rows": item.rows, "proposed": item.proposed,
                           "accepted": item.accepted, "tokens": len(item.tokens),
                           "total_ms": item.timings.total * 1e3})
            last = now
        e2e = time.perf_counter() - t0
        calls = {k: [round(x * 1e3, 3) for x in v] for k, v in clocks.calls.items()}
        guard = None if summary is None else summary.per_source  # the guard's rates, verdicts
        return {"row": row, "seed": seed, "e2e_s": e2e, "events": events, "calls_ms": calls,
                "guard": guard, "tokens": sum(e["tokens"] for e in events)}

    for row in rows:  # one warm-up request each, as the bench's --warmup 1
        request(row, 99)
    reqs = []
    for seed in range(seeds):
        order = rows[seed % len(rows):] + rows[: seed % len(rows)]
        for row in order:
            reqs.append(request(row, seed))
    doc = {
        "what": "each request's events and calls, untraced (docs/benchmarks/h200/round_autopsy.py)",
        "target": target, "prompt": prompt, "temperature": temp, "tokens": tokens,
        "mlx": mx.__version__, "device": str(mx.default_device()), "host": platform.node(),
        "curve": None if engine.cost_curve is None else {
            "modes": sorted(getattr(engine.cost_curve, "times", {}) or {})},
        "wall_s": time.perf_counter() - t_start, "requests": reqs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str))
    for r in reqs:
        ev = r["events"]
        rounds = [e for e in ev if e["proposed"]]
        steps = [e for e in ev if not e["proposed"]]
        after = [ev[i + 1]["gap_ms"] for i, e in enumerate(ev[:-1]) if e["proposed"]]
        line = (f"{r['row']:12s} seed {r['seed']} e2e {r['e2e_s']:.3f} s: {len(steps)} steps "
                f"(median gap {statistics.median([e['gap_ms'] for e in steps] or [0]):.2f} ms)")
        if rounds:
            line += (f", {len(rounds)} rounds: gap {[round(e['gap_ms'], 1) for e in rounds]}"
                     f" own {[round(x, 1) for x in r['calls_ms'].get('_speculative_round', [])]}"
                     f" rows {[e['rows'] for e in rounds]} step after {[round(x, 1) for x in after]}")
        print(line)
        for k, v in sorted(r["calls_ms"].items()):
            if k != "_speculative_round":
                print(f"    {k}: n={len(v)} total {sum(v):.1f} ms max {max(v):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
