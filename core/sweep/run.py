"""Running a sweep: one bench protocol per prompt and temperature, and the cells it measured.

Why through `core.bench.protocol.run_protocol` and not a loop of its own: the bench already
is the seed's protocol (warm-up, exactly N tokens with EOS ignored, invocations outermost so a
slow spell hits every row, the same seeds for every row, NLL against target-only's text of the
same seeds, task checks). A block is one `run_protocol` call over every cell of one
temperature on one prompt, with its own target-only baseline; prompts go outermost, so a sweep
cut short after its first prompt already has a number for every cell. `on_block` is called
after each block: the CLI writes its files there, so Ctrl+C keeps every finished block.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.bench.copying import measures
from core.bench.protocol import ProtocolConfig, ProtocolInputs, run_protocol
from core.bench.results import BenchReport, BenchResult, BenchSetting, finite
from core.primitives.acceptance import PositionTally
from core.sweep.frontier import BOUND_KEYS, MARGIN, frontier_summary
from core.sweep.grid import APPLIED_FIELDS, Cell, SweepGrid

SCHEMA = 1


@dataclass(frozen=True)
class SweepPrompt:
    """One prompt of the sweep: its name, templated ids, the text used, its check if any."""

    name: str
    ids: tuple[int, ...]
    text: str
    check: Callable[[list[int]], bool] | None = None
    check_name: str | None = None
    # Where an output's answer ends (its first EOS; the protocol generates on past it): the
    # answer's text and ids are kept per seed so a saved sweep can be judged again without a
    # re-run (core/sweep/judge.py), and copying and repetition are measured on them.
    eos_ids: tuple[int, ...] = ()


@dataclass
class Block:
    """One run_protocol call: the cells of one temperature on one prompt."""

    prompt: str
    temperature: float
    report: BenchReport
    check_name: str | None = None
    # row -> per seed: the answer's length in tokens (up to its first EOS) and its text
    answers: dict[str, list[tuple[int, str | None]]] = field(default_factory=dict)


@dataclass
class SweepRun:
    """Everything a sweep measured so far; `to_dict` is the JSON the renderings read."""

    grid: SweepGrid
    config: ProtocolConfig
    prompts: list[str]
    blocks: list[Block] = field(default_factory=list)
    complete: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    max_nll_delta: float | None = None
    min_task: float | None = None
    margin: float = MARGIN  # copying and repetition allowed above target-only's
    allow: tuple[str, ...] = ()  # default bounds lifted (core.sweep.frontier.ALLOWABLE)

    def cell_summaries(self) -> list[dict[str, Any]]:
        """One summary per cell over the prompts finished, in the grid's order."""
        out = []
        for cell in self.grid.all_cells():
            blocks = [b for b in self.blocks if b.temperature == cell.temperature]
            if blocks:
                out.append(summarise_cell(cell, blocks))
        return out

    def to_dict(self) -> dict[str, Any]:
        cells = self.cell_summaries()
        front = frontier_summary(cells, self.max_nll_delta, self.min_task, self.margin,
                                 self.allow)
        on_front = {i for g in front["groups"].values() for i in g["front"]}
        for c in cells:
            c["on_front"] = c["id"] in on_front
        first = self.blocks[0].report if self.blocks else None
        return finite({
            "schema": SCHEMA,
            "kind": "specdec-tui sweep",
            "complete": self.complete,
            "blocks_done": len(self.blocks),
            "blocks_planned": len(self.prompts) * len(self.grid.temperatures),
            "grid": self.grid.to_dict(),
            "protocol": self.config.to_dict(),
            "prompts": list(self.prompts),
            **self.meta,
            "environment": first.environment if first is not None else None,
            "models": first.protocol.get("models") if first is not None else None,
            "cells": cells,
            "frontier": front,
            "texts": texts(self.blocks),
            "blocks": [{"prompt": b.prompt, "temperature": b.temperature,
                        "check": b.check_name, "report": _without_texts(b.report.to_dict())}
                       for b in self.blocks],
        })


def run_sweep(
    engine: Any,
    prompts: Sequence[SweepPrompt],
    grid: SweepGrid,
    config: ProtocolConfig,
    *,
    progress: Callable[[int, int, str], None] | None = None,
    cancel: threading.Event | None = None,
    decode: Callable[[list[int]], str] | None = None,
    on_block: Callable[[SweepRun], None] | None = None,
    run: SweepRun | None = None,
) -> SweepRun:
    """Every block of the sweep, prompts outermost; `run` (made here when None) grows a block
    at a time and `on_block(run)` follows each. Call on the engine's thread."""
    if run is None:
        run = SweepRun(grid, config, [p.name for p in prompts])
    plan = [(p, t) for p in prompts for t in grid.temperatures]
    sizes: dict[float, int] = {}  # a block's request count at each temperature, once one ran
    done_before = 0
    for i, (prompt, t) in enumerate(plan):
        rows = [BenchSetting(c.name, c.settings) for c in grid.cells(t)]
        seen = {"total": 0}

        def tick(done: int, total: int, label: str, *, _t: float = t, _i: int = i,
                 _p: str = prompt.name, _before: int = done_before,
                 _seen: dict[str, int] = seen) -> None:
            _seen["total"] = total
            sizes.setdefault(_t, total)
            rest = sum(sizes.get(tt, total) for _, tt in plan[_i + 1 :])
            if progress is not None:
                progress(_before + done, _before + total + rest, f"{_p} T={_t:g}: {label}")

        report = run_protocol(engine, list(prompt.ids), rows, config, ProtocolInputs(
            progress=tick, cancel=cancel, decode=decode, task=prompt.check,
            task_name=prompt.check_name,
        ))
        report.protocol["prompt"] = {"name": prompt.name, "text": prompt.text,
                                     "ids": list(prompt.ids)}
        done_before += seen["total"]
        answers = {r.name: [answer_of_ids(list(ids), prompt.eos_ids, decode)
                            for ids in r.outputs.values()] for r in report.results}
        run.blocks.append(Block(prompt.name, t, report, prompt.check_name, answers))
        if on_block is not None:
            on_block(run)
    run.complete = True
    if on_block is not None:
        on_block(run)
    return run


