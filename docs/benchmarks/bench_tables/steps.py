"""steps.md's tables: the compiled forward against the eager one and mlx-lm
(docs/benchmarks/h200/step_ab.py), every ratio recomputed per seed from the raw requests."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench_tables.rows import Doc
from core.bench.report import md_table, num

STEPS = ("eager", "compiled")


def _per_seed(reqs: Sequence[dict[str, Any]], key: str, num_arm: str, den_arm: str,
              invert: bool = False) -> list[float]:
    """Arm `num_arm`'s `key` over arm `den_arm`'s, one ratio per seed both ran."""
    by = {(r["arm"], r["seed"]): r.get(key) for r in reqs}
    out = []
    for seed in sorted({r["seed"] for r in reqs}):
        a, b = by.get((num_arm, seed)), by.get((den_arm, seed))
        if a and b:
            out.append(b / a if invert else a / b)
    return out


def _spread(values: Sequence[float], fmt: str = ".2f", unit: str = "x") -> str:
    """median (min-max, n) of per-seed values; '-' where there are none."""
    if not values:
        return "-"
    med = statistics.median(values)
    return (f"{num(med, fmt)}{unit} ({num(min(values), fmt)}-{num(max(values), fmt)}, "
            f"n={len(values)})")


def _median(reqs: Sequence[dict[str, Any]], arm: str, key: str) -> float | None:
    vals = [r[key] for r in reqs if r["arm"] == arm and r.get(key)]
    return statistics.median(vals) if vals else None


def _where(doc: Doc) -> str:
    return f"MLX {doc.get('mlx', '?')}, {doc.get('device_name') or doc.get('device', '?')}"


def _part(docs: list[Doc], name: str) -> tuple[Doc, Any]:
    for d in docs:
        part = (d.get("parts") or {}).get(name)
        if part:
            return d, part
    raise ValueError(f"no '{name}' part in the data")


def step_target(docs: list[Doc]) -> tuple[list[str], str]:
    """Target-only decode per model: eager and compiled against mlx-lm's generate_step."""
    doc, part = _part(docs, "target")
    rows = []
    for model, res in part.items():
        reqs = res["requests"]
        graphs = max((r.get("graphs") or 0 for r in reqs if r["arm"] == "compiled"), default=0)
        rows.append([f"`{model}`",
                     *(num(_median(reqs, arm, "decode_tok_s"), ".0f")
                       for arm in ("mlx-lm", "eager", "compiled")),
                     _spread(_per_seed(reqs, "decode_tok_s", "eager", "mlx-lm")),
                     _spread(_per_seed(reqs, "decode_tok_s", "compiled", "mlx-lm")),
                     _spread(_per_seed(reqs, "decode_tok_s", "compiled", "eager")),
                     str(graphs)])
    head = ["Target", "mlx-lm tok/s", "eager tok/s", "compiled tok/s", "eager / mlx-lm",
            "compiled / mlx-lm", "compiled / eager", "graphs"]
    return md_table(head, rows), (
        f"target-only, greedy, {doc.get('tokens')} new tokens (EOS ignored) on `{doc.get('prompt')}`"
        f", {_where(doc)}; tok/s = median decode tokens a second over the seeds (after the first "
        "token); ratios = per seed, of decode tok/s, the arms interleaved in a rotated order, "
        "as median (min-max, n seeds); graphs = compiled graphs traced by the last compiled "
        f"request (a count past the warm-up's would be a retrace); data: step_ab.py, "
        f"{doc.get('seeds')} seeds after one warm-up request per arm")


