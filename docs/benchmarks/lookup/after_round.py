"""Copies right after a round: the default's copy policy replayed on a bench's own greedy
answers at each `lookup_min_match` and `lookup_min_match_after_round`, priced by that bench's
own calibration.

Why: the lookup starts a copy only after the answer's end repeats `min_match` tokens (2 by
default, core/drafting/lookup.py), so each newly copied span begins with plain steps, and a
plain step right after a round runs unqueued: on the H200 it took 8.5-10.6 ms against a
pipelined 4-5 (never-slower.md, run 6). There a copy from a one-token repeat costs about
what the step it replaces does (a round of 2-33 rows, 8-12 ms in run 14's curves), so
`lookup_min_match_after_round = 1` copied from one-token repeats only there (a setting since
removed after its GPU A/B: docs/decisions/0003-lookup-min-match-after-round.md; the replay
keeps the rule itself, `after_round`). This replays
the cost-aware copy policy (first_run_settings, greedy, lossless) teacher-forced on each
bench's seed-0 greedy answer (target-only's row, `sample_output.token_ids`: every greedy row
commits it up to near-ties), the lookup's own index proposing, for each configuration, and
prices the rounds it chose with the bench's calibration (the JSON's `protocol.engine_curve`,
through `verify_cost`, as the engine's policy prices them):

- `curve_s`: every drafting round of k drafts at the curve's price of k + 1 rows, every plain
  step at its one-row price, the prefill left out;
- `broken_s`: the same plus one more plain step for each plain step that follows a drafting
  round (the pipeline break, which the curve's isolated timings leave out; a round that
  follows a round breaks nothing more). The predicted speedup is target-only's steps over it.

The policy hears what the engine tells it (core/decode/speculative.py): each round's
acceptance and its seconds (at the curve's price here), each break's extra step through
`charge`, each declined offer's step. A prediction, not a measurement: the real rounds'
host work, plan builds and noise are not in it (run 14's lookup rows read 2.70-2.85x on the
rewrite, where this replay prices the same policy at 5.67x).

Machine-independent in its counts (token ids only); the prices are the GPU's. Needs the
default model's tokenizer for the prompts' ids, as the bench built them. Usage (the CPU):
  python docs/benchmarks/lookup/after_round.py OUT.json BENCH.json[.xz] ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "benchmarks"))

# (lookup_min_match, lookup_min_match_after_round): the default, the new setting, and the
# two fixed thresholds either side of the default for context.
CONFIGS = ((2, 0), (2, 1), (1, 0), (3, 0))


def bench_curve(doc: dict[str, Any]) -> Any:
    """The bench's own calibration (protocol.engine_curve) as the engine's curve object."""
    from core.dispatch.curve import VerifyCostCurve

    c = doc["protocol"]["engine_curve"]
    return VerifyCostCurve.from_dict({"times": c["t_verify_s"], "backend": "cuda",
                                      "context_len": c.get("context", 0),
                                      "draft_step_s": c.get("draft_step_s")})


def replay(prompt: list[int], out: list[int], curve: Any, min_match: int,
           after_round: int = 0, charged: bool = True,
           stalls: dict[int, float] | None = None) -> dict[str, Any]:
    """The default's copy policy (first_run_settings, greedy, lossless) choosing each round's
    k over `out`, teacher-forced, with the lookup copying from repeats of `min_match`+
    tokens (`after_round`+ right after a drafting round; 0: min_match): its rounds, what they
    committed, and their price by `curve`. `charged` (default): the policy hears each round's
    and step's seconds and each break, as in the engine; else acceptance alone. `stalls`:
    drafting round i (from 0) is heard at `stalls[i]` times its price (a stall; the price
    charged stays the curve's)."""
    from core.cost.policy import make_policy
    from core.dispatch.curve import verify_cost
    from core.drafting.base import Offer
    from core.drafting.lookup import match_kind
    from core.drafting.suffix_index import SuffixIndex
    from core.settings import first_run_settings

    s = first_run_settings().replace(temperature=0.0, rule="lossless", lookup_min_match=min_match)
    view = curve.for_sampling(True)
    policy = make_policy(s, view, lambda k: 0.0, copies=True)
    price = verify_cost(view, s.dispatch)
    step = price(1)
    index = SuffixIndex(prompt)
    i = rounds = drafting = accepted = proposed = breaks = 0
    curve_s = 0.0
    broke: int | None = None  # the drafts of the round just run, until a plain step follows
    while i < len(out):
        index.sync(prompt + out[:i], len(index))
        match = index.longest_repeat()
        least = after_round if broke is not None and after_round else min_match
        k = 0
        if match is not None and match.length >= least:
            period = len(index) - (match.end + 1)
            policy.consider(Offer("lookup", None if match.length >= period else period,
                                  match_kind(match.length)))
            k = policy.next_k(limit=len(out) - i)
        n = 0
        if k > 0:
            copy = index.continuation(match, k)
            while n < len(copy) and i + n < len(out) and copy[n] == out[i + n]:
                n += 1
            cost = price(len(copy) + 1)
            heard = cost * (stalls or {}).get(drafting, 1.0)
            policy.observe(len(copy), n, heard if charged else None)
            broke = len(copy)
            drafting, accepted, proposed = drafting + 1, accepted + n, proposed + len(copy)
            curve_s += cost
        else:
            if match is not None and match.length >= least:
                policy.observe(0, 0, None if broke is not None or not charged else step)
            if broke is not None:  # this step ran unqueued: one more step, the round's
                breaks += 1
                if charged:
                    policy.charge(broke, step)
                broke = None
            curve_s += step
        i += n + 1
        rounds += 1
    return {"min_match": min_match, "after_round": after_round, "charged": charged, "rounds": rounds, "drafting_rounds": drafting,
            "plain_steps": rounds - drafting, "proposed": proposed, "accepted": accepted,
            "tokens_per_round": len(out) / rounds, "curve_s": curve_s,
            "breaks": breaks, "broken_s": curve_s + breaks * step, "target_only_s": len(out) * step}


def bench_answers(benches: list[str]) -> Any:
    """Per bench file: (its path, its JSON, its prompt's ids as the bench built them, target-
    only's seed-0 greedy answer, its calibration): what a replay runs on."""
    from rawdata import load_json

    from core.models.chat_template import chat_prompt_ids
    from core.models.loader import load_model

    tok = load_model("default").tokenizer
    for b in benches:
        doc = load_json(Path(b))
        prompt = chat_prompt_ids(tok, [{"role": "user", "content": doc["protocol"]["prompt"]["text"]}])
        yield b, doc, prompt, doc["results"][0]["sample_output"]["token_ids"], bench_curve(doc)


def main(argv: list[str]) -> int:
    out_path, *benches = argv
    rows = []
    for b, doc, prompt, answer, curve in bench_answers(benches):
        base = doc["results"][0]
        lk = next((r for r in doc["results"] if r.get("name") == "lookup+flags"), None)
        rows.append({"bench": Path(b).name.split(".json")[0], "source": str(b),
                     "answer_tokens": len(answer),
                     "measured_lookup_x": (base["median_e2e_s"] / lk["median_e2e_s"]
                                           if lk else None),
                     "replays": [replay(prompt, answer, curve, m, a) for m, a in CONFIGS]})
        r = rows[-1]
        print(r["bench"], " ".join(
            f"mm{x['min_match']}/{x['after_round']}: {x['tokens_per_round']:.2f} t/r "
            f"{x['target_only_s'] / x['broken_s']:.2f}x" for x in r["replays"]))
    doc = {"what": "the default's copy policy replayed on each bench's seed-0 greedy answer at "
                   "each (lookup_min_match, lookup_min_match_after_round), priced by the bench's "
                   "own calibration", "configs": [list(c) for c in CONFIGS], "rows": rows}
    Path(out_path).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