def answer_of_ids(ids: list[int], eos_ids: Sequence[int],
                  decode: Callable[[list[int]], str] | None) -> tuple[int, str | None]:
    """(where the answer ends: its first EOS, else the end; its text where `decode` is given)."""
    end = next((i for i, t in enumerate(ids) if t in eos_ids), len(ids))
    return end, decode(ids[:end]) if decode is not None else None


def _paired_ratios(base: BenchResult, r: BenchResult) -> list[float]:
    """Target-only's E2E over the cell's, request by request: both lists run invocations x
    seeds in the same order, so each pair shares its seed and its spell of the machine."""
    return [b / c for b, c in zip(base.e2e_s, r.e2e_s, strict=False) if b > 0 and c > 0]


def summarise_cell(cell: Cell, blocks: Sequence[Block]) -> dict[str, Any]:
    """A cell over the prompts it ran on (see `aggregate`), from each block's bench row."""
    per_prompt: dict[str, dict[str, Any]] = {}
    for b in blocks:
        try:
            r = b.report.result(cell.name)
        except KeyError:
            continue
        base = b.report.result(b.report.protocol["baseline"])
        pairs = _paired_ratios(base, r)
        t = r.positions
        outputs = list(r.outputs.values())
        kept = b.answers.get(r.name) or [(len(ids), None) for ids in outputs]
        ends = [end for end, _ in kept]
        texts = [text for _, text in kept]
        answer_ids = [ids[:end] for ids, end in zip(outputs, ends, strict=False)]
        per_prompt[b.prompt] = {
            **measures(b.report.protocol["prompt"].get("ids"), answer_ids),
            # Only the answers (up to EOS), not what the protocol generated past it: what the
            # measures and checks read, at a fraction of a sweep file's size.
            "answer_ids": answer_ids,
            "answers": texts if all(t is not None for t in texts) else None,
            "cut": [end >= len(ids) for ids, end in zip(outputs, ends, strict=False)],
            "speedup": r.speedup_vs_target,
            "speedup_min": min(pairs) if pairs else None,
            "speedup_max": max(pairs) if pairs else None,
            "paired_ratios": pairs,
            "median_e2e_s": r.median_e2e_s,
            "acceptance": r.acceptance,
            "nll_delta": r.nll_delta,
            "mean_tv": r.mean_tv,
            "tv_per_token": r.tv_per_token,
            "task_success": r.task_success,
            "task_passed": list(r.task_passed),
            "greedy_match": r.greedy_match,
            "fallback_reason": r.fallback_reason,
            # The counts behind the acceptance, so sweeps split over calls pool exactly.
            "positions": {"tries": list(t.tries), "hits": list(t.hits), "rounds": t.rounds,
                          "proposed": t.proposed, "accepted": t.accepted}
            if r.speculative else None,
        }
    return aggregate({"id": cell.id, "name": cell.name, **cell.axes(),
                      "apply": {k: getattr(cell.settings, k) for k in APPLIED_FIELDS}},
                     per_prompt)


