"""How far can the lookup go on these outputs? Its ceiling, replayed from a bench's own text.

Why: the copy goals (rewrite-paragraph greedy >= 5x, the pasted refactor >= 3x) ask the
lookup for speed on the default model's own greedy answers, which copy only part of their
prompt. A lookup round commits its accepted copy plus one target token, so a greedy answer
bounds the speedup before any clock does. This replays each bench's seed-0 greedy output
(the JSON's `sample_output.token_ids`, target-only's row: every greedy row commits it)
through the lookup's own index (core/drafting/suffix_index.py), teacher-forced:

- `always`: every position with a repeat of at least `min_match` tokens is a lookup round of
  k = 32 drafts (the default's k_max), every other position a plain step: the most any
  policy over this lookup can commit a round;
- `with_policy`: the default's cost-aware copy policy chooses each round's k (declines
  included), priced by the curve, on target-only's answer;
- `substitution`: a variant tried and dropped (after a correction, copy on one source token
  further: a rename's substitution), on target-only's answer;
- `oracle`: each round copies the longest run of the answer found anywhere before it (no
  suffix match needed): a bound for any copying drafter, not a drafter;
- the bench's own lookup row: its tokens a round, from its JSON; and `always` replayed on
  that row's own answer, which can part from target-only's at a near-tie (a verification
  of many rows sums in another order than a single-row step).

`ceiling_x` (`ceiling_own_x`: on the lookup row's own answer) prices the `always` rounds with the bench host's calibration (a lookup round's
verification of 33 rows over one step, from a curve file measured on that GPU): the speedup
the lookup would reach were each round to cost exactly its calibrated verification and each
plain step a calibrated single-row forward, which real rounds do not beat.

Machine-independent (token ids only); needs the default model's tokenizer for the prompt's
ids, as the bench built them. Usage (here, the CPU):
  python docs/benchmarks/lookup/ceiling.py OUT.json CURVE.json[.xz] BENCH.json[.xz] ...
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "docs" / "benchmarks"))

K = 32  # the default's k_max (core/settings.py first_run_settings)


Copy = Callable[[Any, list[int], int], "list[int] | None"]


def _walk(prompt: list[int], out: list[int], choose: Copy,
          after: Callable[[list[int], int], None] | None = None) -> dict[str, Any]:
    """The teacher-forced rounds over `out` that every replay shares: before each round the
    lookup's index holds the prompt and the answer so far; `choose(index, seq, i)` returns the
    round's copy (None: a plain step), which keeps its tokens up to the first that differs
    from the answer, plus one target token; `after(copy, kept)` learns from it."""
    from core.drafting.suffix_index import SuffixIndex

    index = SuffixIndex(prompt)
    i = rounds = lookups = accepted = 0
    while i < len(out):
        seq = prompt + out[:i]
        index.sync(seq, len(index))
        copy = choose(index, seq, i)
        n = 0
        if copy is not None:
            while n < len(copy) and i + n < len(out) and copy[n] == out[i + n]:
                n += 1
            lookups += 1
            accepted += n
            if after is not None:
                after(copy, n)
        i += n + 1
        rounds += 1
    return {"rounds": rounds, "lookup_rounds": lookups, "steps": rounds - lookups,
            "accepted": accepted, "tokens_per_round": len(out) / rounds}


def replay(prompt: list[int], out: list[int], min_match: int = 2, k: int = K) -> dict[str, Any]:
    """Rounds the lookup takes over `out` when asked at every repeat (teacher-forced)."""

    def choose(index: Any, seq: list[int], i: int) -> list[int] | None:
        match = index.longest_repeat()
        if match is None or match.length < min_match:
            return None
        return index.continuation(match, k)

    return _walk(prompt, out, choose)


def with_policy(prompt: list[int], out: list[int], curve: Any) -> float:
    """Tokens a round when the default's cost-aware copy policy (core/cost/policy.py
    CopyRunPolicy, priced by `curve`, its acceptance learnt from these rounds) chooses each
    round's k, declines included: what the policy gives up against `replay`'s k = 32."""
    from core.cost.policy import make_policy
    from core.drafting.base import Offer
    from core.drafting.lookup import match_kind
    from core.settings import first_run_settings

    s = first_run_settings().replace(temperature=0.0, rule="lossless")
    policy = make_policy(s, curve.for_sampling(True), lambda k: 0.0, copies=True)

    def choose(index: Any, seq: list[int], i: int) -> list[int] | None:
        match = index.longest_repeat()
        if match is None or match.length < 2:
            return None
        period = len(index) - (match.end + 1)
        policy.consider(Offer("lookup", None if match.length >= period else period,
                              match_kind(match.length)))
        k = policy.next_k(limit=len(out) - i)
        return index.continuation(match, k) if k > 0 else []  # [] : declined, learnt as 0

    return _walk(prompt, out, choose, lambda copy, n: policy.observe(len(copy), n))[
        "tokens_per_round"]


def substitution(prompt: list[int], out: list[int], short: int = 3, k: int = K) -> float:
    """Tokens a round for a variant tried and dropped: after a round whose copy from text
    position p accepted n tokens before the target's correction, the next round copies from
    p + n + 1 (the correction taken as a one-token substitution, as a rename makes) whenever
    the suffix match is shorter than `short`; else as `replay`."""
    state: dict[str, Any] = {"ptr": None, "start": 0, "len": 0}

    def choose(index: Any, seq: list[int], i: int) -> list[int] | None:
        match, ptr = index.longest_repeat(), state["ptr"]
        start = None
        if ptr is not None and (match is None or match.length < short):
            start = ptr
        elif match is not None and match.length >= 2:
            start = match.end + 1
        if start is None or start >= len(seq):
            state["ptr"] = None
            return None
        state["start"], state["len"] = start, len(seq)
        period = len(seq) - start
        return [seq[start + (j % period)] for j in range(k)]

    def after(copy: list[int], n: int) -> None:
        nxt = state["start"] + n + 1
        state["ptr"] = nxt if nxt < state["len"] else None

    return _walk(prompt, out, choose, after)["tokens_per_round"]


def oracle(prompt: list[int], out: list[int], k: int = K) -> float:
    """Tokens a round when each round copies the longest earlier run of the answer."""
    i = rounds = 0
    while i < len(out):
        seen = prompt + out[:i]
        best = 0
        for j, t in enumerate(seen):
            if t != out[i]:
                continue
            n = 0
            while n < k and i + n < len(out) and j + n < len(seen) and seen[j + n] == out[i + n]:
                n += 1
            best = max(best, n)
        i += best + 1
        rounds += 1
    return len(out) / rounds


def main(argv: list[str]) -> int:
    from rawdata import load_json

    from core.models.chat_template import chat_prompt_ids
    from core.models.loader import load_model

    out_path, curve_path, *benches = argv
    from core.dispatch.curve import VerifyCostCurve

    curve = load_json(Path(curve_path))
    curve_obj = VerifyCostCurve.from_dict(curve)
    times = curve["times"]["auto"]
    step, verify = float(times["1"]), float(times[str(K + 1)])
    tok = load_model("default").tokenizer
    rows = []
    for b in benches:
        doc = load_json(Path(b))
        prompt = chat_prompt_ids(tok, [{"role": "user", "content": doc["protocol"]["prompt"]["text"]}])
        base = doc["results"][0]
        answer = base["sample_output"]["token_ids"]
        always = replay(prompt, answer)
        lk = next(r for r in doc["results"] if r["settings"].get("draft_source") == "lookup")
        own = replay(prompt, lk["sample_output"]["token_ids"])  # its answer, where it parted
        cost = always["lookup_rounds"] * verify + always["steps"] * step
        rows.append({
            "bench": Path(b).name.split(".json")[0],
            "prompt_tokens": len(prompt),
            "answer_tokens": len(answer),
            "always": always,
            "always_own_answer": own,
            "answers_agree": lk["sample_output"]["token_ids"] == answer,
            "oracle_tokens_per_round": oracle(prompt, answer),
            "substitution_tokens_per_round": substitution(prompt, answer),
            "policy_tokens_per_round": with_policy(prompt, answer, curve_obj),
            "bench_lookup_tokens_per_round": len(answer) / lk["rounds_per_request"],
            "bench_lookup_ratio": base["median_e2e_s"] / lk["median_e2e_s"],
            "ceiling_x": len(answer) * step / cost,
            "ceiling_own_x": len(answer) * step
            / (own["lookup_rounds"] * verify + own["steps"] * step),
        })
    doc = {"what": "lookup ceiling, replayed from each bench's seed-0 greedy answer",
           "k": K, "min_match": 2, "curve": str(curve_path), "step_s": step,
           "verify_33_s": verify, "benches": [str(b) for b in benches], "rows": rows}
    Path(out_path).write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        print(f"{r['bench']:28s} always {r['always']['tokens_per_round']:.2f} tok/round "
              f"(own {r['always_own_answer']['tokens_per_round']:.2f}) "
              f"oracle {r['oracle_tokens_per_round']:.2f} bench {r['bench_lookup_tokens_per_round']:.2f} "
              f"ceiling {r['ceiling_x']:.2f}x (own {r['ceiling_own_x']:.2f}x) bench {r['bench_lookup_ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
