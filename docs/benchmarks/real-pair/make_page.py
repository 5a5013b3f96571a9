#!/usr/bin/env python3
"""Write docs/benchmarks/real-pair.md from the raw data of the real pair.

Two sections, each from its raw JSON only. The H200 section (when the data folder has sweep
files: `specdec-tui sweep --json`, written by docs/benchmarks/h200/real-pair-sweep.sh and
real-pair-sweep-more.sh): the cells measured there (speed with its paired range, acceptance,
NLL given up, TV per judged draft, task success), the frontier as an SVG beside the page, the fastest cell
within the bounds, the texts side by side, and, in columns of their own, the speedup the same
acceptance would predict with a 7B and a 72B target (the H200 curves measured on those shapes,
priced by core.cost.prediction); above them a headline paragraph computed from the cells
(README.md quotes it verbatim: tests/docs/test_real_pair_page.py), below them each prompt's own
numbers, and after the sweeps what issue 30 planned that no sweep measured. The CPU section: the bench reports of run_cpu.sh (acceptance,
the TV sweep, NLL, task success) with the speedup predicted from the H200's curve for these two
shapes. No machine's paths: models by file name and sha256, and the fetch command.

    PYTHONPATH=$PWD python3 docs/benchmarks/real-pair/make_page.py \\
        [--data docs/benchmarks/data/real-pair-cpu-DATE] [--sweep docs/benchmarks/data/h200-real-pair-judged]
        [--curve FILE] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "docs" / "benchmarks"))  # rawdata: the data folder is xz'd
from rawdata import glob_json, plain_name, read_text  # noqa: E402

DATA = ROOT / "docs" / "benchmarks" / "data"
CURVE = DATA / "h200-curve-qwen2.5-1.5b-0.5b.json.xz"
OUT = ROOT / "docs" / "benchmarks" / "real-pair.md"
# The sweeps the page shows: issue 55's, with every prompt checked, the copied and repetition
# measures and every seed's text (docs/benchmarks/h200/real-pair-judged.sh). The first sweep of
# the pair (issue 30, two prompts checked) stays raw in EARLIER; the page names it.
SWEEP = DATA / "h200-real-pair-judged"
EARLIER = DATA / "h200-real-pair-sweep"
# The H200 curves of bigger targets with the same 0.5B draft's shape (random weights of the
# real shapes): what this pair's agreement would buy where a draft step is cheap against a
# target step. 7B: the first edition's calibration; 72B: the third edition's bench.
BIG_CURVES = (("7B", DATA / "h200-calibrate.json.xz"),
              ("72B", DATA / "h200-2026-12-01c" / "key72-256.json.xz"))
TVS = (0.0, 0.25, 0.5, 0.75, 1.0)


def rel(path: Path) -> str:
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)


def num(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(r) + " |" for r in rows), ""]


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
             ) -> dict[str, Any] | None:
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
                     curve.t_verify(1))
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
         data: Path, heading: str = "#") -> str:
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
           f"{proto['nll_basis']}.\n"]

    out.append(f"{h}# Acceptance by position\n")
    out.append("P(draft i accepted | drafts 1..i-1 were), pooled over the seeds' rounds: greedy "
               "at T = 0, and the lossless rule (TV budget 0) at T = 0.7.\n")
    k = max((len(r.get("per_position_acceptance") or []) for _, d in reports for r in rows_of(d)),
            default=0)
    body = []
    for name, doc in reports:
        for label, row in (("T = 0, greedy", spec_row(doc, "greedy", 0.0)),
                           ("T = 0.7, lossless", spec_row(doc, "mentored", 0.7, 0.0))):
            if row is None:
                continue
            acc = row.get("per_position_acceptance") or []
            body.append([name, label, pct(row.get("acceptance")),
                         num(row.get("mean_accepted_length"), ".2f"),
                         *(pct(acc[i]) if i < len(acc) else "-" for i in range(k))])
    out += table(["Prompt", "Sampling", "Acceptance", "Accepted per round",
                  *(f"Position {i + 1}" for i in range(k))], body)

    out.append(f"{h}# The TV sweep at T = 0.7\n")
    out.append("Mentored rule, TV budget D (0 is lossless, 1 accepts every draft). NLL: the "
               "target's mean negative log-likelihood per token of the row's text; its "
               "target-only baseline has the same sampling and seeds. Mean TV: the per-step "
               "TV distance between what the row sampled from and the target. Task: share of "
               "outputs the prompt's check passed (checkable prompts only). Predicted H200 "
               "speedup: core.cost.prediction with the row's per-position acceptance at its k "
               "and the H200's curve for these shapes; best k in brackets.\n")
    n_scored = len(proto["seed_values"]) * proto["tokens"]
    out.append(f"Each row's NLL is over {n_scored} generated tokens ({len(proto['seed_values'])} "
               f"seed(s) x {proto['tokens']}): one sampled text per seed, so a difference of a "
               "few tenths between rows can be the sample, not the budget.\n")
    if curve is None:
        out.append(f"The H200 curve ({rel(curve_path)}) "
                   "is not here yet: the predicted column says so.\n")
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
            ])
    out += table(["Prompt", "TV budget", "Acceptance", "Accepted per round", "NLL/token",
                  "Target-only NLL/token", "NLL given up", "Mean TV", "Task success",
                  "Predicted H200 speedup"], body)

    summary = []
    for tv in TVS:
        rows = [r for _, d in reports if (r := spec_row(d, "mentored", 0.7, tv)) is not None]
        if not rows:
            continue
        deltas = [r["quality"]["target_nll"] - r["quality"]["target_nll_baseline"] for r in rows
                  if r["quality"].get("target_nll") is not None
                  and r["quality"].get("target_nll_baseline") is not None]
        tasks = [r["quality"]["task_success"] for r in rows
                 if r["quality"].get("task_success") is not None]
        accs = [r["acceptance"] for r in rows if r.get("acceptance") is not None]
        preds = [p[0] for r in rows if (p := predicted(r, curve)) is not None]
        summary.append([num(tv, ".2f"), str(len(rows)), pct(statistics.mean(accs) if accs else None),
                        num(statistics.mean(deltas) if deltas else None, "+.3f"),
                        pct(statistics.mean(tasks) if tasks else None),
                        "not yet measured" if curve is None else
                        num(statistics.mean(preds) if preds else None, ".2f")])
    out.append(f"{h}# Speed against quality given up (the seed's table), over the prompts\n")
    out.append("Means over the prompts measured at each budget (unweighted).\n")
    out += table(["TV budget", "Prompts", "Mean acceptance", "Mean NLL given up",
                  "Mean task success", "Mean predicted H200 speedup"], summary)

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
                       f"{(r.get('sample_output') or {}).get('seed')}: {json.dumps(text[:300])}")
        out.append("")

    from core.bench import prompt_names

    missing = [n for n in prompt_names() if n not in {name for name, _ in reports}]
    if missing:
        out.append(f"{h}# Not measured yet\n")
        out.append("Shipped prompts with no report in the data folder (run_cpu.sh PROMPT adds "
                   f"one): {', '.join(missing)}.\n")
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
                              doc.get("blocks_done")])
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
    from core.sweep.judge import rejudge

    # Judged again from what the files kept, so the page reads the checks, the copied and
    # repetition measures and the recommendation's bounds of the code that renders it.
    return [rejudge(merge_sweeps(v)) for v in groups.values()]


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
                             if abs(float(c.get("temperature") or 0.0) - t) < 1e-9]}


def _cell(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((c for c in doc.get("cells", []) if c["name"] == name), None)


def _tv_name(doc: dict[str, Any], tv: float) -> str:
    policies = (doc.get("grid") or {}).get("policies") or ["fixed-8"]
    return f"{policies[0]} TV={tv:g}"


def headline(doc: dict[str, Any], curves: list[tuple[str, Any]]) -> str:
    """The real pair's measured headline, one paragraph computed from the merged sweep: what TV
    0.5 and TV 1 buy (speedup with its paired range) and cost (NLL given up, TV per judged draft, task
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
                f"nats/token, TV per judged draft {num(c.get('mean_tv'))}")

    def pred(c: dict[str, Any]) -> str:
        parts = [f"{x:.2f}x with a {label}" for label, cv in curves
                 if (x := predicted_cell(c, cv)) is not None]
        return " and ".join(parts) if parts else "-"

    spec = [c for c in doc.get("cells", []) if c.get("kind") == "speculative"]
    best = max(spec, key=lambda c: c.get("speedup") or 0.0)
    above = [(name, c["name"], x) for name in doc.get("prompts") or [] for c in spec
             if (x := ((c.get("per_prompt") or {}).get(name) or {})).get("speedup") is not None
             and x["speedup"] > 1.0]
    faster_text = ("On single prompts a budget does pass 1.00x: " + "; ".join(
        f"{name} {cell} {speed_of(x)}" for name, cell, x in above) + ". "
        if above else "No prompt's median passes 1.00x at any budget. ")
    task_text = task_sentence(doc, base)
    noise = (f"; TV 0 keeps the target's distribution, so its {num(tv0.get('nll_delta'), '+.3f')} "
             "is the spread of one sampled text per seed, the scale below which the NLL "
             "differences here are noise" if tv0.get("mean_tv") == 0.0 else "")
    verdict = ("no TV budget makes this pair faster" if (best.get("speedup") or 0.0) <= 1.0
               else "a TV budget does make this pair faster")
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


