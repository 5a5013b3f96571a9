"""What a drafting round costs after a stretch of plain target steps: issue 28, finding 7.

Run 5 (docs/benchmarks/never-slower.md) measured lookup rounds that come rarely (after many
plain target steps) at tens of milliseconds, and rounds that come back to back at 10-26 ms,
while the calibration priced a 33-row verification at 15 ms. This probe isolates that: the
real engine's plain steps (core/decode/single.py) for a stretch of S tokens, then one real
speculative round (core/decode/speculative.py) of R rows whose drafts come from a drafter
that costs nothing (the last R - 1 tokens again, as a lookup's copy would be), then the first
plain step after it. Trials are shuffled over (T, R, S), the context is cut back after each,
so every trial starts from the same cache length (GROW=1: it grows, as in a request, and is cut
back every 600 tokens). A traced pass (each phase synced) says
which phase the extra time is in.

    python3 docs/benchmarks/h200/rare_round.py OUT.json      (TARGET=shape:tiny: a CPU smoke)

Environment: TARGET (default "default"), PROMPT (default code-rename), REPS (8), STRETCHES
("0 2 16 64"), ROWS ("3 12 25 33"), TEMPS ("0.0 0.7"). MLX's own settings (MLX_USE_CUDA_GRAPHS,
MLX_MAX_OPS_PER_BUFFER, ...) are read once per process: the caller runs one process each.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import mlx.core as mx  # noqa: E402

from core.drafting.base import DraftRequest, Offer, Proposal  # noqa: E402


class EchoDrafter:
    """Proposes the last k committed tokens again: a copy's shape at no drafting cost."""

    name = "echo"
    copies = True

    def __init__(self) -> None:
        self.seen: list[int] = []

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        return [Offer(self.name)]

    def catch_up(self, seq: Sequence[int], chunk: int) -> int:
        todo = list(seq[len(self.seen) :])
        self.seen.extend(todo)
        return len(todo)

    def propose(self, request: DraftRequest) -> Proposal:
        ids = list(request.seq[-request.k :])
        return Proposal(mx.array(ids, dtype=mx.uint32), None, self.name, origin="copied")

    def learn(self, proposed: Sequence[int], accepted: int) -> None:
        pass

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        n = 0
        while n < min(len(self.seen), len(committed)) and self.seen[n] == committed[n]:
            n += 1
        del self.seen[n:]

    def price(self, curve: Any) -> Any:
        return lambda k: 0.0

    def state(self) -> dict[str, Any]:
        return {}


def _ints(name: str, default: str) -> list[int]:
    return [int(x) for x in os.environ.get(name, default).split()]


