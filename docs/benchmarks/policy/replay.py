"""Replay the cost-aware policy on a recorded H200 calibration: which k it chooses, how many
target steps it runs and the speedup its choices are worth, with the acceptance drawn per
position (seeded) and each round costing what the calibration prices, times what the H200
rounds measured against it. No GPU needed: the policy is host logic; the costs are the H200's.

Two recorded cases (--case):
- 72b: the 72B shape with the 0.5B draft at TV = 0.5 (88% per position), its two unlucky
  opening rounds (3 of 7, 0 of 7) and the measured cost ratios (target steps 0.77x the
  calibrated price, pipelined; drafted rounds 1.1x); k_max 15.
- smollm2: SmolLM2-135M with its own 4-bit draft (the lookup bench's calibration), a source
  that pays only near full acceptance; priced as calibrated; k_max 8.

Run: python docs/benchmarks/policy/replay.py [--case 72b|smollm2] [--accept A] [--seeds 3]
     [--tokens 256] [--fixed K]
"""

from __future__ import annotations

import argparse
import json
import lzma
import random
from pathlib import Path

from core.cost.policy import CostAwarePolicy

DATA = Path(__file__).parents[1] / "data" / "h200-2026-11-30"
CASES = {
    "72b": {"file": "72b-key.json.xz", "accept": 0.88, "k_max": 15, "step": 0.77, "drafted": 1.1,
            "opening": [(7, 3), (7, 0)]},
    "smollm2": {"file": "lookup-code-edit-pasted-t0.0.json.xz", "accept": 0.55, "k_max": 8,
                "step": 1.0, "drafted": 1.0, "opening": []},
}


def replay(case: str, accept: float, seed: int, tokens: int, fixed: int = 0) -> dict[str, object]:
    c = CASES[case]
    raw = lzma.decompress((DATA / c["file"]).read_bytes())  # the data folder is kept xz'd
    cal = json.loads(raw)["protocol"]["calibration"]
    tv = {int(r): s for r, s in cal["t_verify_s"]["auto"].items()}
    policy = CostAwarePolicy(lambda r: tv[min(r, max(tv))], cal["draft_step_s"], k_max=c["k_max"])
    rng, opening = random.Random(seed), list(c["opening"])
    ks: list[int] = []
    done, seconds = 0, 0.0
    while done < tokens:
        k = fixed or policy.next_k()
        if opening:
            k, n = opening.pop(0)
        else:
            n = 0
            while n < k and rng.random() < accept:
                n += 1
        s = policy.priced(k) * (c["step"] if k == 0 else c["drafted"])
        policy.observe(k, n, s)
        ks.append(k)
        done, seconds = done + n + 1, seconds + s
    step = tv[1] * c["step"]
    drafted = [k for k in ks if k]
    return {"case": case, "seed": seed, "rounds": len(ks), "target_steps": len(ks) - len(drafted),
            "mean_k": sum(drafted) / max(len(drafted), 1),
            "speedup": done / seconds * step, "first_rounds": ks[:24]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), default="72b")
    ap.add_argument("--accept", type=float, default=None, help="P(accept) per position")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--fixed", type=int, default=0, help="propose this k every round instead")
    a = ap.parse_args()
    accept = CASES[a.case]["accept"] if a.accept is None else a.accept
    for seed in range(a.seeds):
        print(json.dumps(replay(a.case, accept, seed, a.tokens, a.fixed)))


if __name__ == "__main__":
    main()