def _cut_answers(doc: dict[str, Any], prompt: str) -> tuple[int, int]:
    """(answers with no end of turn within the token limit, answers) on `prompt` over every
    cell and seed: an answer is the text before the first EOS, so one equal to the whole text
    ran into the limit (a check of a cut module or paragraph cannot pass)."""
    cut = total = 0
    t = max((doc.get("grid") or {}).get("temperatures") or [0.7])
    cells = {c["name"]: c for c in at_temperature(doc, t).get("cells", [])}
    for block in doc.get("texts") or []:
        if block.get("prompt") != prompt or abs(float(block.get("temperature") or 0) - t) > 1e-9:
            continue
        for row in block.get("rows") or []:
            answers = (((cells.get(row.get("name")) or {}).get("per_prompt") or {}).get(prompt)
                       or {}).get("answers") or []
            texts = sorted(row.get("texts") or [], key=lambda x: x.get("seed", 0))
            for a, x in zip(answers, texts, strict=False):
                total += 1
                cut += a == "".join(x.get("pieces") or [])
    return cut, total


def task_sentence(doc: dict[str, Any], base: dict[str, Any]) -> str:
    """What the checks say: each cell's task success, then which prompts tell the cells apart
    (passes per cell, of the seeds), which pass everywhere and which fail everywhere, with how
    many of the latter's answers the token limit cut before an end of turn."""
    cells = doc.get("cells", [])
    checked = [n for n in doc.get("prompts") or []
               if ((base.get("per_prompt") or {}).get(n) or {}).get("task_success") is not None]
    if not checked:
        return ""
    passed = {n: [((c.get("per_prompt") or {}).get(n) or {}).get("task_passed") or [] for c in cells]
              for n in checked}
    every = [n for n in checked if all(all(p) for p in passed[n])]
    never = [n for n in checked if not any(any(p) for p in passed[n])]
    differ = [n for n in checked if n not in every and n not in never]
    out = "Task success: " + ", ".join(f"{c['name']} {pct(c.get('task_success'))}" for c in cells)
    if differ:
        out += "; the cells differ on " + "; ".join(
            f"{n} (seeds passed: " + ", ".join(
                f"{c['name']} {sum(p)} of {len(p)}" for c, p in zip(cells, passed[n], strict=True))
            + ")" for n in differ)
    else:
        out += "; no prompt's check tells the cells apart"
    if every:
        out += f"; {', '.join(every)} passed in every cell and seed"
    if never:
        cuts = [(n, *_cut_answers(doc, n)) for n in never]
        out += (f"; {', '.join(never)} failed in every cell and seed (answers the "
                f"{(doc.get('protocol') or {}).get('tokens')}-token limit cut before an end of "
                "turn: " + ", ".join(f"{n} {c} of {t}" for n, c, t in cuts) + ")")
    return out + ". "


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
           "seconds.\n"]
    rows = []
    for name in doc.get("prompts") or []:
        b = ((base or {}).get("per_prompt") or {}).get(name) or {}
        rows.append([name, num(b.get("median_e2e_s"), ".2f") + " s",
                     *(speed_of(((c.get("per_prompt") or {}).get(name)) or {}) for c in others)])
    out += table(["prompt", "target-only E2E", *(c["name"] for c in others)], rows)
    spec = [c for c in others if c.get("kind") == "speculative"]
    out.append("Acceptance / NLL given up (nats per token against target-only's text of the same "
               "seeds), per prompt:\n")
    rows = []
    for name in doc.get("prompts") or []:
        pp = [((c.get("per_prompt") or {}).get(name)) or {} for c in spec]
        d = ((_cell(doc, "draft-only") or {}).get("per_prompt") or {}).get(name) or {}
        rows.append([name, num(d.get("nll_delta"), "+.3f"),
                     *(f"{pct(x.get('acceptance'))} / {num(x.get('nll_delta'), '+.3f')}" for x in pp)])
    out += table(["prompt", "draft-only NLL given up", *(c["name"] for c in spec)], rows)
    checked = [n for n in doc.get("prompts") or []
               if ((base or {}).get("per_prompt") or {}).get(n, {}).get("task_success") is not None]
    if checked:
        out.append("Task success on the prompts with a check (share of the seeds' outputs that "
                   "passed):\n")
        rows = [[n, *(pct((((c.get("per_prompt") or {}).get(n)) or {}).get("task_success"))
                      for c in cells)] for n in checked]
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
                       + (" (greedy)" if 0.0 in gone else ""))
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
            "blocks (PART=1, 2) and, with ONLY, a prompt left out.\n"]