def main(out: Path) -> int:
    from core.bench.prompts import load_prompt
    from core.decode.engine import Engine
    from core.models import load_pair
    from core.models.chat_template import chat_prompt_ids
    from core.settings import Settings

    t_start = time.perf_counter()
    target = os.environ.get("TARGET", "default")
    pair = load_pair(target, None)
    engine = Engine.from_pair(pair)
    text = load_prompt(os.environ.get("PROMPT", "code-rename"))
    base = chat_prompt_ids(pair.target.tokenizer, [{"role": "user", "content": text}])
    reps = int(os.environ.get("REPS", "8"))
    stretches = _ints("STRETCHES", "0 2 16 64")
    rows = _ints("ROWS", "3 12 25 33")
    temps = [float(x) for x in os.environ.get("TEMPS", "0.0 0.7").split()]
    grow = os.environ.get("GROW", "0") == "1"  # 1: the context grows trial to trial (to 600 more)
    drafter = EchoDrafter()
    key = mx.random.key(0)

    def settings(temp: float, traced: bool) -> Settings:
        return Settings(target=target, mode="speculative", draft_source="lookup",
                        temperature=temp, traced=traced, max_tokens=10_000)

    # A warm start: the prompt, then 96 answer tokens the model writes itself, so every trial's
    # context is a real one (its answer so far) of the same length.
    seq = list(base)
    s0 = settings(0.0, False)
    engine._prefill(seq, s0, False)
    for _ev in engine._single_model_rounds(seq, s0, "target-only", key, 0, 96,
                                           lambda: s0, threading.Event()):
        pass
    engine._settle(seq)
    start_len = len(seq)

    handed: list[Any] = [None]  # the queued step a stretch hands to the round after it

    def plain_steps(s: Settings, n: int) -> list[float]:
        """n pipelined target steps (the engine's own loop), each step's seconds; the step
        queued after the last is handed on (`handed`), as to a round that follows."""
        left = [n]

        def stop_after(row0: Any) -> bool:
            left[0] -= 1
            if left[0] > 0:
                return False
            handed[0] = row0
            return True

        return [ev.timings.total for ev in engine._single_model_rounds(
            seq, s, "target-only", key, len(seq), 10_000, lambda: s, threading.Event(), stop_after)]

    def trial(temp: float, r: int, stretch: int, traced: bool) -> dict[str, Any]:
        s = settings(temp, traced)
        handed[0] = None
        steps = plain_steps(s, stretch) if stretch else []
        drafter.catch_up(seq, s.prefill_chunk)
        t0 = time.perf_counter()
        row0 = handed[0]  # after a stretch: its queued step is the round's first row
        ev = engine._speculative_round(seq, s, r - 1, key, len(seq), drafter, row0)
        round_s = time.perf_counter() - t0
        after = plain_steps(s, 2)
        row = {
            "T": temp, "R": r, "stretch": stretch, "traced": traced, "round_s": round_s,
            "round_total_s": ev.timings.total,
            "rows": ev.rows + (row0 is not None),  # rows verified: the handed step's too
            "accepted": ev.accepted,
            "phases": ev.timings.as_ms() if traced else None,
            "steps_s": steps, "after_s": after, "context": len(seq),
        }
        engine._settle(seq)  # every cache to seq[:-1]: the next stretch has a token to feed
        if not grow or len(seq) > start_len + 600:
            del seq[start_len:]
            engine._settle(seq)
            engine.caches.rewind(seq, max(start_len - 40, 0))
        return row

    # Warm-up: every (T, R) round twice, back to back and after a stretch.
    for temp in temps:
        for r in rows:
            trial(temp, r, 0, False)
            trial(temp, r, 4, False)
    warm_s = time.perf_counter() - t_start

    plan = [(t, r, st, False) for t in temps for r in rows for st in stretches] * reps
    plan += [(t, r, st, True) for t in temps for r in (rows[-1],) for st in (0, stretches[-1])] * 3
    random.Random(0).shuffle(plan)
    trials = [trial(*p) for p in plan]

    summary: dict[str, Any] = {}
    for t in temps:
        for r in rows:
            for st in stretches:
                xs = [x["round_s"] * 1e3 for x in trials
                      if (x["T"], x["R"], x["stretch"], x["traced"]) == (t, r, st, False)]
                ys = [x["after_s"][0] * 1e3 for x in trials
                      if (x["T"], x["R"], x["stretch"], x["traced"]) == (t, r, st, False)]
                summary[f"T={t} R={r} S={st}"] = {
                    "round_ms_median": statistics.median(xs), "round_ms_min": min(xs),
                    "round_ms_max": max(xs), "after_ms_median": statistics.median(ys),
                }
    steps = [s * 1e3 for x in trials for s in x["steps_s"][1:]]
    doc = {
        "what": "a speculative round of R rows after S plain steps (docs/benchmarks/h200/rare_round.py)",
        "target": target, "mlx": mx.__version__, "device": str(mx.default_device()),
        "host": platform.node(), "grow": grow,
        "env": {k: v for k, v in os.environ.items() if k.startswith("MLX_")},
        "warm_s": warm_s, "wall_s": time.perf_counter() - t_start, "start_context": start_len,
        "plain_step_ms_median": statistics.median(steps) if steps else None,
        "summary": summary, "trials": trials,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    for name, v in summary.items():
        print(f"{name:18s} round {v['round_ms_median']:7.2f} ms ({v['round_ms_min']:.2f}-"
              f"{v['round_ms_max']:.2f})  next step {v['after_ms_median']:6.2f} ms")
    print(f"plain step median {doc['plain_step_ms_median']} ms; wall {doc['wall_s']:.1f} s")
    traced = [x for x in trials if x["traced"]]
    for x in traced:
        ph = {k: round(v, 2) for k, v in (x["phases"] or {}).items()}
        print(f"traced T={x['T']} R={x['R']} S={x['stretch']}: {ph}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
