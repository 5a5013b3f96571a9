"""Replay the cost-aware policy on a recorded H200 calibration: which k it chooses, how many
target steps it runs and the speedup its choices are worth, with the acceptance drawn per
position (seeded) and each round costing what the calibration prices times what the H200
rounds measured (target steps 0.77x, pipelined; drafted rounds 1.1x). No GPU needed: the
policy is host logic, and this is the machine it chose for.

Run: python docs/benchmarks/policy/replay.py [--accept 0.88] [--seeds 3] [--tokens 256] [--fixed K]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from core.policy import CostAwarePolicy

DATA = Path(__file__).parents[1] / "data" / "h200-2026-11-30" / "72b-key.json"
# The measured round times against their calibrated prices (the cost-aware row's trace).
STEP_RATIO, DRAFTED_RATIO = 0.77, 1.1
# The row's first two rounds: 3 of 7 and 0 of 7 accepted, which sent the policy to k = 0.
OPENING = [(7, 3), (7, 0)]


def replay(accept: float, seed: int, tokens: int, fixed: int = 0) -> dict[str, object]:
    cal = json.loads(DATA.read_text())["protocol"]["calibration"]
    tv = {int(r): s for r, s in cal["t_verify_s"]["auto"].items()}
    policy = CostAwarePolicy(lambda r: tv[min(r, max(tv))], cal["draft_step_s"], k_max=15)
    rng, opening = random.Random(seed), list(OPENING)
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
        s = policy.priced(k) * (STEP_RATIO if k == 0 else DRAFTED_RATIO)
        policy.observe(k, n, s)
        ks.append(k)
        done, seconds = done + n + 1, seconds + s
    step = tv[1] * STEP_RATIO
    drafted = [k for k in ks if k]
    return {"seed": seed, "rounds": len(ks), "target_steps": len(ks) - len(drafted),
            "mean_k": sum(drafted) / max(len(drafted), 1),
            "speedup": done / seconds * step, "first_rounds": ks[:24]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accept", type=float, default=0.88, help="P(accept) per position")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--fixed", type=int, default=0, help="propose this k every round instead")
    a = ap.parse_args()
    for seed in range(a.seeds):
        print(json.dumps(replay(a.accept, seed, a.tokens, a.fixed)))


if __name__ == "__main__":
    main()