# The prompt a TV step's passage comes from when no check tells the cells apart: the seed's own
# (its story is where the seed read what a budget changed).
SEED_PROMPT = "creative-seed-vault"
QUOTE_BEFORE, QUOTE_AFTER = 160, 320  # characters of shared text, then of each continuation


def _tv_steps(doc: dict[str, Any]) -> tuple[float, dict[float, dict[str, Any]]]:
    """The sampled temperature and, per TV budget, its cell of the grid's first policy."""
    t = max((doc.get("grid") or {}).get("temperatures") or [0.7])
    policy = ((doc.get("grid") or {}).get("policies") or [None])[0]
    steps: dict[float, dict[str, Any]] = {}
    for c in at_temperature(doc, t).get("cells", []):
        if c.get("kind") == "speculative" and c.get("tv") is not None \
                and c.get("policy") == policy:
            steps.setdefault(float(c["tv"]), c)
    return t, steps


class Departure(NamedTuple):
    """Where one cell's text of one seed first leaves target-only's text of that seed (a tuple:
    the script is loaded by path, where a dataclass cannot find its module)."""

    cell: dict[str, Any]
    prompt: str
    seed: int
    at: int | None  # the first differing token (characters for an old file); None: same text
    unit: str  # "token" or "character"
    shared: str  # the text both wrote before it
    theirs: str  # target-only's text from there
    mine: str  # the cell's text from there
    base_check: bool | None
    check: bool | None