def step_pair(docs: list[Doc]) -> tuple[list[str], str]:
    """The pair's 1-row step costs per step kind, and fixed-8 at TV 0.5 over target-only."""
    doc, part = _part(docs, "pair")
    steps = part["steps"]
    reqs = part.get("requests") or []
    rows = []
    for step in STEPS:
        rows.append([step,
                     num(_median(steps, f"target-{step}", "step_ms"), ".2f"),
                     num(_median(steps, f"draft-{step}", "step_ms"), ".2f"),
                     _spread(_per_seed(steps, "step_ms", f"draft-{step}", f"target-{step}"),
                             unit=""),
                     _spread(_per_seed(reqs, "decode_tok_s", f"fixed-8-tv0.5-{step}",
                                       f"target-only-{step}"))])
    rows.append(["compiled / eager (ms)",
                 _spread(_per_seed(steps, "step_ms", "target-compiled", "target-eager"), unit=""),
                 _spread(_per_seed(steps, "step_ms", "draft-compiled", "draft-eager"), unit=""),
                 "-", "-"])
    head = ["Step", "target ms a step", "draft ms a step", "draft / target",
            "fixed-8 TV 0.5 / target-only"]
    return md_table(head, rows), (
        f"{_where(doc)}; ms a step = median over seeds of a chain of 1-row greedy steps with no "
        "host sync inside (as the engine drafts), from a cache prefilled with the prompt; ratios"
        " per seed as median (min-max, n); the last column is end to end (decode tok/s), and its "
        "acceptance is that of the shapes' random weights, which a real pair's is not: the step "
        "costs are the shapes', the weights change no cost")


def step_lookup(docs: list[Doc]) -> tuple[list[str], str]:
    """A lookup round in plain steps, and the lookup and default settings over target-only."""
    doc, part = _part(docs, "lookup")
    reqs = part["requests"]
    rows = []
    for step in STEPS:
        costs = [r["round_in_steps"] for r in reqs
                 if r["arm"] == f"lookup-{step}" and r.get("round_in_steps")]
        rows.append([step,
                     num(_median(reqs, f"target-only-{step}", "plain_step_ms"), ".2f"),
                     num(_median(reqs, f"lookup-{step}", "lookup_round_ms"), ".2f"),
                     _spread(costs, unit=""),
                     _spread(_per_seed(reqs, "decode_tok_s", f"lookup-{step}",
                                       f"target-only-{step}")),
                     _spread(_per_seed(reqs, "decode_tok_s", f"default-{step}",
                                       f"target-only-{step}"))])
    head = ["Step", "plain step ms", "lookup round ms", "round in plain steps",
            "lookup / target-only", "model drafts / target-only"]
    return md_table(head, rows), (
        f"default model on `code-refactor-pasted`, greedy, {doc.get('tokens')} tokens, traced "
        f"(a round's own time), {_where(doc)}; plain step = median 1-row round of the "
        "target-only request, lookup round = mean lookup round of the lookup request, round in "
        "plain steps = that mean over the same request's median plain step, per seed; both "
        "drafting rows at Settings()'s own policy (fixed k = 4, mentored at TV 0): lookup = "
        "draft_source lookup, model drafts = the self:bits=4 draft (step_ab.py calls this arm "
        "`default`: Settings()'s, not the app's first-run default, which is hybrid and "
        "cost-aware); speed ratios per seed (decode tok/s) as median (min-max, n); greedy on this backend is not "
        "bit-stable, so rows may have written different texts")


def step_pieces(docs: list[Doc]) -> tuple[list[str], str]:
    """step_split.py's plain steps, eager against compiled: where a 1-row step's host time
    goes (building the graph, queueing it with async_eval, the rest of the loop) per model."""
    rows = []
    for d in docs:
        for row in d.get("summary") or {}:
            steps = [s for r in d.get("requests") or [] if r["row"] == row
                     for s in (r.get("steps") or [])[1:]]  # a request's first step prefilled
            if not steps:
                continue
            med = {k: statistics.median(s[k] for s in steps)
                   for k in ("build", "queue", "consumer", "rest", "gap")}
            rows.append([f"`{d.get('target')}`", f"`{row}`", str(len(steps)),
                         *(num(med[k], ".2f") for k in ("build", "queue", "rest", "gap"))])
    d0 = docs[0]
    return md_table(("Target", "row", "steps", "build ms", "queue ms", "rest ms", "gap ms"),
                    rows), (
        f"{_where(d0)}, T = {d0.get('temperature')}, {d0.get('tokens')} tokens on "
        f"`{d0.get('prompt')}`; every plain step of the row's requests but each request's first, "
        "pooled, median per column: build = Python building the step's graph (the compiled "
        "step: calling the traced function), queue = `mx.async_eval` handing it to the GPU "
        "(the backend's per-primitive host work), rest = the loop's own work, gap = one step's "
        "time between events (the device's wait included); data: step_split.py")
