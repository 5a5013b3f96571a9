#!/usr/bin/env python3
"""Write docs/benchmarks/real-pair.md from the raw data of the real pair.

Two sections, each from its raw JSON only. The H200 section (when the data folder has sweep
files: `specdec-tui sweep --json`, written by docs/benchmarks/h200/real-pair-sweep.sh and
real-pair-sweep-more.sh): the cells measured there (speed with its paired range, acceptance,
NLL given up, mean TV, task success), the frontier as an SVG beside the page, the fastest cell
within the bounds, the texts side by side, and, in columns of their own, the speedup the same
acceptance would predict with a 7B and a 72B target (the H200 curves measured on those shapes,
priced by core.cost.prediction); above them a headline paragraph computed from the cells
(README.md quotes it verbatim: tests/docs/test_real_pair_page.py), below them each prompt's own
numbers, and after the sweeps what issue 30 planned that no sweep measured. The CPU section: the bench reports of run_cpu.sh (acceptance,
the TV sweep, NLL, task success) with the speedup predicted from the H200's curve for these two
shapes. No machine's paths: models by file name and sha256, and the fetch command.

    PYTHONPATH=$PWD python3 docs/benchmarks/real-pair/make_page.py \\
        [--data docs/benchmarks/data/real-pair-cpu-DATE] [--sweep docs/benchmarks/data/h200-real-pair-sweep]
        [--curve FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "docs" / "benchmarks"))  # rawdata: the data folder is xz'd
from rawdata import glob_json, plain_name, read_text  # noqa: E402

DATA = ROOT / "docs" / "benchmarks" / "data"
CURVE = DATA / "h200-curve-qwen2.5-1.5b-0.5b.json.xz"
OUT = ROOT / "docs" / "benchmarks" / "real-pair.md"
SWEEP = DATA / "h200-real-pair-sweep"
# The H200 curves of bigger targets with the same 0.5B draft's shape (random weights of the
# real shapes): what this pair's agreement would buy where a draft step is cheap against a
# target step. 7B: the first edition's calibration; 72B: the third edition's bench.
BIG_CURVES = (("7B", DATA / "h200-calibrate.json.xz"),
              ("72B", DATA / "h200-2026-12-01c" / "key72-256.json.xz"))  # fmt: skip
TVS = (0.0, 0.25, 0.5, 0.75, 1.0)


def rel(path: Path) -> str:
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)


def num(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(r) + " |" for r in rows), ""]  # fmt: skip


def load_reports(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """(prompt name, report) for every bench JSON in the folder, by prompt name."""
    out = []
    for path in glob_json(folder):
        doc = json.loads(read_text(path))
        if "results" in doc and "protocol" in doc:
            name = plain_name(path).stem
            out.append(((doc["protocol"].get("prompt") or {}).get("name", name), doc))
    return out


def rows_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["results"] if r.get("engine", "specdec-tui") == "specdec-tui"]


def spec_row(doc: dict[str, Any], rule: str, temperature: float, tv: float | None = None
             ) -> dict[str, Any] | None:  # fmt: skip
    for r in rows_of(doc):
        s = r["settings"]
        if s.get("mode") != "speculative" or s.get("rule") != rule:
            continue
        if abs(float(s.get("temperature", 0)) - temperature) > 1e-9:
            continue
        if tv is not None and abs(float(s.get("tv_budget", 0)) - tv) > 1e-9:
            continue
        return r
    return None


def predicted(row: dict[str, Any], curve: Any) -> tuple[float, int, float] | None:
    """(speedup at the row's k, best k, its speedup) on the curve's machine, or None."""
    if curve is None or not row.get("per_position_acceptance"):
        return None
    from core.cost.prediction import RoundCost, predict
    from core.dispatch.curve import verify_cost
    from core.drafting.model import model_draft_price

    s = row["settings"]
    k = int(s["k"])
    cost = RoundCost(verify_cost(curve, s.get("dispatch", "auto")), model_draft_price(curve),
                     curve.t_verify(1))  # fmt: skip
    accept = row["per_position_acceptance"]
    bonus = bool(s.get("bonus", True))
    at_k = predict(cost, accept, bonus=bonus, k_max=k, k_min=k).best
    best = predict(cost, accept, bonus=bonus, k_max=k, k_min=0).best
    return at_k.speedup, int(best.k), best.speedup


def model_name(text: str | None) -> str:
    """'/home/x/real-pair/q.gguf (q)' -> 'q.gguf (q)': a page names files, never paths."""
    from core.sweep.report import display_spec

    if not text:
        return "-"
    spec, _, rest = text.partition(" (")
    return display_spec(spec) + (f" ({rest}" if rest else "")


def scrub(text: str) -> str:
    """A command line with every absolute path (a machine's) cut to its file name."""
    from core.sweep.report import display_spec

    return " ".join(display_spec(w) if w.startswith(("/", "~")) else w for w in text.split(" "))


def page(reports: list[tuple[str, dict[str, Any]]], curve: Any, curve_path: Path,
         data: Path, heading: str = "#") -> str:  # fmt: skip
    first = reports[0][1]
    proto, env, models = first["protocol"], first["environment"], first["protocol"]["models"]
    h = heading
    out = [f"{h} What the TV budget gives up, on a real pair: this CPU\n",
           "<!-- generated by docs/benchmarks/real-pair/make_page.py from the raw reports in "
           f"{rel(data)}/; do not edit by hand -->\n",
           f"Target **{model_name(models['target'])}**, draft **{model_name(models['draft'])}** (vocabulary "
           f"{models['vocab_size']}), fetched and checked by `docs/benchmarks/real-pair/fetch.py`. "
           + "".join(f"{role.capitalize()} sha256 `{d.get('sha256')}`. "
                     for role, d in (models.get("identities") or {}).items()
                     if isinstance(d, dict) and d.get("sha256"))
           + f"Measured on {env.get('backend', '?')} ({env.get('device_name') or env.get('machine', '?')}); "
           "acceptance does not depend on the machine (up to ties in the logits), speed does, so "
           "speed here is only predicted, for the H200, from its measured verify-cost curve.\n",
           f"Protocol per prompt: {proto['tokens']} new tokens per request (EOS ignored by the "
           f"bench; task checks read the text before the first EOS), seeds "
           f"{proto['seed_values']}, {proto['invocations']} invocation(s), k = "
           f"{spec_row(first, 'greedy', 0.0)['settings']['k'] if spec_row(first, 'greedy', 0.0) else '?'}"
           " drafts per round, repetition penalty off. NLL basis: "
           f"{proto['nll_basis']}.\n"]  # fmt: skip

    out.append(f"{h}# Acceptance by position\n")
    out.append("P(draft i accepted | drafts 1..i-1 were), pooled over the seeds' rounds: greedy "
               "at T = 0, and the lossless rule (TV budget 0) at T = 0.7.\n")  # fmt: skip
    k = max((len(r.get("per_position_acceptance") or []) for _, d in reports for r in rows_of(d)),
            default=0)  # fmt: skip
    body = []
    for name, doc in reports:
        for label, row in (("T = 0, greedy", spec_row(doc, "greedy", 0.0)),
                           ("T = 0.7, lossless", spec_row(doc, "mentored", 0.7, 0.0))):  # fmt: skip
            if row is None:
                continue
            acc = row.get("per_position_acceptance") or []
            body.append([name, label, pct(row.get("acceptance")),
                         num(row.get("mean_accepted_length"), ".2f"),
                         *(pct(acc[i]) if i < len(acc) else "-" for i in range(k))])  # fmt: skip
    out += table(["Prompt", "Sampling", "Acceptance", "Accepted per round",
                  *(f"Position {i + 1}" for i in range(k))], body)  # fmt: skip

    out.append(f"{h}# The TV sweep at T = 0.7\n")
    out.append("Mentored rule, TV budget D (0 is lossless, 1 accepts every draft). NLL: the "
               "target's mean negative log-likelihood per token of the row's text; its "
               "target-only baseline has the same sampling and seeds. Mean TV: the per-step "
               "TV distance between what the row sampled from and the target. Task: share of "
               "outputs the prompt's check passed (checkable prompts only). Predicted H200 "
               "speedup: core.cost.prediction with the row's per-position acceptance at its k "
               "and the H200's curve for these shapes; best k in brackets.\n")  # fmt: skip
    n_scored = len(proto["seed_values"]) * proto["tokens"]
    out.append(f"Each row's NLL is over {n_scored} generated tokens ({len(proto['seed_values'])} "
               f"seed(s) x {proto['tokens']}): one sampled text per seed, so a difference of a "
               "few tenths between rows can be the sample, not the budget.\n")  # fmt: skip
    if curve is None:
        out.append(f"The H200 curve ({rel(curve_path)}) "
                   "is not here yet: the predicted column says so.\n")  # fmt: skip
    body = []
    for name, doc in reports:
        for tv in TVS:
            row = spec_row(doc, "mentored", 0.7, tv)
            if row is None:
                continue
            q = row.get("quality") or {}
            base, nll = q.get("target_nll_baseline"), q.get("target_nll")
            pred = predicted(row, curve)
            body.append([
                name, num(tv, ".2f"), pct(row.get("acceptance")),
                num(row.get("mean_accepted_length"), ".2f"), num(nll), num(base),
                num(None if nll is None or base is None else nll - base, "+.3f"),
                num(q.get("mean_tv")), pct(q.get("task_success")),
                "not yet measured" if curve is None else (
                    "-" if pred is None else f"{pred[0]:.2f}x (k={pred[1]}: {pred[2]:.2f}x)"),
            ])  # fmt: skip
    out += table(["Prompt", "TV budget", "Acceptance", "Accepted per round", "NLL/token",
                  "Target-only NLL/token", "NLL given up", "Mean TV", "Task success",
                  "Predicted H200 speedup"], body)  # fmt: skip

    summary = []
    for tv in TVS:
        rows = [r for _, d in reports if (r := spec_row(d, "mentored", 0.7, tv)) is not None]
        if not rows:
            continue
        deltas = [r["quality"]["target_nll"] - r["quality"]["target_nll_baseline"] for r in rows
                  if r["quality"].get("target_nll") is not None
                  and r["quality"].get("target_nll_baseline") is not None]  # fmt: skip
        tasks = [r["quality"]["task_success"] for r in rows
                 if r["quality"].get("task_success") is not None]  # fmt: skip
        accs = [r["acceptance"] for r in rows if r.get("acceptance") is not None]
        preds = [p[0] for r in rows if (p := predicted(r, curve)) is not None]
        summary.append([num(tv, ".2f"), str(len(rows)), pct(statistics.mean(accs) if accs else None),
                        num(statistics.mean(deltas) if deltas else None, "+.3f"),
                        pct(statistics.mean(tasks) if tasks else None),
                        "not yet measured" if curve is None else
                        num(statistics.mean(preds) if preds else None, ".2f")])  # fmt: skip
    out.append(f"{h}# Speed against quality given up (the seed's table), over the prompts\n")
    out.append("Means over the prompts measured at each budget (unweighted).\n")
    out += table(["TV budget", "Prompts", "Mean acceptance", "Mean NLL given up",
                  "Mean task success", "Mean predicted H200 speedup"], summary)  # fmt: skip

    out.append(f"{h}# Task outputs\n")
    for name, doc in reports:
        checked = doc["protocol"].get("task_check")
        if not checked:
            continue
        out.append(f"**{name}** (check: {checked})\n")
        for r in rows_of(doc):
            q = r.get("quality") or {}
            passed = q.get("task_passed") or []
            text = ((r.get("sample_output") or {}).get("text") or "").split("<|im_end|>")[0]
            out.append(f"- `{r['name']}`: passed {sum(passed)} of {len(passed)}; seed "
                       f"{(r.get('sample_output') or {}).get('seed')}: {json.dumps(text[:300])}")  # fmt: skip
        out.append("")

    from core.bench import prompt_names

    missing = [n for n in prompt_names() if n not in {name for name, _ in reports}]
    if missing:
        out.append(f"{h}# Not measured yet\n")
        out.append("Shipped prompts with no report in the data folder (run_cpu.sh PROMPT adds "
                   f"one): {', '.join(missing)}.\n")  # fmt: skip
    out.append(f"{h}# Commands\n")
    out.append("```")
    for _, doc in reports:
        out.append(scrub(doc["protocol"].get("command", "?")))
    out.append("```\n")
    if curve is not None:
        out.append(f"Curve: {curve_path.name} ({curve.device_name or curve.backend}).\n")
    return "\n".join(out).rstrip() + "\n"


def load_sweeps(folder: Path) -> list[dict[str, Any]]:
    """Every sweep in the folder (its .json(.xz) files and those inside .tgz parts), merged per
    grid (the draft sources and policies it ran): the main sweep, the lookup/hybrid one, ..."""
    import tarfile

    from core.sweep.run import merge_sweeps

    docs: list[dict[str, Any]] = []

    seen: set[str] = set()

    def take(text: str) -> None:  # a part both unpacked and kept as .tgz counts once
        doc = json.loads(text)
        if isinstance(doc, dict) and doc.get("kind") == "specdec-tui sweep":
            key = json.dumps([doc.get("command"), (doc.get("environment") or {}).get("timestamp"),
                              doc.get("blocks_done")])  # fmt: skip
            if key not in seen:
                seen.add(key)
                docs.append(doc)

    for path in glob_json(folder, recursive=True):
        take(read_text(path))
    for path in sorted(folder.rglob("*.tgz")):
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                if m.isfile() and m.name.endswith(".json"):
                    f = tar.extractfile(m)
                    if f is not None:
                        take(f.read().decode("utf-8"))
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for d in docs:
        g = d.get("grid") or {}
        groups.setdefault((tuple(g.get("sources", [])), tuple(g.get("policies", []))), []).append(d)
    return [merge_sweeps(v) for v in groups.values()]


def big_curves() -> list[tuple[str, Any]]:
    """(label, curve) for each bigger target's H200 curve found in the data folder."""
    from core.dispatch import read_curve_file

    return [(label, read_curve_file(path)) for label, path in BIG_CURVES if path.is_file()]


def predicted_cell(cell: dict[str, Any], curve: Any) -> float | None:
    """The speedup core.cost.prediction expects on `curve`'s machine for a model-drafting cell's
    own per-position acceptance, at its fixed k (cost-aware: the best k up to its k_max)."""
    accept = cell.get("per_position_acceptance") or []
    applied = cell.get("apply") or {}
    if cell.get("kind") != "speculative" or cell.get("source") != "model" or not accept:
        return None
    from core.cost.prediction import RoundCost, predict

    c = curve.for_sampling(float(cell.get("temperature") or 0.0) == 0.0)
    cost = RoundCost.from_curve(c, "auto")
    k = int(applied.get("k") or 1)
    lo, hi = (k, k) if applied.get("policy") == "fixed" else (0, int(applied.get("k_max") or k))
    hi = min(hi, max(c.rows))
    if lo > hi:
        return None
    return predict(cost, accept, bonus=True, k_max=hi, k_min=lo).best.speedup


def at_temperature(doc: dict[str, Any], t: float) -> dict[str, Any]:
    """The sweep with only its cells at temperature t (a cell's name repeats across them)."""
    return {**doc, "cells": [c for c in doc.get("cells", [])
                             if abs(float(c.get("temperature") or 0.0) - t) < 1e-9]}  # fmt: skip


def _cell(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((c for c in doc.get("cells", []) if c["name"] == name), None)


def _tv_name(doc: dict[str, Any], tv: float) -> str:
    policies = (doc.get("grid") or {}).get("policies") or ["fixed-8"]
    return f"{policies[0]} TV={tv:g}"


def headline(doc: dict[str, Any], curves: list[tuple[str, Any]]) -> str:
    """The real pair's measured headline, one paragraph computed from the merged sweep: what TV
    0.5 and TV 1 buy (speedup with its paired range) and cost (NLL given up, mean TV, task
    success) against lossless TV 0, draft-only and target-only. README.md quotes it verbatim
    (tests/docs/test_real_pair_page.py holds both to the data)."""
    where = (doc.get("environment") or {}).get("device_name") or "the GPU"
    p = doc.get("protocol") or {}
    # The budget only matters when sampling: the highest temperature the sweep ran.
    temps = [max((doc.get("grid") or {}).get("temperatures") or [0.7])]
    doc = at_temperature(doc, temps[0])
    base, draft = _cell(doc, "target-only"), _cell(doc, "draft-only")
    tv0, half, full = (_cell(doc, _tv_name(doc, tv)) for tv in (0.0, 0.5, 1.0))
    if None in (base, draft, tv0, half, full):
        return "The sweep lacks target-only, draft-only or a TV 0, 0.5 or 1 cell: no headline."
    assert base is not None and draft is not None and tv0 is not None
    assert half is not None and full is not None

    def cost(c: dict[str, Any]) -> str:
        return (f"acceptance {pct(c.get('acceptance'))}, NLL given up {num(c.get('nll_delta'), '+.3f')} "
                f"nats/token, mean TV {num(c.get('mean_tv'))}")

    def pred(c: dict[str, Any]) -> str:
        parts = [f"{x:.2f}x with a {label}" for label, cv in curves
                 if (x := predicted_cell(c, cv)) is not None]
        return " and ".join(parts) if parts else "-"

    spec = [c for c in doc.get("cells", []) if c.get("kind") == "speculative"]
    best = max(spec, key=lambda c: c.get("speedup") or 0.0)
    above = [(name, c["name"], x) for name in doc.get("prompts") or [] for c in spec
             if (x := ((c.get("per_prompt") or {}).get(name) or {})).get("speedup") is not None
             and x["speedup"] > 1.0]  # fmt: skip
    faster_text = ("On single prompts a budget does pass 1.00x: " + "; ".join(
        f"{name} {cell} {speed_of(x)}" for name, cell, x in above) + ". "
        if above else "No prompt's median passes 1.00x at any budget. ")  # fmt: skip
    checked = [name for name in doc.get("prompts") or []
               if ((base.get("per_prompt") or {}).get(name) or {}).get("task_success") is not None]
    rates = {c["name"]: c.get("task_success") for c in doc.get("cells", [])}
    per = "; ".join(f"{name} {pct(base['per_prompt'][name]['task_success'])}" for name in checked)
    task_text = (f"Task success does not tell the cells apart: {pct(base.get('task_success'))} in "
                 f"every cell, target-only's per checked prompt {per}. "
                 if checked and len(set(rates.values())) == 1 else
                 "Task success: " + ", ".join(f"{k} {pct(v)}" for k, v in rates.items()) + ". "
                 if checked else "")  # fmt: skip
    noise = (f"; TV 0 keeps the target's distribution, so its {num(tv0.get('nll_delta'), '+.3f')} "
             "is the spread of one sampled text per seed, the scale below which the NLL "
             "differences here are noise" if tv0.get("mean_tv") == 0.0 else "")  # fmt: skip
    verdict = ("no TV budget makes this pair faster" if (best.get("speedup") or 0.0) <= 1.0
               else "a TV budget does make this pair faster")  # fmt: skip
    n = len(doc.get("prompts") or [])
    return (f"Measured on {where} ({n} prompts, T = {', '.join(f'{t:g}' for t in temps)}, "
            f"{p.get('tokens')} tokens, {p.get('seeds')} seeds; speedup over target-only: the "
            "geometric mean over prompts of each prompt's median ratio, in brackets the range of "
            f"the paired per-request ratios): TV 0.5 runs at {speed_of(half)} ({cost(half)}) and "
            f"TV 1 at {speed_of(full)} ({cost(full)}), against lossless TV 0 at {speed_of(tv0)} "
            f"({cost(tv0)}){noise}. {task_text}"
            f"Draft-only runs at {speed_of(draft)}: a 0.5B request takes about "
            f"{1 / draft['speedup']:.2f} of the 1.5B's time, so a draft step costs nearly a "
            f"target step and, over the prompts, {verdict} (the best, {best['name']}, "
            f"{speed_of(best)}). {faster_text}The same per-position acceptance "
            f"would predict, at TV 1, {pred(full)} target (TV 0.5: {pred(half)}; predicted, not "
            "measured).")


def speed_of(c: dict[str, Any]) -> str:
    from core.sweep.report import speed_text

    return speed_text(c)


def per_prompt_lines(doc: dict[str, Any]) -> list[str]:
    """per_prompt_table for each temperature the sweep ran."""
    temps = sorted((doc.get("grid") or {}).get("temperatures") or [])
    return [line for t in temps for line in per_prompt_table(at_temperature(doc, t), t)]


def per_prompt_table(doc: dict[str, Any], t: float) -> list[str]:
    """Each prompt's own numbers behind the pooled cells: the speedup (its median ratio, the
    paired range), then acceptance and NLL given up per TV budget, and task success where the
    prompt has a check, so a reader sees which prompts carry a pooled number."""
    cells = doc.get("cells", [])
    base = _cell(doc, "target-only")
    others = [c for c in cells if c["name"] != "target-only"]
    out = [f"### Per prompt, T = {t:g}\n",
           "Speedup over target-only on each prompt: target-only's median E2E over the cell's, "
           "in brackets the paired per-request ratios' range; target-only's median E2E in "
           "seconds.\n"]  # fmt: skip
    rows = []
    for name in doc.get("prompts") or []:
        b = ((base or {}).get("per_prompt") or {}).get(name) or {}
        rows.append([name, num(b.get("median_e2e_s"), ".2f") + " s",
                     *(speed_of(((c.get("per_prompt") or {}).get(name)) or {}) for c in others)])  # fmt: skip
    out += table(["prompt", "target-only E2E", *(c["name"] for c in others)], rows)
    spec = [c for c in others if c.get("kind") == "speculative"]
    out.append("Acceptance / NLL given up (nats per token against target-only's text of the same "
               "seeds), per prompt:\n")  # fmt: skip
    rows = []
    for name in doc.get("prompts") or []:
        pp = [((c.get("per_prompt") or {}).get(name)) or {} for c in spec]
        d = ((_cell(doc, "draft-only") or {}).get("per_prompt") or {}).get(name) or {}
        rows.append([name, num(d.get("nll_delta"), "+.3f"),
                     *(f"{pct(x.get('acceptance'))} / {num(x.get('nll_delta'), '+.3f')}" for x in pp)])  # fmt: skip
    out += table(["prompt", "draft-only NLL given up", *(c["name"] for c in spec)], rows)
    checked = [n for n in doc.get("prompts") or []
               if ((base or {}).get("per_prompt") or {}).get(n, {}).get("task_success") is not None]
    if checked:
        out.append("Task success on the prompts with a check (share of the seeds' outputs that "
                   "passed):\n")  # fmt: skip
        rows = [[n, *(pct((((c.get("per_prompt") or {}).get(n)) or {}).get("task_success"))
                      for c in cells)] for n in checked]  # fmt: skip
        out += table(["prompt", *(c["name"] for c in cells)], rows)
    return out


# What issue 30 planned for the real pair on the H200, for the page to say what is missing.
PLANNED_TEMPERATURES = (0.0, 0.7)
PLANNED_SOURCES = ("model", "lookup", "hybrid")
PLANNED_PEERS = ("transformers-assisted", "transformers prompt lookup")


def not_run_lines(docs: list[dict[str, Any]]) -> list[str]:
    """What the plan held and no sweep in the data measured: temperatures, draft sources, the
    cost-aware policy, prompts, peers; computed from the merged sweeps, never written by hand."""
    from core.bench import prompt_names

    temps = {t for d in docs for t in (d.get("grid") or {}).get("temperatures", [])}
    sources = {s for d in docs for s in (d.get("grid") or {}).get("sources", [])}
    policies = {x for d in docs for x in (d.get("grid") or {}).get("policies", [])}
    prompts = {x for d in docs for x in d.get("prompts") or []}
    engines = {r.get("engine") for d in docs for b in d.get("blocks") or []
               for r in ((b.get("report") or {}).get("results") or [])} - {None, "specdec-tui"}
    missing = []
    if gone := [t for t in PLANNED_TEMPERATURES if t not in temps]:
        missing.append("temperature " + ", ".join(f"{t:g}" for t in gone)
                       + (" (greedy)" if 0.0 in gone else ""))  # fmt: skip
    if gone := [s for s in PLANNED_SOURCES if s not in sources]:
        missing.append("the " + " and ".join(gone) + " draft sources")
    if "cost-aware" not in policies:
        missing.append("the cost-aware policy")
    if gone := [n for n in prompt_names() if n not in prompts]:
        missing.append("the prompt(s) " + ", ".join(gone))
    if not engines:
        missing.append("the peers (" + ", ".join(PLANNED_PEERS) + ")")
    if not missing:
        return []
    return ["## Not measured on the H200 yet\n",
            "Planned by issue 30 and absent from the sweeps in the data folder: "
            + "; ".join(missing) + ". docs/benchmarks/h200/real-pair-sweep-more.sh runs the "
            "lookup and hybrid rows (PART=A), the transformers peers (PART=B, C) and the "
            "cost-aware rows (PART=D); docs/benchmarks/h200/real-pair-sweep.sh the greedy "
            "blocks (PART=1, 2) and, with ONLY, a prompt left out.\n"]  # fmt: skip


def sweep_section(doc: dict[str, Any], curves: list[tuple[str, Any]], svg_name: str) -> list[str]:
    """One merged sweep: what ran, the cells with the predicted columns beside them, the
    recommendation, the frontier picture and the texts."""
    from core.sweep.report import (
        _positions,
        provenance_lines,
        recommendation_lines,
        recommended_ids,
        speed_text,
        texts_markdown,
    )

    g, p = doc.get("grid") or {}, doc.get("protocol") or {}
    env = doc.get("environment") or {}
    where = env.get("device_name") or env.get("backend") or "?"
    out = [f"## Measured on {where}: {', '.join(g.get('sources', []))} drafts, "
           f"{', '.join(g.get('policies', []))}\n"]  # fmt: skip
    if not doc.get("complete"):
        out.append(f"**Partial**: {doc.get('blocks_done')} of {doc.get('blocks_planned')} "
                   "blocks (prompt x temperature) finished in their calls.\n")  # fmt: skip
    out += provenance_lines(doc)
    out.append(f"{p.get('tokens')} new tokens per request (EOS ignored), {p.get('warmup')} "
               f"warm-up request(s) per cell and prompt, {p.get('invocations')} invocation(s) x "
               f"{p.get('seeds')} seeds; prompts: {', '.join(doc.get('prompts') or [])}. "
               "Speedup: target-only's median E2E over the cell's on the same prompt, the "
               "geometric mean over prompts, its range the paired per-request ratios (same "
               "seed, same invocation). NLL given up: the target's NLL per token of the cell's "
               "text minus target-only's, same seeds, mean over prompts. Task: share of the "
               "checked prompts' outputs whose check passed. The predicted columns are not "
               "measurements: the speedup core/cost/prediction.py expects for this row's "
               "measured per-position acceptance if the target were a 7B or a 72B on the "
               "H200 (their measured verify-cost curves, the 0.5B draft's step).\n")  # fmt: skip
    out.append(f"**What it says.** {headline(doc, curves)}\n")
    rec = recommended_ids(doc)
    labels = [label for label, _ in curves]
    out += table(["", "T", "cell", "measured speedup (min-max)", "acceptance",
                  "per-position acceptance", "NLL given up", "mean TV", "task",
                  *(f"predicted, {x} target" for x in labels)],
                 [[("**R**" if c["id"] in rec else "") + (" *" if c.get("on_front") else ""),
                   f"{c.get('temperature', 0):g}", c["name"], speed_text(c),
                   pct(c.get("acceptance")), _positions(c), num(c.get("nll_delta"), "+.3f"),
                   num(c.get("mean_tv")), pct(c.get("task_success")),
                   *(num(predicted_cell(c, cv), ".2f") + ("x" if predicted_cell(c, cv) else "")
                     for _, cv in curves)]
                  for c in doc.get("cells", [])])  # fmt: skip
    out.append("`*` on the Pareto front of its temperature; **R** the fastest cell within the "
               "bounds.\n")  # fmt: skip
    out += [f"- {line}" for line in recommendation_lines(doc)] + [""]
    out.append(f"![speed against NLL given up, measured on {where}]({svg_name})\n")
    out += per_prompt_lines(doc)
    out += ["#" + line if line.startswith("#") else line for line in texts_markdown(doc)]
    out.append("Commands (paths cut to file names):\n")
    out.append("```")
    out += [scrub(c) for c in doc.get("commands") or [] if c]
    out.append("```\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="the raw reports' folder")
    ap.add_argument("--curve", type=Path, default=CURVE, help="the H200 verify-cost curve")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--sweep", type=Path, default=SWEEP,
                    help="the H200 sweeps' folder (JSON files or the calls' .tgz parts)")  # fmt: skip
    args = ap.parse_args()
    data = args.data or max(DATA.glob("real-pair-cpu-*"), default=None)
    if data is None or not (reports := load_reports(data)):
        print(f"no bench reports in {data}", file=sys.stderr)
        return 2
    curve = None
    if args.curve.is_file():
        from core.dispatch import read_curve_file

        curve = read_curve_file(args.curve)
    sweeps = load_sweeps(args.sweep) if args.sweep.is_dir() else []
    text = page(reports, curve, args.curve, data, heading="##" if sweeps else "#")
    if sweeps:
        from core.sweep.report import display_spec, frontier_svg

        curves = big_curves()
        head = ["# What the TV budget gives up, on a real pair\n",
                "<!-- generated by docs/benchmarks/real-pair/make_page.py from the raw sweeps "
                f"in {rel(args.sweep)}/ and the CPU reports in {rel(data)}/; do not edit by "
                "hand -->\n",
                "Qwen2.5-Coder-1.5B-Instruct Q4_K_M drafted by Qwen2.5-Coder-0.5B-Instruct, "
                "the GGUFs `python3 docs/benchmarks/real-pair/fetch.py` fetches and checks "
                "against their sha256: "
                + "; ".join(f"{role} `{display_spec(str(d.get('spec', '')))}` sha256 `{d['sha256']}`"
                            for role, d in ((sweeps[0].get("models") or {}).get("identities")
                                            or {}).items()
                            if isinstance(d, dict) and d.get("sha256"))
                + ".\n"]  # fmt: skip
        for i, doc in enumerate(sweeps):
            svg = args.out.with_name(f"{args.out.stem}-frontier{'' if i == 0 else f'-{i + 1}'}.svg")
            where = (doc.get("environment") or {}).get("device_name") or "measured"
            svg.write_text(frontier_svg(doc, f"Speed against NLL given up ({where})"),
                           encoding="utf-8")  # fmt: skip
            head += sweep_section(doc, curves, svg.name)
        head += not_run_lines(sweeps)
        text = "\n".join(head) + "\n" + text
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} from {len(reports)} reports{' and the curve' if curve else ''}"
          f"{f' and {len(sweeps)} sweep(s)' if sweeps else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