def _seed_texts(row: dict[str, Any]) -> dict[int, tuple[list[int], str]]:
    """A text row's first text per seed: (ids, text); an old row (one text, no ids): ([], text)."""
    from core.bench.texts import from_dicts

    out: dict[int, tuple[list[int], str]] = {}
    for t in sorted(from_dicts(row.get("texts")), key=lambda t: min(t.invocations, default=0)):
        out.setdefault(t.seed, (list(t.ids), t.text))
    if not out and isinstance(row.get("text"), str):
        out[int(row.get("seed") or 0)] = ([], row["text"])
    return out


def _passed(cell: dict[str, Any], prompt: str, seeds: list[int], seed: int) -> bool | None:
    passed = (((cell.get("per_prompt") or {}).get(prompt) or {}).get("task_passed")) or []
    i = seeds.index(seed) if seed in seeds else len(passed)
    return bool(passed[i]) if i < len(passed) else None


def all_departures(doc: dict[str, Any]) -> dict[float, list[Departure]]:
    """Per TV step of the sampled temperature (the grid's first policy), every prompt and seed:
    where the cell's text first leaves target-only's text of the same seed (by token ids; by
    characters where an old file kept no ids)."""
    t, steps = _tv_steps(doc)
    base_cell = _cell(at_temperature(doc, t), "target-only") or {}
    out: dict[float, list[Departure]] = {tv: [] for tv in steps}
    for block in doc.get("texts") or []:
        if abs(float(block.get("temperature") or 0.0) - t) > 1e-9:
            continue
        prompt = block.get("prompt", "")
        rows = {r.get("name"): r for r in block.get("rows") or []}
        base = _seed_texts(rows.get(block.get("baseline") or "target-only") or {})
        seeds = sorted(base)
        for tv, cell in steps.items():
            for seed, (ids, text) in sorted(_seed_texts(rows.get(cell["name"]) or {}).items()):
                if seed not in base:
                    continue
                b_ids, b_text = base[seed]
                if ids and b_ids:
                    i = _first_difference(ids, b_ids)
                    pieces = len(_piece_text(block, cell["name"], seed, i))
                    cut, unit = pieces, "token"
                else:
                    i = _first_difference(text, b_text)
                    cut, unit = (i or 0), "character"
                out[tv].append(Departure(
                    cell, prompt, seed, i, unit, text[:cut] if i is not None else text,
                    b_text[cut:] if i is not None else "", text[cut:] if i is not None else "",
                    _passed(base_cell, prompt, seeds, seed), _passed(cell, prompt, seeds, seed)))
    return out


