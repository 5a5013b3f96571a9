"""Which text each greedy row wrote, and whether its copy bound explains the row's speed.

Why: the copy goals are judged on the default model's own greedy answers, and greedy on the
GPU is not bit-stable: a verification of many rows sums in another order than a single-row
step, so at a near-tie a speculative row can write another text than target-only's, and
target-only's answer to one prompt differs between calls (never-slower.md, run 15, finding
4). If the rows' speeds followed their texts, a copy goal would be a statement about which
near-tie a call fell on, not about the engine. This reads each greedy bench's rows' seed-0
answers (`sample_output.token_ids`, the only tokens a bench before 6740c2a keeps), names
each by `output_sha` (core/bench/results.py), and replays it through the lookup's own index
(docs/benchmarks/lookup/ceiling.py `replay`: every repeat of 2+ tokens a round of up to 32
drafts, teacher-forced): its tokens a round, the most a lookup round can commit on that text,
and `oracle`'s (each round copies the longest earlier run of the text, from anywhere: a bound
for any copying drafter). A round verifies at least two rows and so costs at least a plain
step: no copying row can beat target-only by more than its text's tokens a round. Beside it, the row's measured speed over target-only (median E2E over median E2E, one call).

Token ids only, so machine-independent; it prices nothing. Usage (the CPU):
  python docs/benchmarks/lookup/texts.py OUT.json BENCH.json[.xz] ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str]) -> int:
    from after_round import bench_answers
    from ceiling import oracle, replay

    from core.bench.results import output_sha

    out_path, *benches = argv
    rows = []
    for b, doc, prompt, _answer, _curve in bench_answers(benches):
        base = doc["results"][0]
        texts = []
        for r in doc["results"]:
            ids = r["sample_output"]["token_ids"]
            texts.append({
                "name": r["name"], "mode": r["settings"].get("mode"),
                "draft_source": r["settings"].get("draft_source"),
                "output_sha": output_sha(ids), "tokens": len(ids),
                "copy_tokens_per_round": replay(prompt, ids)["tokens_per_round"],
                "oracle_tokens_per_round": oracle(prompt, ids),
                "vs_target_only": base["median_e2e_s"] / r["median_e2e_s"],
            })
            print(Path(b).parent.name, Path(b).name.split(".json")[0], r["name"][:40],
                  texts[-1]["output_sha"], f"{texts[-1]['copy_tokens_per_round']:.2f} t/r",
                  f"{texts[-1]['vs_target_only']:.2f}x")
        rows.append({"bench": Path(b).name.split(".json")[0], "source": str(b), "rows": texts})
    doc = {"what": "each greedy bench row's seed-0 text (output_sha), its lookup copy bound "
                   "(tokens a round when every repeat of 2+ tokens is copied, up to 32 drafts, "
                   "teacher-forced) and the row's measured speed over target-only",
           "min_match": 2, "k": 32, "benches": rows}
    Path(out_path).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