def aggregate(head: dict[str, Any], per_prompt: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A cell's numbers over its prompts: the speedup (geometric mean of the prompts' median
    ratios) with the range of its paired per-request ratios, acceptance and per-position
    acceptance pooled over every round, the NLL given up, the TVs, the copied share and the
    repetition (means over prompts),
    task success pooled over the checked prompts' outputs. One code path for a live sweep and
    for sweeps merged from several calls (`merge_sweeps`)."""
    speedups = [v["speedup"] for v in per_prompt.values() if v.get("speedup")]
    lows = [v["speedup_min"] for v in per_prompt.values() if v.get("speedup_min") is not None]
    highs = [v["speedup_max"] for v in per_prompt.values() if v.get("speedup_max") is not None]
    nlls = [v["nll_delta"] for v in per_prompt.values()
            if v.get("nll_delta") is not None and math.isfinite(v["nll_delta"])]
    tvs = [v["mean_tv"] for v in per_prompt.values() if v.get("mean_tv") is not None]

    def mean(key: str) -> float | None:
        vals = [v[key] for v in per_prompt.values() if v.get(key) is not None]
        return statistics.fmean(vals) if vals else None

    passed = [bool(x) for v in per_prompt.values() for x in v.get("task_passed") or []]
    tally = PositionTally()
    for v in per_prompt.values():
        pos = v.get("positions")
        if pos:
            tally.merge(PositionTally(list(pos["tries"]), list(pos["hits"]), pos["rounds"],
                                      pos["proposed"], pos["accepted"]))
    speculative = head.get("kind") == "speculative"
    return {
        **head,
        "prompts": list(per_prompt),
        "speedup": math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else None,
        "speedup_min": min(lows) if lows else None,
        "speedup_max": max(highs) if highs else None,
        "acceptance": tally.acceptance if speculative else None,
        "mean_accepted_length": tally.mean_accepted_length if speculative else None,
        "per_position_acceptance": list(tally.reached_rates()) if speculative else [],
        "nll_delta": statistics.fmean(nlls) if nlls else None,
        "mean_tv": statistics.fmean(tvs) if tvs else None,
        "tv_per_token": mean("tv_per_token"),
        "copied": mean("copied"),
        "repetition": mean("repetition"),
        "task_success": sum(passed) / len(passed) if passed else None,
        "task_outputs": len(passed),
        "fallback_reason": next((v["fallback_reason"] for v in per_prompt.values()
                                 if v.get("fallback_reason")), None),
        "per_prompt": per_prompt,
    }


def merge_sweeps(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several sweep JSONs of one pair (a GPU run split over calls: by temperature, by prompt)
    as one: each cell's prompts joined and its numbers aggregated again, the front and the
    recommendation computed again under the first file's bounds, blocks and texts joined.
    Refused in one sentence when the files ran different models or protocols."""
    from core.sweep.grid import SweepError

    if not docs:
        raise SweepError("There is no sweep to merge.")
    first = docs[0]

    def same(key: str) -> Any:
        ids = (first.get("models") or {}).get("identities") or {}
        return ({r: (d or {}).get("sha256") or (d or {}).get("shape") for r, d in ids.items()}
                if key == "models" else first.get(key))

    for d in docs[1:]:
        ids = (d.get("models") or {}).get("identities") or {}
        theirs = {r: (v or {}).get("sha256") or (v or {}).get("shape") for r, v in ids.items()}
        if theirs != same("models") or d.get("protocol") != first.get("protocol"):
            raise SweepError("These sweeps ran different models or protocols; merge only the "
                             "parts of one run.")
    cells: dict[str, dict[str, Any]] = {}
    heads: dict[str, dict[str, Any]] = {}
    for d in docs:
        for c in d.get("cells", []):
            heads.setdefault(c["id"], {k: c.get(k) for k in ("id", "name", "kind", "policy",
                                                               "tv", "source", "temperature",
                                                               "apply")})
            cells.setdefault(c["id"], {}).update(c.get("per_prompt") or {})
    merged = [aggregate(heads[i], pp) for i, pp in cells.items()]
    bounds = first.get("frontier") or {}
    front = frontier_summary(merged, **{k: bounds[k] for k in BOUND_KEYS if k in bounds})
    on = {i for g in front["groups"].values() for i in g["front"]}
    for c in merged:
        c["on_front"] = c["id"] in on
    prompts = list(dict.fromkeys(p for d in docs for p in d.get("prompts", [])))
    grid = dict(first.get("grid") or {})
    grid["temperatures"] = sorted({t for d in docs for t in (d.get("grid") or {}).get(
        "temperatures", [])})
    return finite({
        **{k: v for k, v in first.items() if k not in ("cells", "frontier", "texts", "blocks")},
        "complete": all(d.get("complete") for d in docs),
        "blocks_done": sum(d.get("blocks_done", 0) for d in docs),
        "blocks_planned": sum(d.get("blocks_planned", 0) for d in docs),
        "grid": grid,
        "prompts": prompts,
        "command": None,
        "commands": [d.get("command") for d in docs],
        "cells": merged,
        "frontier": front,
        "texts": [t for d in docs for t in d.get("texts", [])],
        "blocks": [b for d in docs for b in d.get("blocks", [])],
    })


def texts(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    """Per block, every row's texts: `text`, the first seed's (the same seed for every row of
    a block), and `texts`, every text it timed, per seed and distinct invocation, with each
    token's origin and text (core/bench/texts.py), so a reader can read what each TV budget
    changed against target-only's (`baseline`), seed by seed, as the seed did."""
    out = []
    for b in blocks:
        rows = [{"name": r.name, "seed": next(iter(r.outputs), None), "text": r.sample_text,
                 "texts": r.texts.to_dicts()}
                for r in b.report.results]
        out.append({"prompt": b.prompt, "temperature": b.temperature,
                    "baseline": b.report.protocol.get("baseline"), "rows": rows})
    return out


def _without_texts(report: dict[str, Any]) -> dict[str, Any]:
    """A block's bench report without its rows' timed texts: the sweep keeps them once, in
    its `texts`."""
    return {**report, "results": [{k: v for k, v in r.items() if k != "texts"}
                                  for r in report.get("results", [])]}