def _first_difference(a: Any, b: Any) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _piece_text(block: dict[str, Any], name: str, seed: int, n: int | None) -> str:
    """The text of a row's first n tokens for `seed` (its pieces joined)."""
    from core.bench.texts import from_dicts

    row = next((r for r in block.get("rows") or [] if r.get("name") == name), {})
    mine = [t for t in from_dicts(row.get("texts")) if t.seed == seed]
    if not mine or n is None:
        return ""
    first = min(mine, key=lambda t: min(t.invocations, default=0))
    return "".join((first.pieces or [])[:n])


def departures(doc: dict[str, Any]) -> list[Departure]:
    """One passage per TV step: the first (in prompt order, then seed) whose check target-only's
    text passed and the cell's failed, so the departure cost the task; else the seed's prompt
    (SEED_PROMPT) at its first seed that departs; else the first that departs at all."""
    out = []
    for _, deps in sorted(all_departures(doc).items()):
        cands = [d for d in deps if d.at is not None]
        lost = [d for d in cands if d.base_check is True and d.check is False]
        seed_prompt = [d for d in cands if d.prompt == SEED_PROMPT]
        if cands:
            out.append((lost or seed_prompt or cands)[0])
    return out


def departure_table(doc: dict[str, Any]) -> list[str]:
    """Per TV step, over every prompt and seed: how many texts are target-only's exactly, where
    the others first leave it (median and range), and how many lost a check target-only's text
    of that seed passed (and won one it failed)."""
    rows = []
    for _, deps in sorted(all_departures(doc).items()):
        if not deps:
            continue
        at = [d.at for d in deps if d.at is not None]
        lost = sum(d.base_check is True and d.check is False for d in deps)
        won = sum(d.base_check is False and d.check is True for d in deps)
        rows.append([deps[0].cell["name"], str(len(deps)), str(len(deps) - len(at)),
                     f"{statistics.median(at):g} ({min(at)}-{max(at)}) {deps[0].unit}s"
                     if at else "-", f"{lost} / {won}"])
    if not rows:
        return []
    return ["Over every prompt and seed, each TV step's text against target-only's of the same "
            "seed: how many are target-only's exactly, where the others first leave it (median, "
            "in brackets the range), and how many lost a check target-only's text passed / won "
            "one it failed:\n",
            *table(["cell", "texts", "same as target-only", "first leaves it at",
                    "checks lost / won"], rows)]


