"""Judging a sweep's texts by what they did, live or from a saved file: copied from the prompt,
repeated, and the task check.

Why apart from the run: a saved sweep (its JSON) must be judged again without a re-run, when a
check is added or fixed, or when a file predates these measures. `rejudge(data)` recomputes
every cell's copied share, repetition and task success from what the file kept (token ids
where it kept them, words of the texts where it kept only texts), then the cells' aggregates
and the frontier. Pure Python on the JSON dict: no MLX, no model, nothing the model wrote run.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from core.bench.copying import measures


def _check_for(block: Mapping[str, Any]) -> Any:
    """The check a saved block ran: a shipped prompt's own (by name), else the one check its
    description names (a user's --check); None when it had none or it no longer parses."""
    from core.bench.errors import BenchError
    from core.bench.prompts import prompt_check, prompt_names
    from core.bench.tasks import parse_check

    name, described = block.get("prompt"), block.get("check")
    prompt = ((block.get("report") or {}).get("protocol") or {}).get("prompt") or {}
    try:
        if name in prompt_names():
            shipped = prompt_check(name)
            if shipped is not None and (described is None or shipped.describe() == described):
                return shipped
        if described:
            return parse_check(described, prompt.get("text") or "", str(name))
    except BenchError:
        return None
    return None


def _rows(block: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {r["name"]: r for r in (block.get("report") or {}).get("results", [])}


def rejudge(data: Mapping[str, Any], checks: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A copy of a saved sweep (`SweepRun.to_dict()` or a merged one) judged again: each cell's
    per-prompt copied share, repetition and (where a check applies) task verdicts recomputed
    from the kept outputs, the cells aggregated again and the frontier computed again under
    the file's bounds. `checks` ({prompt name: check}) replaces the checks the file ran."""
    from core.sweep.frontier import BOUND_KEYS, frontier_summary
    from core.sweep.run import aggregate

    out = copy.deepcopy(dict(data))
    blocks = {(b.get("prompt"), float(b.get("temperature", 0.0))): b
              for b in out.get("blocks", [])}
    heads = ("id", "name", "kind", "policy", "tv", "source", "temperature", "apply")
    cells = []
    for c in out.get("cells", []):
        per_prompt = c.get("per_prompt") or {}
        for prompt, v in per_prompt.items():
            block = blocks.get((prompt, float(c.get("temperature", 0.0))))
            if block is not None:
                _judge_one(v, c["name"], block, checks)
        cells.append(aggregate({k: c.get(k) for k in heads}, per_prompt))
    bounds = out.get("frontier") or {}
    front = frontier_summary(cells, **{k: bounds.get(k) for k in BOUND_KEYS if k in bounds})
    on = {i for g in front["groups"].values() for i in g["front"]}
    for c in cells:
        c["on_front"] = c["id"] in on
    out["cells"], out["frontier"] = cells, front
    return out


def _judge_one(v: dict[str, Any], row: str, block: Mapping[str, Any],
               checks: Mapping[str, Any] | None) -> None:
    """One cell's numbers on one prompt, judged again from what its block kept."""
    prompt = ((block.get("report") or {}).get("protocol") or {}).get("prompt") or {}
    saved = _rows(block).get(row) or {}
    sample = saved.get("sample_output") or {}
    outputs = v.get("answer_ids") or []
    texts, cuts = v.get("answers"), v.get("cut")
    if not texts:  # an older file: the first seed's whole text, cut at a special EOS marker
        first = [answer_of(sample["text"])] if sample.get("text") else []
        texts, cuts = [t for t, _ in first], [c for _, c in first]
    v.update(measures(prompt.get("ids"), outputs, prompt.get("text"), texts))
    check = (checks or {}).get(block.get("prompt")) if checks else _check_for(block)
    if check is not None and texts:
        cuts = cuts or [False] * len(texts)
        v["task_passed"] = [bool(check(t, c)) for t, c in zip(texts, cuts, strict=False)]
        v["task_success"] = sum(v["task_passed"]) / len(v["task_passed"])


EOS_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<|end|>", "<end_of_turn>")


def answer_of(text: str) -> tuple[str, bool]:
    """An older file's whole decoded text (EOS ignored) as (answer, cut): up to the first
    special end-of-turn marker the tokenizer decoded (a file that kept no ids per seed cannot
    say where the EOS token was), cut when it has none."""
    at = min((i for m in EOS_MARKERS if (i := text.find(m)) >= 0), default=-1)
    return (text, True) if at < 0 else (text[:at], False)
