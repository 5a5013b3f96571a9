"""A stalled round and the copy policy: the default's copy policy replayed on a bench's own
greedy answer with some of its first drafting rounds heard at several times their price,
at each probe gate (core/cost/policy.py `CopyRunPolicy._could_pay`).

Why: the drafted rounds' cost scale of the policy moves only when a round drafts. A stall in
a request's first rounds (a kernel's first use, a pause of the host) raises it; if no copy
then seems to pay, none drafts, and nothing brings it down: the request runs on plain steps.
On the H200 run 15's greedy rewrite had requests at 0.9x and 2.3-3.0x of target-only in one
row, with the guard stopping nothing. This replay asks whether a stall alone can do that,
and what each variant did about it: `observed` (the probe gate that stayed) prices a probe at
the observed scale, `lesser` at the lesser of it and the calibration, and `observed, clip
1.5x` kept that gate with each observation moving the scale by at most 1.5x of it (the clip
that stayed is 5x). The two variants left the code after their GPU A/Bs
(docs/decisions/0004-probe-at-observed-cost.md, 0005-cost-scale-clip.md): their replays are
in the data of 2026-12-04 (data/cpu-2026-12-04-stall), and this now replays the gate that
stayed.

It reuses docs/benchmarks/lookup/after_round.py `replay` (teacher-forced on target-only's
seed-0 answer, priced by the bench's own calibration, a break charged for each plain step
right after a round): the rounds are charged at the curve's price whatever the policy heard,
so a stall changes only what the policy chose. A prediction, not a measurement (run 15's
GPU A/B of the two gates is the measurement). Usage (the CPU):
  python docs/benchmarks/lookup/stall_replay.py OUT.json BENCH.json[.xz] ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# name -> {drafting round index: factor the policy hears its price at}
PATTERNS = {
    "none": {},
    "first x5": {0: 5.0},
    "first two x10": {0: 10.0, 1: 10.0},
    "sixth and seventh x10": {5: 10.0, 6: 10.0},
}
# name -> after_round.replay's keyword arguments: the one probe gate and clip the code has
GATES: dict[str, dict[str, object]] = {"observed": {}}


def main(argv: list[str]) -> int:
    from after_round import bench_answers, replay

    out_path, *benches = argv
    rows = []
    for b, _doc, prompt, answer, curve in bench_answers(benches):
        runs = []
        for gate, kwargs in GATES.items():
            for name, stalls in PATTERNS.items():
                r = replay(prompt, answer, curve, 2, 0, stalls=stalls, **kwargs)
                runs.append({"gate": gate, "stalls": name, **r})
                print(Path(b).name, gate, name, f"{r['target_only_s'] / r['broken_s']:.2f}x")
        rows.append({"bench": Path(b).name.split(".json")[0], "source": str(b),
                     "answer_tokens": len(answer), "replays": runs})
    doc = {"what": "the default's copy policy replayed on each bench's seed-0 greedy answer with "
                   "stalled drafting rounds heard at a multiple of their price, per probe gate "
                   "and cost scale clip",
           "patterns": {k: {str(i): f for i, f in v.items()} for k, v in PATTERNS.items()},
           "gates": GATES, "rows": rows}
    Path(out_path).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