def _fence(text: str) -> list[str]:
    """A text as a fenced block no backtick run inside it can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return [bar + "text", text, bar]


def departure_lines(doc: dict[str, Any]) -> list[str]:
    """The passages of `departures`, quoted: the text both share just before the departure,
    then how target-only's text goes on and how the cell's does (same seed)."""
    found = departures(doc)
    if not found:
        return []
    out = ["### Where each TV step's text first leaves target-only's\n",
           "The seed read its result: the same seed's text at each TV budget beside the target's. "
           "For each TV step, one passage where that cell's text first leaves target-only's "
           "(same prompt, same seed): the first one in which target-only's text passed the "
           "prompt's check and the cell's failed; where none did, the seed's own prompt "
           f"({SEED_PROMPT}). TV 0 is lossless: its text is another draw from the target's own "
           "distribution, so its departure is the sampler's, not the budget's.\n",
           *departure_table(doc)]
    for d in found:
        check = ("" if d.base_check is None or d.check is None else
                 f"; check: target-only's text {'passed' if d.base_check else 'failed'}, "
                 f"this cell's {'passed' if d.check else 'failed'}")
        where = f"at {d.unit} {d.at}" if d.shared else f"from its first {d.unit}"
        out.append(f"**TV = {d.cell['tv']:g}** ({d.cell['name']}; {d.prompt}, seed {d.seed}; "
                   f"leaves target-only's text {where}{check}).\n")
        if d.shared:
            out.append("Shared text just before:\n")
            out += _fence(("…" if len(d.shared) > QUOTE_BEFORE else "") + d.shared[-QUOTE_BEFORE:])
            out.append("")
        out.append("target-only goes on:\n")
        out += _fence(d.theirs[:QUOTE_AFTER] + ("…" if len(d.theirs) > QUOTE_AFTER else ""))
        out.append(f"\n{d.cell['name']} goes on:\n")
        out += _fence(d.mine[:QUOTE_AFTER] + ("…" if len(d.mine) > QUOTE_AFTER else ""))
        out.append("")
    return out


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
           f"{', '.join(g.get('policies', []))}\n"]
    if not doc.get("complete"):
        out.append(f"**Partial**: {doc.get('blocks_done')} of {doc.get('blocks_planned')} "
                   "blocks (prompt x temperature) finished in their calls.\n")
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
               "H200 (their measured verify-cost curves, the 0.5B draft's step).\n")
    out.append(f"**What it says.** {headline(doc, curves)}\n")
    rec = recommended_ids(doc)
    labels = [label for label, _ in curves]
    out += table(["", "T", "cell", "measured speedup (min-max)", "acceptance",
                  "per-position acceptance", "NLL given up", "TV per judged draft", "task", "copied",
                  "repeated 4-grams", *(f"predicted, {x} target" for x in labels)],
                 [[("**R**" if c["id"] in rec else "") + (" *" if c.get("on_front") else ""),
                   f"{c.get('temperature', 0):g}", c["name"], speed_text(c),
                   pct(c.get("acceptance")), _positions(c), num(c.get("nll_delta"), "+.3f"),
                   num(c.get("mean_tv")), pct(c.get("task_success")), pct(c.get("copied")),
                   pct(c.get("repetition")),
                   *(num(predicted_cell(c, cv), ".2f") + ("x" if predicted_cell(c, cv) else "")
                     for _, cv in curves)]
                  for c in doc.get("cells", [])])
    out.append("`*` on the Pareto front of its temperature; **R** the fastest cell within the "
               "bounds.\n")
    out += [f"- {line}" for line in recommendation_lines(doc)] + [""]
    out.append(f"![speed against NLL given up, measured on {where}]({svg_name})\n")
    out += per_prompt_lines(doc)
    out += departure_lines(doc)
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
                    help="the H200 sweeps' folder (JSON files or the calls' .tgz parts)")
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
                + ".\n"]
        for i, doc in enumerate(sweeps):
            svg = args.out.with_name(f"{args.out.stem}-frontier{'' if i == 0 else f'-{i + 1}'}.svg")
            where = (doc.get("environment") or {}).get("device_name") or "measured"
            svg.write_text(frontier_svg(doc, f"Speed against NLL given up ({where})"),
                           encoding="utf-8")
            head += sweep_section(doc, curves, svg.name)
        head += not_run_lines(sweeps)
        if EARLIER.is_dir() and EARLIER.resolve() != args.sweep.resolve():
            head.append("The pair's first H200 sweep (issue 30: eight prompts, two of them "
                        "checked, no copied or repetition measure, one text per cell kept) is "
                        f"raw in {rel(EARLIER)}/; this page showed it before the sweep above "
                        "replaced it (the page's history has its numbers).\n")
        text = "\n".join(head) + "\n" + text
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} from {len(reports)} reports{' and the curve' if curve else ''}"
          f"{f' and {len(sweeps)} sweep(s)' if sweeps else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
