"""Every table of docs/benchmarks/*.md, rendered from the raw JSON beside it (issue 21).

A page marks each table it generates, and each number of its prose that quotes the data:

    <!-- generated: NAME from data/FILE.json.xz[, data/OTHER.json.xz] -->
    ...table, then one line naming its statistic and its data files...
    <!-- end generated -->

    ... hybrid gained <!-- value: data/FILE.json.xz | ROW | FIELD -->1.02x<!-- /value --> ...

NAME is a key of TABLES (a function of the loaded files), ROW a result's `name` in the bench
JSON, FIELD a key of FIELDS. Paths are relative to the page. `python docs/benchmarks/render.py`
rewrites every block and value in place; `--check` rewrites nothing and exits 1 naming each one
that differs from its data (tests/docs/test_benchmark_docs.py runs it).

Medians, minima and ratios are recomputed from each row's raw timings (`e2e_s`), not copied
from the bench's summary fields; every field is read with .get(), so a JSON with more keys
(provenance, say) renders the same. A new section: a JSON file in data/ (compressed there by
`python docs/benchmarks/rawdata.py compress`: the raw data is kept xz'd, rawdata.py says why),
a block in the page, and, if no existing NAME fits, one line in TABLES.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parents[1]))  # the project root, for core.bench.report
sys.path.insert(0, str(ROOT))  # rawdata, beside this file

from rawdata import load_json, read_text  # noqa: E402

from core.bench.report import md_table, num, pct, ratio, secs  # noqa: E402

BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w.-]+) from (?P<src>[^>]*?) -->\n)(?P<body>.*?)"
                   r"(<!-- end generated -->)", re.S)  # fmt: skip
VALUE = re.compile(r"(<!-- value: (?P<src>[^|>]+?) \| (?P<row>[^|>]+?) \| (?P<field>[\w.:-]+) -->)"
                   r"(?P<body>.*?)(<!-- /value -->)", re.S)  # fmt: skip

Doc = dict[str, Any]
Row = dict[str, Any]


# -- one row's numbers, from its raw timings ------------------------------------------------


def rows(doc: Doc) -> list[Row]:
    return list(doc.get("results") or [])


def row(doc: Doc, name: str) -> Row:
    for r in rows(doc):
        if r.get("name") == name:
            return r
    raise KeyError(f"no row {name!r} (rows: {', '.join(str(r.get('name')) for r in rows(doc))})")


def e2e(r: Row) -> list[float]:
    return [float(x) for x in r.get("e2e_s") or []]


def median(r: Row) -> float | None:
    xs = e2e(r)
    return statistics.median(xs) if xs else r.get("median_e2e_s")


def baseline(doc: Doc) -> Row | None:
    """Target-only of the same call: the first specdec-tui row that does not speculate."""
    for r in rows(doc):
        s = r.get("settings") or {}
        if s.get("mode") == "target-only" and r.get("engine", "specdec-tui") == "specdec-tui":
            return r
    return None


def speedup(doc: Doc, r: Row) -> float | None:
    """Target-only's median E2E over this row's median E2E."""
    b = baseline(doc)
    mb, mr = (median(b) if b else None), median(r)
    return mb / mr if mb and mr else None


def min_max(r: Row) -> str:
    xs = e2e(r)
    return f"{min(xs):.3f}-{max(xs):.3f}" if xs else "-"


def median_mm(r: Row) -> str:
    """Median E2E with the row's min-max beside it: '1.161 s (1.104-1.308)'."""
    return f"{secs(median(r))} ({min_max(r)})" if e2e(r) else secs(median(r))


def trace(r: Row) -> list[dict[str, Any]]:
    return list(r.get("trace") or [])


def per_round(r: Row, phase: str) -> float | None:
    """The traced request's phase over its rounds (ms a round)."""
    t, ph = trace(r), r.get("phase_ms") or {}
    return ph[phase] / len(t) if t and phase in ph else None


def per_draft_step(r: Row) -> float | None:
    """The traced request's draft phase over the drafts it proposed (ms a draft step)."""
    drafted = sum(x.get("proposed", 0) for x in trace(r))
    return (r.get("phase_ms") or {}).get("draft", 0.0) / drafted if drafted else None


def trace_median(r: Row, key: str) -> float | None:
    xs = [x[key] for x in trace(r) if key in x]
    return statistics.median(xs) if xs else None


def overhead(r: Row) -> float | None:
    """Median over seeds of traced / untraced E2E of the same seed, minus 1."""
    xs = r.get("traced_ratios") or []
    return statistics.median(xs) - 1.0 if xs else r.get("tracing_overhead")


def prediction(r: Row, key: str) -> Any:
    return (r.get("prediction") or {}).get(key)


def quality(r: Row, key: str) -> Any:
    return (r.get("quality") or {}).get(key)


def nll_delta(r: Row) -> float | None:
    a, b = quality(r, "target_nll"), quality(r, "target_nll_baseline")
    return a - b if a is not None and b is not None else None


def phase_pair(r: Row, phase: str) -> str:
    """The prediction's ms for a phase of the traced request, and the ms it measured."""
    x = (prediction(r, "phases") or {}).get(phase) or {}
    return (f"{x['predicted_ms']:.0f} / {x['measured_ms']:.0f}"
            if "predicted_ms" in x and "measured_ms" in x else "-")


def peer_ratio(doc: Doc, r: Row) -> float | None:
    """A peer row: its median E2E over the median of our row it is paired with."""
    ours = next((o for o in rows(doc) if o.get("name") == r.get("peer_of")), None)
    mo, mp = (median(ours) if ours else None), median(r)
    return mp / mo if mo and mp else None


def paired(r: Row) -> list[float]:
    return sorted(p["ratio"] for p in (r.get("paired_ratio") or {}).get("pairs") or [])


def source_cell(r: Row, source: str) -> str:
    """Rounds (share), drafts a round, acceptance, mean accepted length; '-' if unused."""
    v = (r.get("per_source") or {}).get(source)
    if not v or not v.get("rounds"):
        return "-"
    share = f"{v['share'] * 100:.0f}%" if v.get("share") is not None else "-"
    return (f"{v['rounds']} ({share}), {v['proposed'] / v['rounds']:.1f}, "
            f"{num(v.get('acceptance') and v['acceptance'] * 100, '.0f')}%, "
            f"{num(v.get('mean_accepted_length'), '.2f')}")



def seed_ratios(doc: Doc, r: Row) -> list[float]:
    """Target-only's E2E over this row's, seed by seed (the bench runs each seed's rows back to
    back, so the i-th request of both rows is the same seed, paired in time)."""
    b = baseline(doc)
    return sorted(x / y for x, y in zip(e2e(b) if b else [], e2e(r), strict=False) if y)


def seed_min_max(doc: Doc, r: Row) -> str:
    xs = seed_ratios(doc, r)
    return f"{xs[0]:.2f}-{xs[-1]:.2f}x" if xs else "-"


def target_share(r: Row) -> float | None:
    """The share of the row's rounds that were plain target steps (no draft proposed)."""
    return ((r.get("per_source") or {}).get("none") or {}).get("share")


def steps_vs_target_only(doc: Doc, r: Row) -> float | None:
    """The guard's own rate for plain target steps inside this row (median over requests; it
    learns from pipelined steps only) over target-only's median decode tok/s, same bench."""
    xs = [x for x in (((r.get("guard") or {}).get("none") or {}).get("measured_tok_s") or [])
          if x]
    b = baseline(doc)
    base = b.get("decode_tok_s") if b else None
    return statistics.median(xs) / base if xs and base else None


def decode_vs_steps(r: Row) -> float | None:
    """The row's median decode tok/s over the guard's rate for its own pipelined plain steps:
    below 1, part of the request's time is in no step the target arm measured."""
    xs = [x for x in (((r.get("guard") or {}).get("none") or {}).get("measured_tok_s") or [])
          if x]
    dec = r.get("decode_tok_s")
    return dec / statistics.median(xs) if xs and dec else None


SAID = {"asked: faster than target steps": "asked", "not asked: slower than target steps":
        "not asked", "measuring": "measuring",
        "asked: slower than target steps, within its rounds' spread": "asked within spread"}


def guard_counts(r: Row) -> str:
    """Per source, how many timed requests ended in each of the guard's decisions."""
    out = []
    for src, g in (r.get("guard") or {}).items():
        said = [SAID.get(str(x), str(x)) for x in g.get("guard") or [] if x]
        if src == "none" or not said:
            continue
        counts = {w: said.count(w) for w in ("asked", "not asked", "measuring") if w in said}
        counts |= {w: said.count(w) for w in said if w not in counts}
        out.append(f"{src}: " + ", ".join(f"{w} {n}" for w, n in counts.items()))
    return "; ".join(out) or "-"


Field = Callable[[Doc, Row], str]
FIELDS: dict[str, Field] = {
    "label": lambda d, r: str(r.get("label", r.get("name"))),
    "name": lambda d, r: f"`{r.get('name')}`",
    "acceptance": lambda d, r: pct(r.get("acceptance")),
    "rounds": lambda d, r: num(r.get("rounds_per_request"), ".1f"),
    "rounds0": lambda d, r: num(r.get("rounds_per_request"), ".0f"),
    "median": lambda d, r: secs(median(r)),
    "median_mm": lambda d, r: median_mm(r),
    "min_max": lambda d, r: f"{min_max(r)} s",
    "requests": lambda d, r: str(len(e2e(r))),
    "ratio": lambda d, r: ratio(speedup(d, r)),
    "predicted": lambda d, r: ratio(r.get("predicted_speedup")),
    "efficiency": lambda d, r: num(r.get("efficiency"), ".2f"),
    "decode": lambda d, r: ratio(prediction(r, "measured_decode_speedup")),
    "mean_k": lambda d, r: num(prediction(r, "mean_k"), ".1f"),
    "best_k": lambda d, r: (f"{prediction(r, 'best_k')} ({ratio(prediction(r, 'best_speedup'))})"
                            if prediction(r, "best_k") is not None else "-"),
    "overhead": lambda d, r: pct(overhead(r)),
    "ttft": lambda d, r: secs(r.get("ttft_s")),
    "tok_s": lambda d, r: num(r.get("decode_tok_s"), ".1f"),
    "mal": lambda d, r: num(r.get("mean_accepted_length"), ".2f"),
    "ppa": lambda d, r: " ".join(f"{x:.2f}" for x in r.get("per_position_acceptance") or [])
    or "-",
    "nll": lambda d, r: num(quality(r, "target_nll")),
    "nll_base": lambda d, r: num(quality(r, "target_nll_baseline")),
    "nll_delta": lambda d, r: num(nll_delta(r), "+.3f"),
    "tv": lambda d, r: num(quality(r, "mean_tv")),
    "kernel": lambda d, r: str(r.get("kernel") or "-"),
    "outside": lambda d, r: num(r.get("outside_rounds_ms"), ".1f"),
    "traced_e2e": lambda d, r: secs(r.get("traced_e2e_s")),
    "traced_rounds": lambda d, r: str(len(trace(r))),
    "draft_step_ms": lambda d, r: num(per_draft_step(r), ".1f"),
    # a row's median plain step over its timed requests (each request's median, the JSON's
    # step_ms), its min-max: how fast the host ran steps in that call
    "step_ms": lambda d, r: (lambda xs: f"{statistics.median(xs):.2f} ms ({min(xs):.2f}-"
                             f"{max(xs):.2f})" if xs else "-")(
        [x for x in r.get("step_ms") or [] if x]),
    "tokens_round": lambda d, r: num(sum(x.get("tokens", 0) for x in trace(r)) / len(trace(r))
                                     if trace(r) else None, ".1f"),
    "round_ms": lambda d, r: num(trace_median(r, "total_ms"), ".1f"),
    "draft_round_ms": lambda d, r: num(trace_median(r, "draft_ms"), ".1f"),
    "verify_round_ms": lambda d, r: num(trace_median(r, "verify_ms"), ".1f"),
    "first_round_ms": lambda d, r: num(trace(r)[0].get("total_ms") if trace(r) else None, ".1f"),
    "draft_phase": lambda d, r: phase_pair(r, "draft"),
    "verify_phase": lambda d, r: phase_pair(r, "verify"),
    "peer_ratio": lambda d, r: ratio(peer_ratio(d, r)),
    "paired_median": lambda d, r: ratio(statistics.median(paired(r)) if paired(r) else None),
    "paired_min_max": lambda d, r: f"{paired(r)[0]:.2f}-{paired(r)[-1]:.2f}x" if paired(r)
    else "-",
    "lookup": lambda d, r: source_cell(r, "lookup"),
    "model": lambda d, r: source_cell(r, "model"),
    "target_steps": lambda d, r: str(((r.get("per_source") or {}).get("none") or {})
                                     .get("rounds", 0)),
    "tokens_per_round": lambda d, r: num(prediction(r, "tokens_per_round"), ".2f"),
    "seed_min_max": lambda d, r: seed_min_max(d, r),
    "target_share": lambda d, r: pct(target_share(r)),
    "steps_vs_target_only": lambda d, r: ratio(steps_vs_target_only(d, r)),
    "guard_counts": lambda d, r: guard_counts(r),
    "decode_vs_steps": lambda d, r: ratio(decode_vs_steps(r)),
    "decode_tok_s": lambda d, r: num(r.get("decode_tok_s"), ".0f"),
}
for _phase in ("draft", "verify", "sample", "cache", "comm", "other"):
    FIELDS[_phase] = lambda d, r, p=_phase: num((r.get("phase_ms") or {}).get(p), ".1f")
    FIELDS[f"{_phase}_round"] = lambda d, r, p=_phase: num(per_round(r, p), ".1f")

# What each column shows, for the line under its table (only the columns a table has).
STATISTIC = {
    "median": "median E2E of each row's timed requests",
    "median_mm": "median E2E of each row's timed requests, their min-max in brackets",
    "ratio": "vs target-only = target-only's median E2E over the row's median E2E",
    "predicted": "predicted = core.cost.prediction's decode speedup for the row's measured acceptance",
    "efficiency": "efficiency = measured decode speedup (median decode tok/s over "
    "target-only's) over predicted",
    "decode": "measured (decode) = median decode tok/s over target-only's",
    "overhead": "tracing overhead = median over seeds of traced over untraced E2E, minus 1",
    "rounds": "rounds = mean rounds a timed request",
    "acceptance": "acceptance = accepted over proposed drafts, all timed requests",
    "ttft": "TTFT and decode tok/s = medians over the timed requests",
    "draft": "phases = ms in the one traced request",
    "draft_phase": "phase ms = core.bench.predicted's split of the traced request",
    "verify_round": "per round = the traced request's phase over its rounds",
    "round_ms": "per round = median over the traced request's rounds",
    "peer_ratio": "ours vs mlx-lm = mlx-lm's median E2E over ours",
    "paired_median": "paired = each seed's mlx-lm E2E over ours right before it (median, "
    "min-max)",
    "nll": "NLL = mean target NLL per generated token (first invocation)",
}


def bench(cols: Sequence[tuple[str, str]], only: Sequence[str] | None = None,
          labels: dict[str, str] | None = None, where: Callable[[Row], Any] | None = None,
          ) -> Callable[[list[Doc]], tuple[list[str], str]]:
    """A table of one bench JSON: a row per result (or the named ones, in that order; or those
    `where` accepts), a column per (header, FIELDS key)."""

    def render(docs: list[Doc]) -> tuple[list[str], str]:
        (doc,) = docs
        chosen = [row(doc, n) for n in only] if only else rows(doc)
        chosen = [r for r in chosen if where is None or where(r)]

        def cells(r: Row) -> list[str]:
            out = [FIELDS[key](doc, r) for _, key in cols]
            if labels and r.get("name") in labels and cols[0][1] == "label":
                out[0] = labels[r["name"]]
            return out

        stat = "; ".join(STATISTIC[k] for _, k in cols if k in STATISTIC)
        return md_table([h for h, _ in cols], map(cells, chosen)), stat

    return render


# -- tables over several files, or not of a bench ---------------------------------------------


def lookup_matrix(docs: list[Doc]) -> tuple[list[str], str]:
    """A row per call (prompt, temperature): target-only's median, then each row's ratio."""
    names = ("lossless-fixed-4:bonus=true+flags", "lookup+flags", "hybrid-cost-aware+flags")
    present = [n for n in names if any(r.get("name") == n for d in docs for r in rows(d))]
    heads = {names[0]: "model draft", names[1]: "lookup", names[2]: "hybrid"}
    out = []
    for d in docs:
        p = d.get("protocol") or {}
        temp = (row(d, rows(d)[0]["name"]).get("settings") or {}).get("temperature", 0)
        b = baseline(d)
        cells = [f"{(p.get('prompt') or {}).get('name', '?')}, "
                 + ("greedy" if not temp else f"T = {temp:g}"),
                 median_mm(b) if b else "-"]
        for n in present:
            r = next((x for x in rows(d) if x.get("name") == n), None)
            cells.append(f"{ratio(speedup(d, r))}: {median_mm(r)}" if r else "-")
        out.append(cells)
    stat = ("target-only: median E2E of its timed requests, their min-max in brackets; other "
            "columns: target-only's median over the row's median, then the row's median E2E, "
            "min-max in brackets")
    return md_table(["Prompt, temperature", "target-only", *(heads[n] for n in present)],
                    out), stat


def min_match(docs: list[Doc]) -> tuple[list[str], str]:
    """Lookup and hybrid rows of the min-match files: counts per source, predicted speedup."""
    cols = ("rounds0", "lookup", "model", "target_steps", "tokens_per_round", "predicted")
    out = []
    for d in docs:
        tag = {"-after": " (after)", "-kmax16": " (after)"}
        cmd = (d.get("protocol") or {}).get("command", "")
        suffix = next((v for k, v in tag.items() if f"{k}.json" in cmd), None)
        for r in rows(d):
            if not r.get("per_source"):
                continue
            label = r["name"].removesuffix("+flags")
            after = suffix if suffix is not None else (
                " (before the probe change)" if label.startswith("hybrid") else "")
            out.append([f"`{label}`{after}", *(FIELDS[c](d, r) for c in cols)])
    stat = ("counted on the CPU, greedy, one seed; lookup and model cells: rounds (share of "
            "rounds), drafts a round, acceptance, mean accepted length; predicted = "
            "core.cost.prediction's speedup over a pipelined H200 target step (`bench --curve`)")
    return md_table(("Row", "rounds", "lookup rounds", "model rounds", "target steps",
                     "tokens/round", "predicted (H200)"), out), stat


def calibration(docs: list[Doc]) -> tuple[list[str], str]:
    """A calibration file: ms per R rows in each mode, and the predicted kernel."""
    (c,) = docs
    modes = list(c.get("times") or {})
    rs = sorted({int(k) for m in modes for k in c["times"][m]})
    kern = c.get("kernels") or {}
    out = [[str(R), *(num(c["times"][m].get(str(R), None) and c["times"][m][str(R)] * 1e3, ".1f")
                      for m in modes), kern.get(str(R), "-")] for R in rs]
    stat = (f"one target forward over R rows, median of {c.get('repeats', '?')}, ms, the KV "
            f"length advancing from {c.get('context_len', '?')} to {c.get('context_end', '?')}")
    return md_table(("R", *modes, "predicted kernel"), out), stat


def calibration_row(docs: list[Doc]) -> tuple[list[str], str]:
    """A calibration file's one mode, transposed: R, ms, ms per row."""
    (c,) = docs
    t = next(iter((c.get("times") or {}).values()))
    rs = sorted(t, key=int)
    return (md_table(("R (rows verified)", *rs),
                     [["ms", *(f"{t[R] * 1e3:.1f}" for R in rs)],
                      ["ms per row", *(f"{t[R] * 1e3 / int(R):.1f}" for R in rs)]]),
            f"one target forward over R rows, median of {c.get('repeats', '?')}")


def host_cost(docs: list[Doc]) -> tuple[list[str], str]:
    (d,) = docs
    by: dict[int, dict[str, dict[str, float]]] = {}
    for x in d.get("rows") or []:
        by.setdefault(x["context"], {})[x["method"].split(" ")[0]] = x
    out = [[f"{n:,}", *(f"{by[n][m][s]:.{p}f} ms" for m, p in (("suffix", 3), ("scan", 1))
                        for s in ("median_ms", "p90_ms"))] for n in sorted(by)]
    rounds = (d.get("environment") or {}).get("rounds", "?")
    return (md_table(("context", "suffix index, median", "p90", "scan n = 4..2, median", "p90"),
                     out), f"median and p90 over {rounds} rounds")


def step_costs(docs: list[Doc]) -> tuple[list[str], str]:
    """The 0.5B step in the `steps` call, the morning call, and probe C (ms)."""
    steps, morning, probe = docs
    keys = ("per_step_s", "pipelined_s", "chained8_s", "fused_chained8_s",
            "mlx_lm_generate_step_s")
    out = []
    for name, d in (("`steps` call (slow host)", steps),
                    ("morning call (fast host, before merging projections)", morning)):
        m = (d.get("models") or {}).get("shape:qwen2.5-0.5b") or {}
        out.append([name, *(num(m.get(k) and m[k] * 1e3, ".2f") for k in keys)])
    c = probe.get("default") or {}
    out.append(["`probe` call C, default settings", "-",
                num(c.get("shape:qwen2.5-0.5b/pipelined"), ".2f"),
                num(c.get("shape:qwen2.5-0.5b/chained8"), ".2f"), "-", "-"])
    return (md_table(("0.5B step, ms", "per step", "pipelined", "chained x8",
                      "compiled, chained x8", "mlx-lm"), out),
            "ms a 0.5B decode step, median of the repeats (core.cost.stepcost; probe.py)")


def seed_m2(docs: list[Doc]) -> tuple[list[str], str]:
    """The seed's table (`seed` call) with the seed's own M2 numbers beside it."""
    doc, m2 = docs
    ref = m2.get("rows") or {}

    def m2_cell(name: str) -> str:
        x = ref.get(name)
        if not x:
            return "-"
        extra = [f"{x['e2e_s']:.3f} s"] if "e2e_s" in x else []
        extra += [pct(x["acceptance"])] if "acceptance" in x else []
        return ratio(x["ratio"]) + (f" ({', '.join(extra)})" if extra else "")

    cells = [[FIELDS[k](doc, r) for k in ("label", "acceptance", "rounds", "median_mm", "ratio")]
             + [m2_cell(r["name"])] for r in rows(doc)]
    return (md_table(("Configuration", "Acceptance", "Rounds/request", "Median E2E (min-max)",
                      "vs target-only", "seed on an M2"), cells),
            "; ".join((STATISTIC["median_mm"], STATISTIC["ratio"],
                       "seed on an M2: " + m2.get("source", "?"))))


def dispatch_matrix(docs: list[Doc]) -> tuple[list[str], str]:
    """k by dispatch (`ours` call): ratio to target-only, verify ms a round."""
    (doc,) = docs

    def cell(name: str) -> str:
        r = row(doc, name)
        return f"{ratio(speedup(doc, r))} (verify {num(per_round(r, 'verify'), '.1f')} ms/round)"

    b = "fixed-8-tv1:bonus=true"
    out = [["k = 4 (5 rows)", cell("fixed-4-tv1:bonus=true,dispatch=gemv"),
            cell("fixed-4-tv1:bonus=true,dispatch=gemm"), "-"],
           ["k = 8 (9 rows)", cell(f"{b},dispatch=gemv"), cell(f"{b},dispatch=gemm"), cell(b)],
           ["k = 7, dispatch = fastest", "", "", cell("fixed-8-tv1:k=7,bonus=true,dispatch=fastest")]]
    return (md_table(("", "dispatch = gemv (row by row)",
                      "dispatch = gemm (padded to the matrix kernel)", "auto (MLX decides)"), out),
            STATISTIC["ratio"] + "; " + STATISTIC["verify_round"])


def cost_aware_runs(docs: list[Doc]) -> tuple[list[str], str]:
    """The three CPU cost-aware runs, a row each: ratios, TTFT / decode tok/s."""
    out = []
    for i, d in enumerate(docs, 1):
        t = baseline(d) or {}
        fixed = row(d, "fixed-4-tv1:bonus=true")
        ca, ca1 = row(d, "cost-aware"), row(d, "cost-aware:rule=mentored,tv_budget=1.0")
        out.append([str(i), ratio(speedup(d, fixed)), ratio(speedup(d, ca)), ratio(speedup(d, ca1)),
                    f"{num(ca.get('ttft_s'), '.2f')} s / {num(ca.get('decode_tok_s'), '.1f')}",
                    f"{num(t.get('ttft_s'), '.2f')} s / {num(t.get('decode_tok_s'), '.1f')}"])
    return (md_table(("Run", "fixed-4, TV = 1", "cost-aware (lossless)", "cost-aware (TV = 1)",
                      "cost-aware TTFT / decode tok/s", "target-only TTFT / decode tok/s"), out),
            STATISTIC["ratio"] + "; " + STATISTIC["ttft"])


def tp_pair(docs: list[Doc]) -> tuple[list[str], str]:
    """TP = 2 beside TP = 1, a row per configuration."""
    tp2, tp1 = docs
    out = []
    for r2 in rows(tp2):
        r1 = row(tp1, r2["name"])
        m1, m2 = median(r1), median(r2)
        out.append([str(r2.get("label")), median_mm(r1), median_mm(r2),
                    ratio(m1 / m2 if m1 and m2 else None), ratio(speedup(tp1, r1)),
                    ratio(speedup(tp2, r2)), pct(overhead(r1)), pct(overhead(r2)),
                    num((r2.get("phase_ms") or {}).get("comm"), ".1f")])
    return (md_table(("Configuration", "TP = 1 median E2E", "TP = 2 median E2E",
                      "TP = 2 over TP = 1", "vs target-only, TP = 1", "vs target-only, TP = 2",
                      "tracing overhead, TP = 1", "TP = 2", "TP = 2 comm ms (traced)"), out),
            "median E2E of each row's timed requests, min-max in brackets; TP = 2 over TP = 1 "
            "= TP = 1's median over TP = 2's; " + STATISTIC["ratio"] + "; "
            + STATISTIC["overhead"] + "; comm = the traced request's collectives")


# Issue 28's rows (docs/benchmarks/h200/never_slower.py's ROWS, as the bench names them).
NS_ROWS = {
    "target-only:mode=speculative,draft_source=hybrid,policy=cost-aware,bonus=true+flags":
        "default (hybrid, cost-aware 1..8)",
    "lookup+flags": "lookup",
    "hybrid-cost-aware+flags": "hybrid-cost-aware (0..32)",
    "cost-aware+flags": "model alone (cost-aware)",
}
NS_DEFAULT, NS_LOOKUP, NS_HYBRID, NS_MODEL = NS_ROWS
# The A/A control (run 3 on): target-only again in the same interleave, the noise's size.
NS_CONTROL = "target-only:top_p=1.0+flags"
NS_LABELS = {**NS_ROWS, NS_CONTROL: "target-only again (A/A)"}
# The default row is target-only's preset overwritten with first_run_settings()'s fields
# (never_slower.py's default_row); from run 4 they include k_max = 32, so the row's name grew:
# every target-only row with at least run 3's overrides is the default.
DEFAULT_PREFIX = NS_DEFAULT.removesuffix("+flags")


def _overrides(name: str) -> tuple[str, set[str]]:
    base, _, rest = name.removesuffix("+flags").partition(":")
    return base, set(rest.split(",")) if rest else set()


def ns_key(r: Row) -> str:
    """The row's name as the never-slower tables know it (every default row under one)."""
    name = str(r.get("name"))
    base, extra = _overrides(name)
    want_base, want = _overrides(NS_DEFAULT)
    return NS_DEFAULT if base == want_base and want <= extra else name


def ns_names(d: Doc) -> dict[str, Row]:
    """The bench's rows by ns_key, the first of each key kept: an A/B row of the default
    (never_slower.py's OVERLAP_AB or PRICE_AB, appended after ROWS) is the default's key too,
    and the bare row the bench ran first is the one the goals are read from."""
    out: dict[str, Row] = {}
    for r in rows(d):
        out.setdefault(ns_key(r), r)
    return out


def ns_row_label(r: Row, code: bool = True) -> str:
    """The row's label; the default's names its k range from the row's own settings; another
    row's name as code (or plain, `code=False`)."""
    key = ns_key(r)
    if key == NS_DEFAULT:
        more = sorted(x for x in _overrides(str(r.get("name")))[1] - _overrides(NS_DEFAULT)[1]
                      if not x.startswith("k_max="))  # the label names its k range
        return (f"default (hybrid, cost-aware 1..{(r.get('settings') or {}).get('k_max', 8)})"
                + "".join(f", {x}" for x in more))  # an A/B row: the default and its change
    return NS_LABELS.get(key, f"`{key}`" if code else key)
FLOOR = 0.97  # issue 28: the default, lookup and hybrid at >= 0.97x of target-only


def prompt_t(doc: Doc) -> tuple[str, float]:
    """The bench's prompt name and temperature (every row of a bench shares both)."""
    name = ((doc.get("protocol") or {}).get("prompt") or {}).get("name", "?")
    first = rows(doc)[0] if rows(doc) else {}
    return str(name), float((first.get("settings") or {}).get("temperature", 0.0))


def _seeds(docs: list[Doc]) -> str:
    """The seed count the benches ran, in words ("5 seeds"; "3-5 seeds" where they differ),
    from each JSON's protocol: a table's statistic says what its own data holds."""
    ns = sorted({int(n) for d in docs if (n := (d.get("protocol") or {}).get("seeds"))})
    if not ns:
        return "the seeds"
    return f"{ns[0]} seeds" if len(ns) == 1 else f"{ns[0]}-{ns[-1]} seeds"


def _ns_label(doc: Doc) -> str:
    name, temp = prompt_t(doc)
    return f"{name}, T = {temp:g}"


def never_slower(docs: list[Doc]) -> tuple[list[str], str]:
    """A row per bench and speculative row: the median ratio, the per-seed min-max, what the
    row did (rounds, acceptance, plain target steps) and the guard's decisions."""
    out = []
    for d in docs:
        for r in rows(d):
            if r is baseline(d):
                continue
            out.append([_ns_label(d), ns_row_label(r),
                        ratio(speedup(d, r)), seed_min_max(d, r),
                        num(r.get("rounds_per_request"), ".0f"), pct(r.get("acceptance")),
                        pct(target_share(r)), ratio(steps_vs_target_only(d, r)),
                        ratio(decode_vs_steps(r)), guard_counts(r)])
    stat = ("vs target-only = target-only's median E2E over the row's median E2E "
            f"({_seeds(docs)}, same bench); per-seed = the same seed's target-only E2E over the row's, min-max; "
            "rounds = mean rounds a request; target steps = share of the row's rounds that "
            "drafted nothing; plain steps vs target-only = the guard's measured rate of the "
            "row's pipelined plain target steps (median over requests) over target-only's "
            "median decode tok/s; decode vs own steps = the row's median decode tok/s over that "
            "same guard rate; guard = per source, the decision each timed request ended in")
    return md_table(("Prompt, T", "Row", "vs target-only", "per-seed min-max", "rounds",
                     "acceptance", "target steps", "plain steps vs target-only",
                     "decode vs own steps", "guard"), out), stat


def never_slower_summary(docs: list[Doc]) -> tuple[list[str], str]:
    """Per row over every bench: how many fell below the floor, the spread of its ratios,
    how much of it was plain target steps, and the guard's decisions per source in total."""
    out = []
    for n, label in NS_ROWS.items():
        found = [(d, r) for d in docs for r in rows(d) if ns_key(r) == n]
        xs = sorted(x for d, r in found if (x := speedup(d, r)) is not None)
        shares = sorted(x for _, r in found if (x := target_share(r)) is not None)
        gaps = sorted(x for _, r in found if (x := decode_vs_steps(r)) is not None)
        said: dict[str, list[str]] = {}
        for _, r in found:
            for src, g in (r.get("guard") or {}).items():
                if src != "none":
                    said.setdefault(src, []).extend(SAID.get(str(x), str(x))
                                                    for x in g.get("guard") or [] if x)
        guard = "; ".join(f"{src}: " + ", ".join(f"{w} {v.count(w)}" for w in
                                                  ("asked", "not asked", "measuring") if w in v)
                          for src, v in said.items())
        out.append([label, str(len(xs)), str(sum(x < FLOOR for x in xs)),
                    f"{xs[0]:.2f}-{xs[-1]:.2f}x" if xs else "-",
                    ratio(statistics.median(xs)) if xs else "-",
                    f"{shares[0] * 100:.0f}-{shares[-1] * 100:.0f}%" if shares else "-",
                    f"{gaps[0]:.2f}-{gaps[-1]:.2f}x" if gaps else "-", guard or "-"])
    stat = ("each bench's ratio = target-only's median E2E over the row's median E2E; below "
            f"{FLOOR:.2f}x = benches under the floor; target steps = share of rounds that "
            "drafted nothing, min-max over benches; decode vs own steps = the row's median "
            "decode tok/s over the guard's median rate of its pipelined plain steps, min-max "
            "over benches; guard = timed requests ending in each decision, all benches")
    return md_table(("Row", "benches", f"below {FLOOR:.2f}x", "ratio min-max",
                     "median of ratios", "target steps", "decode vs own steps", "guard"),
                    out), stat


def _met(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "**not met**")


def never_slower_goals(docs: list[Doc]) -> tuple[list[str], str]:
    """Issue 28's per-row goals: the floor (default, lookup, hybrid >= 0.97x of target-only)
    and the hybrid at >= 0.97x of the better of lookup alone and the model alone."""
    out = []
    for d in docs:
        names = ns_names(d)
        sp = {n: speedup(d, names[n]) if n in names else None for n in NS_ROWS}
        floor = [sp[n] for n in (NS_DEFAULT, NS_LOOKUP, NS_HYBRID)]
        parts = [x for x in (sp[NS_LOOKUP], sp[NS_MODEL]) if x is not None]
        best = max(parts) if parts else None
        rel = sp[NS_HYBRID] / best if sp[NS_HYBRID] is not None and best else None
        control = speedup(d, names[NS_CONTROL]) if NS_CONTROL in names else None
        out.append([_ns_label(d), *(ratio(x) for x in floor),
                    _met(all(x >= FLOOR for x in floor) if None not in floor else None),
                    ratio(sp[NS_MODEL]), ratio(rel), _met(rel >= FLOOR if rel else None),
                    ratio(control)])
    stat = ("each ratio = target-only's median E2E over the row's median E2E, same bench; "
            f"floor = default, lookup and hybrid all >= {FLOOR:.2f}x (compared unrounded); hybrid / better part = "
            "the hybrid's ratio over the larger of the lookup's and the model alone's, goal "
            f">= {FLOOR:.2f}; A/A = target-only again in the same interleave (the same "
            "settings, a second row), its ratio to the first: how far noise alone moves a ratio "
            "(- where the call ran no control)")
    return md_table(("Prompt, T", "default", "lookup", "hybrid", "floor >= 0.97x",
                     "model alone", "hybrid / better part", "hybrid goal", "A/A"), out), stat


def _min_ratio(doc: Doc, r: Row) -> float | None:
    """Target-only's fastest request over the row's fastest (best of the seeds: noise on a
    shared host only ever adds time, so the minima are the least disturbed pair)."""
    b = baseline(doc)
    xb, xr = (e2e(b) if b else []), e2e(r)
    return min(xb) / min(xr) if xb and xr and min(xr) > 0 else None


def never_slower_control(docs: list[Doc]) -> tuple[list[str], str]:
    """The A/A control beside the floor's rows: target-only run again in the same interleave
    has the same true speed as the baseline, so its ratio is what noise alone does to a
    ratio. Per bench: the control's median ratio and per-seed min-max, then the default's,
    lookup's and hybrid's median ratio and ratio of minima; the last row counts the benches
    below the floor by each statistic."""
    parts = (NS_CONTROL, NS_DEFAULT, NS_LOOKUP, NS_HYBRID)
    out, below = [], {k: [0, 0] for k in parts}
    for d in docs:
        names = ns_names(d)
        if NS_CONTROL not in names:
            continue
        ratios = {}
        for n in parts:
            r = names.get(n)
            ratios[n] = (speedup(d, r), _min_ratio(d, r)) if r else (None, None)
            for j, x in enumerate(ratios[n]):
                below[n][j] += x is not None and x < FLOOR
        aa_med, aa_min = ratios[NS_CONTROL]
        out.append([_ns_label(d), ratio(aa_med), seed_min_max(d, names[NS_CONTROL]),
                    ratio(aa_min), *(ratio(x) for n in parts[1:] for x in ratios[n])])
    aa_med, aa_min = below[NS_CONTROL]
    out.append([f"**below {FLOOR:.2f}x, of {len(out)}**", str(aa_med), "", str(aa_min),
                *(str(below[k][j]) for k in parts[1:] for j in (0, 1))])
    stat = ("A/A = target-only again (same settings, the last row of each seed's "
            "interleave) over target-only; median = target-only's median E2E over the "
            f"row's ({_seeds(docs)}); minima = target-only's fastest request over the row's fastest; "
            "per-seed = the same seed's pair, min-max")
    return md_table(("Prompt, T", "A/A median", "A/A per-seed", "A/A minima", "default median",
                     "default minima", "lookup median", "lookup minima", "hybrid median",
                     "hybrid minima"), out), stat


Z95 = 1.959964  # the normal quantile of a two-sided 95% interval


def _log_pairs(doc: Doc, r: Row) -> list[float]:
    """log(target-only's E2E / the row's E2E) per seed: the same seed's two requests, timed
    in the same interleave (a per-seed ratio above 1 is the row faster)."""
    import math

    b = baseline(doc)
    return [math.log(x / y) for x, y in zip(e2e(b) if b else [], e2e(r), strict=False)
            if x > 0 and y > 0]  # fmt: skip


def _norm_pairs(doc: Doc, r: Row) -> list[float]:
    """As `_log_pairs`, each E2E divided by its own request's median plain step (`step_ms`):
    a slow spell that shifts a whole request (the H200's host moved target-only's median step
    from 4 to 7 ms between two requests of one call) divides out. Pairs where either request
    had too few plain steps to say (None) are left out."""
    import math

    b = baseline(doc)
    if b is None:
        return []
    out = []
    for x, sx, y, sy in zip(e2e(b), b.get("step_ms") or [], e2e(r), r.get("step_ms") or [],
                            strict=False):  # fmt: skip
        if x > 0 and y > 0 and sx and sy:
            out.append(math.log((x / sx) / (y / sy)))
    return out


def aa_sigma(docs: list[Doc], pairs_of: Callable[[Doc, Row], list[float]] = _log_pairs
             ) -> tuple[float | None, int]:  # fmt: skip
    """The host's noise on one pair, from the A/A control: the root mean square of its
    per-seed log ratios over every bench (its true ratio is 1, so the mean is not fitted),
    and how many pairs that is."""
    pairs = [x for d in docs for r in rows(d) if r.get("name") == NS_CONTROL
             for x in pairs_of(d, r)]  # fmt: skip
    if len(pairs) < 2:
        return None, len(pairs)
    return (sum(x * x for x in pairs) / len(pairs)) ** 0.5, len(pairs)


def _verdict(logs: list[float], sigma: float, against: float = FLOOR,
             words: tuple[str, str, str] = ("held", "**broken**", "undecided"),
             ) -> tuple[str, str]:  # fmt: skip
    """The geometric mean of the per-seed ratios with its 95% interval (the A/A noise over
    root n), and what it says against `against` (the floor, 0.97x): held (the interval above
    it), broken (below), or undecided (the interval holds it); `words` name the three."""
    import math

    m = statistics.fmean(logs)
    half = Z95 * sigma / math.sqrt(len(logs))
    lo, hi = math.exp(m - half), math.exp(m + half)
    said = words[0] if lo >= against else (words[1] if hi < against else words[2])
    return f"{math.exp(m):.2f}x ({lo:.2f}-{hi:.2f})", said


def never_slower_verdict(docs: list[Doc], pairs_of: Callable[[Doc, Row], list[float]] = _log_pairs,
                         what: str = "target-only's E2E over the row's") -> tuple[list[str], str]:  # fmt: skip
    """Issue 28's floor judged with the noise the control measured, instead of against a
    bare 0.97x: per bench and row (the A/A control, the default, the lookup, the hybrid, the
    model alone), the geometric mean of the per-seed paired ratios and its 95% interval, whose
    width is the A/A control's pooled per-pair noise; then the same over all benches, and over
    each temperature's. A ratio of medians over 5 seeds moved 0.78-1.64x in run 3's A/A
    control; saying "held", "broken" or "undecided" keeps that noise in the verdict."""
    sigma, n_aa = aa_sigma(docs, pairs_of)
    parts = (NS_CONTROL, NS_DEFAULT, NS_LOOKUP, NS_HYBRID, NS_MODEL)
    heads = ("A/A", "default", "lookup", "hybrid", "model alone")
    if sigma is None:
        return md_table(("Prompt, T", *heads), [["(no A/A control in these files)"] + [""] * 5]), (
            "needs the A/A control row (docs/benchmarks/h200/never_slower.py, run 3 on)"
            + ("" if pairs_of is _log_pairs else " with each request's step_ms (run 6 on)"))
    out, pooled = [], {}
    counts = {n: {"held": 0, "**broken**": 0, "undecided": 0} for n in parts}
    for d in docs:
        names = ns_names(d)
        cells = []
        for n in parts:
            logs = pairs_of(d, names[n]) if n in names else []
            if not logs:
                cells.append("-")
                continue
            for key in ("all", f"T = {prompt_t(d)[1]:g}"):
                pooled.setdefault(key, {}).setdefault(n, []).extend(logs)
            value, said = _verdict(logs, sigma)
            counts[n][said] += 1
            cells.append(f"{value} {said}")
        out.append([_ns_label(d), *cells])
    for key in sorted(pooled, key=lambda k: (k != "all", k)):
        label = "**all benches**" if key == "all" else f"**every bench at {key}**"
        cells = []
        for n in parts:
            logs = pooled[key].get(n, [])
            cells.append(" ".join(_verdict(logs, sigma)) if logs else "-")
        out.append([label, *cells])
    out.append(["**benches held / broken / undecided**",
                *(f"{c['held']} / {c['**broken**']} / {c['undecided']}"
                  for c in (counts[n] for n in parts))])  # fmt: skip
    stat = (f"each cell = the geometric mean over seeds of {what}, the "
            f"same seed's pair ({_seeds(docs)}), with its 95% interval: ±{Z95:.2f} σ/√n in log, "
            f"σ = {sigma:.3f}, the A/A control's per-seed log ratio (true ratio 1), root mean "
            f"square over its {n_aa} pairs in these benches; held = the interval above "
            f"{FLOOR:.2f}x, broken = below it, undecided = it holds {FLOOR:.2f}x; the pooled "
            "rows take every pair of those benches (what the row does on these prompts on the "
            "whole, not on each); the A/A column, whose true ratio is 1, shows what chance alone "
            "says")
    return md_table(("Prompt, T", *heads), out), stat


def never_slower_normalized(docs: list[Doc]) -> tuple[list[str], str]:
    """The verdict again with each request's E2E divided by its own median plain step: the
    same pairs, with the slow spells that shift whole requests divided out. A second view,
    not the floor's judge: a row whose rounds slowed its own plain steps would hide that
    here, so the E2E verdict stays the one the goals are read from; the A/A control's σ
    under this division says how much of the pair noise was such spells."""
    return never_slower_verdict(docs, _norm_pairs, "target-only's E2E over its median "
                                "plain step, over the row's E2E over its own (per request)")


def _step_pairs(doc: Doc, r: Row) -> list[float]:
    """Per seed, the log of target-only's median plain step over the row's (`step_ms`, the
    same seed's pair); pairs where either request had too few plain steps are left out."""
    import math

    b = baseline(doc)
    if b is None:
        return []
    return [math.log(sx / sy) for sx, sy in zip(b.get("step_ms") or [], r.get("step_ms") or [],
                                                 strict=False) if sx and sy]  # fmt: skip


def never_slower_steps(docs: list[Doc]) -> tuple[list[str], str]:
    """The verdict's pairs on the requests' median plain steps alone: whether a row's plain
    target steps ran slower than target-only's (below 1: slower). What the normalized view
    divides out: run 16's model alone read 0.89x by E2E and 1.02x normalized, its rounds
    too few to explain the gap, so the gap sat in its steps. A step right after a drafting
    round (read with no step queued: about two pipelined steps) is among a row's plain steps,
    so a row that drafts often reads below 1 from its rounds' breaks as well."""
    return never_slower_verdict(docs, _step_pairs, "target-only's median plain step over "
                                "the row's (per request)")


def never_slower_tally(docs: list[Doc]) -> tuple[list[str], str]:
    """Issue 28's per-bench goals counted over the benches: on how many each holds (ratios
    compared unrounded, as never_slower_goals judges them)."""
    n = len(docs)
    counts = {"default": 0, "lookup": 0, "hybrid": 0, "floor": 0, "hybrid_parts": 0}
    for d in docs:
        names = ns_names(d)
        sp = {k: speedup(d, names[k]) if k in names else None for k in NS_ROWS}
        ok = {k: sp[name] is not None and sp[name] >= FLOOR
              for k, name in (("default", NS_DEFAULT), ("lookup", NS_LOOKUP),
                              ("hybrid", NS_HYBRID))}  # fmt: skip
        counts["default"] += ok["default"]
        counts["lookup"] += ok["lookup"]
        counts["hybrid"] += ok["hybrid"]
        counts["floor"] += all(ok.values())
        parts = [x for x in (sp[NS_LOOKUP], sp[NS_MODEL]) if x is not None]
        counts["hybrid_parts"] += bool(parts and sp[NS_HYBRID] is not None
                                       and sp[NS_HYBRID] / max(parts) >= FLOOR)
    goals = (("default >= 0.97x of target-only", "default"),
             ("lookup >= 0.97x of target-only", "lookup"),
             ("hybrid >= 0.97x of target-only", "hybrid"),
             ("all three (the floor)", "floor"),
             ("hybrid >= 0.97x of the better of lookup and model alone", "hybrid_parts"))
    out = [[g, f"{counts[k]} of {n}", _met(counts[k] == n)] for g, k in goals]
    return md_table(("Goal (on every bench)", "benches where it holds", "Met?"), out), (
        "each bench's ratio = target-only's median E2E over the row's median E2E, same bench, "
        "compared unrounded; met = it holds on every bench")


def _guard_rate(r: Row, arm: str) -> float | None:
    xs = [x for x in (((r.get("guard") or {}).get(arm) or {}).get("measured_tok_s") or []) if x]
    return statistics.median(xs) if xs else None


def model_alone_split(docs: list[Doc]) -> tuple[list[str], str]:
    """The model-alone row's request, rebuilt from the guard's own two rates: TTFT, its plain
    steps' tokens at the target arm's rate, and its model rounds' tokens at the model's rate
    (that rate carries the pipeline break a drafting round causes). Where the sum matches the
    measured median, the guard's clock sees the whole request."""
    out = []
    for d in docs:
        r = next((x for x in rows(d) if x.get("name") == NS_MODEL), None)
        b = baseline(d)
        if r is None or b is None:
            continue
        n = len(e2e(r)) or 1
        m = (r.get("per_source") or {}).get("model") or {}
        rounds = m.get("rounds", 0) / n
        toks = (m.get("accepted", 0) + m.get("rounds", 0)) / n  # accepted + 1 a round
        plain_rate, model_rate = _guard_rate(r, "none"), _guard_rate(r, "model")
        model_s = toks / model_rate if model_rate else 0.0
        plain_s = (int(r.get("tokens_per_request") or 0) - toks) / plain_rate if plain_rate else None
        est = (r.get("ttft_s") or 0.0) + (plain_s or 0.0) + model_s if plain_s else None
        out.append([_ns_label(d), secs(median(b)), secs(median(r)), ratio(speedup(d, r)),
                    num(rounds, ".1f"), num(model_s and rounds and model_s / rounds * 1e3, ".0f"),
                    secs(model_s), secs(plain_s), secs(est),
                    num(est / median(r) if est and median(r) else None, ".2f")])
    stat = ("medians over the 3 timed requests; model rounds = mean a request; model round = "
            "tokens of its model rounds (accepted + 1 a round) at the guard's measured model "
            "rate (median over requests), per round; plain steps = the other tokens at the "
            "guard's measured rate of pipelined plain steps; rebuilt = TTFT + plain steps + "
            "model rounds, a request; rebuilt / measured = that over the row's median E2E")
    return md_table(("Prompt, T", "target-only", "model alone", "vs target-only",
                     "model rounds", "ms a model round", "model rounds, s", "plain steps, s",
                     "rebuilt", "rebuilt / measured"), out), stat


COPY_GOALS = (("rewrite-paragraph", 5.0), ("code-refactor-pasted", 3.0))


def never_slower_copy(docs: list[Doc]) -> tuple[list[str], str]:
    """Issue 28's copy goals, greedy: rewrite-paragraph >= 5x, the pasted-code refactor
    >= 3x; the lookup row, with the default beside it (the goal names no row)."""
    out = []
    for prompt, goal in COPY_GOALS:
        for d in docs:
            if prompt_t(d) != (prompt, 0.0):
                continue
            for n in (NS_LOOKUP, NS_DEFAULT):
                r = next((x for x in rows(d) if ns_key(x) == n), None)
                x = speedup(d, r) if r else None
                out.append([f"{prompt}, greedy", ns_row_label(r) if r else NS_ROWS[n],
                            f">= {goal:g}x", ratio(x),
                            seed_min_max(d, r) if r else "-",
                            _met(x >= goal if x is not None else None)])
    stat = ("measured = target-only's median E2E over the row's median E2E, same bench; "
            "per-seed = the same seed's target-only E2E over the row's, min-max")
    return md_table(("Prompt", "Row", "Goal", "Measured", "per-seed min-max", "Met?"), out), stat


def carried_rounds(r: Row) -> str:
    """Per source, the rounds its kept guard had seen before each timed request (the warm-up
    and the seeds before it; `guard.<source>.earlier_rounds`), request by request."""
    out = []
    for src, g in (r.get("guard") or {}).items():
        xs = g.get("earlier_rounds") or []
        if src != "none" and xs:
            out.append(f"{src}: " + "/".join(str(x) for x in xs))
    return "; ".join(out) or "-"


FIELDS["carried"] = lambda d, r: carried_rounds(r)


def never_slower_kept(docs: list[Doc]) -> tuple[list[str], str]:
    """never_slower's table with the rounds each source's kept guard carried into each timed
    request (the guard outlives a request since 5d0ea22, core/cost/guard_memory.py)."""
    lines, stat = never_slower(docs)
    chosen = [r for d in docs for r in rows(d) if r is not baseline(d)]
    head, rule, *body = lines
    body = [line[:-1] + f"| {carried_rounds(r)} |" for line, r in zip(body, chosen, strict=True)]
    return ([head[:-1] + "| carried rounds |", rule[:-1] + "|---|", *body],
            stat + "; carried rounds = per source, the rounds its kept guard had counted before "
            "each timed request (seed by seed: the warm-up and the seeds before it)")


def _run_key(doc: Doc) -> str:
    """Which run a bench JSON belongs to: the tool's commit and the day of its timestamp."""
    env = doc.get("environment") or {}
    return f"{str(env.get('specdec_tui_commit', '?'))[:7]} ({str(env.get('timestamp', '?'))[:10]})"


def never_slower_runs(docs: list[Doc]) -> tuple[list[str], str]:
    """Two runs of the same benches side by side, told apart by the tool's commit: per row,
    the benches under the floor and the median of the ratios, before -> after."""
    runs: dict[str, list[Doc]] = {}
    for d in docs:
        runs.setdefault(_run_key(d), []).append(d)
    out = []
    for n, label in NS_ROWS.items():
        cells = []
        for ds in runs.values():
            xs = sorted(x for d in ds for r in rows(d) if ns_key(r) == n
                        if (x := speedup(d, r)) is not None)  # fmt: skip
            cells.append((f"{sum(x < FLOOR for x in xs)} of {len(xs)}",
                          ratio(statistics.median(xs)) if xs else "-",
                          f"{xs[0]:.2f}-{xs[-1]:.2f}x" if xs else "-"))
        out.append([label, *(" -> ".join(c[i] for c in cells) for i in range(3))])
    stat = ("a -> b: the run of " + " -> the run of ".join(runs) + "; each bench's ratio = "
            "target-only's median E2E over the row's median E2E, same bench, compared unrounded")
    return md_table(("Row", f"benches below {FLOOR:.2f}x", "median of ratios", "ratio min-max"),
                    out), stat


def target_only_spread(docs: list[Doc]) -> tuple[list[str], str]:
    """Target-only's own spread per bench: its median, min-max, and max over min, the noise
    a row's ratio sits on."""
    out = []
    for d in docs:
        b = baseline(d)
        xs = e2e(b) if b else []
        out.append([_ns_label(d), median_mm(b) if b else "-",
                    num(max(xs) / min(xs) if xs and min(xs) else None, ".2f")])
    return (md_table(("Prompt, T", "target-only E2E, median (min-max)", "max / min"), out),
            f"target-only's timed requests ({_seeds(docs)}), same bench")


def lookup_round_cost(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench, what a lookup round of the lookup row cost: the guard's measured lookup
    rate per request (tokens a second of its rounds, breaks charged) over the row's tokens a
    lookup round, beside a target step's time from the same guard."""
    out = []
    for doc in docs:
        name, temp = prompt_t(doc)
        r = next((x for x in rows(doc) if x["settings"].get("draft_source") == "lookup"), None)
        lk = (r or {}).get("per_source", {}).get("lookup")
        if not lk or not lk.get("rounds"):
            continue
        per_round = (lk["accepted"] + lk["rounds"]) / lk["rounds"]
        g = r.get("guard") or {}
        ms = [per_round / x * 1e3 for x in g.get("lookup", {}).get("measured_tok_s", []) if x]
        step = [1e3 / x for x in g.get("none", {}).get("measured_tok_s", []) if x]
        if not ms or not step:
            continue
        out.append([f"{name}, T = {temp:g}", str(lk["rounds"]), f"{lk['proposed'] / lk['rounds']:.1f}",
                    f"{per_round:.1f}", f"{min(ms):.0f}-{max(ms):.0f}",
                    f"{min(step):.1f}-{max(step):.1f}"])  # fmt: skip
    stat = ("the lookup row of each bench; ms a lookup round = its tokens a lookup round (accepted "
            "plus one, over the row's requests) over the guard's measured lookup rate, per request "
            "(the JSON's guard.lookup.measured_tok_s: the rounds' seconds with the pipeline breaks "
            "charged to them), min-max; a target step = 1 / guard.none.measured_tok_s, min-max")
    return md_table(("Prompt, T", "lookup rounds", "drafts a round", "tokens a round",
                     "ms a lookup round", "ms a target step"), out), stat


def _drafted(r: Row) -> int:
    """Drafting rounds of a row over its timed requests (every source but plain steps)."""
    return sum(int(v.get("rounds") or 0) for k, v in (r.get("per_source") or {}).items()
               if k != "none")  # fmt: skip


def step_excess(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench and row: a request's E2E over its tokens at its own median plain step (1.0:
    every token took one median step; prefill and slow steps above that; rounds that pay
    below), median over the row's requests, with the row's drafting rounds beside it. A row
    that drafted nothing did target-only's work: its excess over target-only's is what its
    plain steps cost more, in the same call."""
    heads = (("target-only", None), ("default", NS_DEFAULT), ("lookup", NS_LOOKUP),
             ("hybrid", NS_HYBRID), ("model alone", NS_MODEL))
    out = []
    for d in docs:
        cells = []
        for _, key in heads:
            r = baseline(d) if key is None else next((x for x in rows(d) if ns_key(x) == key), None)
            n = (r or {}).get("tokens_per_request") or 0
            ex = [] if r is None or not n else [
                e * 1e3 / (n * m) for e, m in zip(e2e(r), r.get("step_ms") or [], strict=False)
                if m]  # fmt: skip
            cells.append(f"{statistics.median(ex):.3f} ({_drafted(r)})" if ex else "-")
        out.append([_ns_label(d), *cells])
    stat = ("each cell = the median over the row's timed requests of E2E over (tokens a request x "
            "that request's median plain step, the JSON's step_ms), in brackets the row's drafting "
            "rounds over those requests (0: it ran plain target steps only, as target-only does)")
    return md_table(("Prompt, T", *(h for h, _ in heads)), out), stat


def _acc(r: Row | None) -> str:
    """A row's acceptance (drafts kept over drafts verified) as a percentage, or "-"."""
    return "-" if r is None or r.get("acceptance") is None else f"{100 * r['acceptance']:.0f}%"


def overlap_ab(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench: the A/B of the queued step after a round (core/decode/queued.py): for the
    default and the lookup, each seed's E2E with the step not queued over the same seed's
    E2E with it queued (above 1: the queued step was faster), median and min-max, with both
    rows' acceptance; the lookup queued by MLX's fused one-row attention where the bench ran
    it (`verify_attention=fused`); the A/A control's own per-seed ratio beside them for the noise.
    A row's name says overlap_round=true or =false; a bare row ran the run's default, on where
    the bench named copies with =false (run 11), else off."""
    tag = re.compile(r"[:,](?:overlap_round=(?:true|false)|verify_attention=fused)(?=[,+]|$)")

    def pick(d: Doc, key: str, on: bool, fused: bool = False) -> Row | None:
        bare_on = any("overlap_round=false" in str(x.get("name")) for x in rows(d))
        for x in rows(d):
            name = str(x.get("name"))
            state = ("overlap_round=true" in name or
                     (bare_on and "overlap_round=false" not in name))  # fmt: skip
            if state != on or ("verify_attention=fused" in name) != fused:
                continue
            bare = re.sub(r"^([^:,+]+),", r"\1:", tag.sub("", name))
            if ns_key({**x, "name": bare}) == key:
                return x
        return None

    def ratio(a: Row | None, b: Row | None) -> str:
        if a is None or b is None:
            return "-"
        r = [x / y for x, y in zip(e2e(a), e2e(b), strict=False) if y]
        return f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})" if r else "-"

    out = []
    for d in docs:
        cells = []
        for key, fused in ((NS_DEFAULT, False), (NS_LOOKUP, False), (NS_LOOKUP, True)):
            on, off = pick(d, key, True, fused), pick(d, key, False)
            cells += [ratio(off, on), f"{_acc(on)} / {_acc(off)}" if on else "-"]
        control = next((x for x in rows(d) if x.get("name") == NS_CONTROL), None)
        out.append([_ns_label(d), *cells, ratio(baseline(d), control)])
    stat = ("each ratio = the median over seeds (min-max) of the off row's E2E over the same "
            "seed's E2E of the row with the step queued (paired, interleaved in one call); "
            "acceptance = the row's drafts kept over drafts verified, queued / off; lookup, "
            "fused = the lookup queued with MLX's fused one-row attention (verify_attention="
            "fused), over the same off row; A/A = target-only over the control's same-seed E2E")
    return md_table(("Prompt, T", "default: off / on", "default acceptance",
                     "lookup: off / on", "lookup acceptance", "lookup, fused: off / on",
                     "its acceptance", "A/A control"), out), stat


def setting_ab(docs: list[Doc], setting: str, value: str = "true") -> tuple[list[str], str]:
    """A setting's A/B (never_slower.py's PRICE_AB, CHAIN_AB, PROBE_AB, CLIP_AB: the default and the
    lookup again with `setting`=`value` in the same interleave), judged as the verdict judges
    the floor: per bench and for each pair of rows, the geometric mean over seeds of the off row's E2E over the
    same seed's on row's (above 1: on was faster) with its 95% interval from the A/A
    control's per-pair noise; "on faster" / "on slower" where the interval leaves 1, "no
    difference found" where it holds 1; both rows' acceptance; then the pairs pooled per
    temperature and over all benches. Per-bench medians on the H200's host moved 0.59-1.57x in
    the A/A control of one call (run 14), so only the pooled rows can tell a setting apart."""
    import math

    sigma, n_aa = aa_sigma(docs)
    flag = f"{setting}={value}"

    def pair(d: Doc, key: str) -> tuple[Row | None, Row | None]:
        off = on = None
        for x in rows(d):
            name = str(x.get("name"))
            base = name.replace(f",{flag}", "").replace(f":{flag}", "")
            if ns_key({**x, "name": base}) != key:
                continue
            if flag in name:
                on = on or x
            else:
                off = off or x
        return off, on

    def logs(off: Row | None, on: Row | None) -> list[float]:
        if off is None or on is None:
            return []
        return [math.log(x / y) for x, y in zip(e2e(off), e2e(on), strict=False) if x > 0 and y > 0]

    def said(ls: list[float]) -> str:
        if not ls or sigma is None:
            return "-"
        return " ".join(_verdict(ls, sigma, 1.0, ("on faster", "on slower", "no difference found")))

    out, pooled = [], {}
    for d in docs:
        cells = []
        for key in (NS_DEFAULT, NS_LOOKUP):
            off, on = pair(d, key)
            ls = logs(off, on)
            for k in ("all", f"T = {prompt_t(d)[1]:g}"):
                pooled.setdefault(k, {}).setdefault(key, []).extend(ls)
            cells += [said(ls), f"{_acc(on)} / {_acc(off)}" if on else "-"]
        out.append([_ns_label(d), *cells])
    for k in sorted(pooled, key=lambda k: (k != "all", k)):
        label = "**all benches**" if k == "all" else f"**every bench at {k}**"
        out.append([label, said(pooled[k][NS_DEFAULT]), "", said(pooled[k][NS_LOOKUP]), ""])
    noise = (f"σ = {sigma:.3f}, the A/A control's per-seed log ratio, root mean square over its "
             f"{n_aa} pairs in these benches" if sigma is not None else "no A/A control here")
    stat = (f"each cell = the geometric mean over seeds ({_seeds(docs)}) of the row's E2E "
            f"without {setting} over the same seed's E2E with it (above 1: with it faster), "
            f"with its 95% interval: ±{Z95:.2f} σ/√n in log, {noise}; acceptance = drafts kept "
            "over drafts verified, with / without; the pooled rows take every pair of those "
            "benches")
    return md_table(("Prompt, T", "default: without / with", "default acceptance",
                     "lookup: without / with", "lookup acceptance"), out), stat


def _guarded(docs: list[Doc], source: str) -> list[tuple[Doc, Row, dict[str, Any]]]:
    """Each bench's rows whose guard measured `source`, with the JSON's guard.<source>."""
    out = []
    for d in docs:
        for r in rows(d):
            g = (r.get("guard") or {}).get(source)
            if g and g.get("measured_tok_s"):
                out.append((d, r, g))
    return out


def guard_rates(docs: list[Doc], source: str = "lookup") -> tuple[list[str], str]:
    """Per bench and row: the guard's measured rate of a source at each request's end
    (tokens a second of its rounds, their ratio to plain target steps), median and min-max,
    and in how many requests it was not asked at the end (stopped as slower than steps)."""
    out = []
    for d, r, g in _guarded(docs, source):
        rate, vs = g["measured_tok_s"], g.get("vs_target") or []
        stopped = sum(1 for x in g.get("guard") or [] if str(x).startswith("not asked"))
        out.append([_ns_label(d), f"`{r.get('name')}`",
                    f"{statistics.median(rate):.0f} ({min(rate):.0f}-{max(rate):.0f})",
                    f"{statistics.median(vs):.2f}" if vs else "-",
                    f"{stopped} of {len(g.get('guard') or [])}"])  # fmt: skip
    stat = (f"the JSON's guard.{source}: measured_tok_s and vs_target as each timed request "
            "ended, median (min-max) over the requests; not asked = requests whose guard "
            "had stopped the source at their end")
    return md_table(("Prompt, T", "row", "measured tok/s", "vs target steps", "not asked"),
                    out), stat


def guard_plan(docs: list[Doc], source: str = "lookup") -> tuple[list[str], str]:
    """Per bench and row, request by request: the rounds of a source the kept guard had
    counted before the request (`earlier_rounds`), its rounds left out for building an
    attention plan by the request's end (`plan_rounds`, since 4dc0329; "-" in earlier data),
    its rate against plain target steps and whether it was still asked at the end."""
    out = []
    for d, r, g in _guarded(docs, source):
        n = len(g.get("guard") or [])

        def seq(key: str, fmt: str, g: dict = g, n: int = n) -> str:
            xs = g.get(key) or [None] * n
            return "/".join("-" if x is None else format(x, fmt) for x in xs)

        asked = "/".join("stopped" if str(x).startswith("not asked") else "asked"
                         for x in g.get("guard") or [])  # fmt: skip
        out.append([_ns_label(d), f"`{r.get('name')}`", seq("earlier_rounds", "d"),
                    seq("plan_rounds", "d"), seq("vs_target", ".2f"), asked])  # fmt: skip
    stat = (f"the JSON's guard.{source}, one value per timed request in seed order (the warm-up "
            "came before the first): carried = the rounds its kept guard had counted before the "
            "request; plan rounds = its rounds left out so far because their verification built "
            "an attention plan (core/cost/guard.py); vs target steps and asked/stopped as the "
            "request ended")
    return md_table(("Prompt, T", "row", "carried rounds", "plan rounds", "vs target steps",
                     "at the end"), out), stat  # fmt: skip


def guard_requests(docs: list[Doc], source: str = "lookup") -> tuple[list[str], str]:
    """Per bench and guarded row, request by request: target-only's E2E over the row's, same
    seed; the source's rounds in the request; how often the guard stopped it and how many of
    its offers a stop turned into plain steps (`stops`, `refused`, since run 15; "-" in
    earlier data); its policy's drafted-round cost scale at the end (`cost_scale`, since run
    15's last call). A row whose requests read 4x and 1.2x on one greedy text differs in what
    its guard and policy did, which these counts tell apart without a trace."""
    out = []
    for d, r, g in _guarded(docs, source):
        base = baseline(d)
        ours, theirs = e2e(r), e2e(base) if base else []
        n = len(g.get("guard") or [])

        def seq(key: str, g: dict = g, n: int = n) -> str:
            xs = g.get(key) or [None] * n
            return "/".join("-" if x is None else f"{x:d}" for x in xs)

        speed = "/".join(f"{t / o:.2f}x" if o > 0 else "-"
                         for t, o in zip(theirs, ours, strict=False))  # fmt: skip
        scales = g.get("cost_scale") or [None] * n
        drafted = "/".join(f"{x[1]:.2f}" if x else "-" for x in scales)
        steps = ((r.get("guard") or {}).get("none") or {}).get("measured_rounds") or [None] * n
        out.append([_ns_label(d), f"`{r.get('name')}`", speed, seq("measured_rounds"),
                    "/".join("-" if x is None else f"{x:d}" for x in steps),
                    seq("stops"), seq("refused"), drafted, _texts(d, r)])  # fmt: skip
    stat = (f"one value per timed request in seed order: vs target-only = target-only's E2E "
            f"over the row's, the same seed's pair; then the JSON's guard.{source}: rounds = "
            "its measured rounds in the request, pipelined steps = the target arm's (guard."
            "none: plain steps with a step queued behind, the ones its copies did not replace), "
            "stops = the times the guard stopped it in "
            "the request, refused = its offers a stop turned into plain steps "
            "(core/cost/guard.py `asks`); round cost = its policy's drafted-round cost scale "
            "as the request ended (observed over calibrated seconds, an EMA: "
            "core/cost/policy.py `scale[1]`); text = which text the request wrote, a letter "
            "per distinct `output_sha` (its tokens' sha256, core/bench/results.py) in order "
            "of first appearance, target-only's requests first, so A is target-only's first "
            "seed's text")
    return md_table(("Prompt, T", "row", "vs target-only", "rounds", "pipelined steps",
                     "stops", "refused", "round cost", "text"), out), stat  # fmt: skip


def text_letters(doc: Doc) -> dict[str, str]:
    """A letter per distinct `output_sha` of the bench, in order of first appearance over its
    rows in bench order, target-only's first: one text reads as one letter in every row of
    the bench (a letter per row pair read two texts as "D" in one table, run 16's draft)."""
    base = baseline(doc)
    letters: dict[str, str] = {}
    for r in [*([base] if base else []), *rows(doc)]:
        for sha in r.get("output_sha") or []:
            letters.setdefault(sha, chr(ord("A") + len(letters)) if len(letters) < 26 else "?")
    return letters


def _texts(doc: Doc, row: dict) -> str:
    """The row's requests' texts as the bench's letters ("-" before run 16's data)."""
    mine = row.get("output_sha") or []
    if not mine:
        return "-"
    letters = text_letters(doc)
    return "/".join(letters[x] for x in mine)


def _e2e_on_text(r: Row | None, sha: str) -> list[float]:
    """The E2E of the row's requests that wrote the text `sha` (none without the row)."""
    if r is None:
        return []
    return [e for e, x in zip(e2e(r), r.get("output_sha") or [], strict=False) if x == sha]


def same_text(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench and text that target-only wrote: target-only's median E2E on that text over
    each row's median E2E on the same text, with the requests each median took. Greedy on the
    H200 is not bit-stable (run 16: target-only wrote three texts in three seeds of one
    bench), and a copy row's speed is mostly its text's (the same row read 0.29 s and 1.00 s
    on two texts): a seed's pair can compare two workloads, a text's cannot."""
    heads = (("default", NS_DEFAULT), ("lookup", NS_LOOKUP), ("hybrid", NS_HYBRID),
             ("model alone", NS_MODEL))
    out = []
    for d in docs:
        base, named = baseline(d), ns_names(d)
        if base is None or not base.get("output_sha"):
            continue
        letters = text_letters(d)
        control = named.get(NS_CONTROL)
        for sha in dict.fromkeys(base["output_sha"]):
            ref = _e2e_on_text(base, sha) + _e2e_on_text(control, sha)
            cells = []
            for _, key in heads:
                mine = _e2e_on_text(named.get(key), sha)
                cells.append(f"{statistics.median(ref) / statistics.median(mine):.2f}x "
                             f"({len(mine)})" if mine else "-")
            out.append([_ns_label(d), letters[sha], str(len(ref)), *cells])
    stat = ("one line per bench and text target-only wrote (a letter per distinct output_sha, "
            "the guard-requests table's letters); target-only = its requests on that text, "
            "its A/A twin's included (the same settings); each cell = their median E2E over "
            "the row's median E2E on the same text, in brackets the row's requests on it "
            "(- where it wrote that text in none)")
    return md_table(("Prompt, T", "text", "target-only", *(h for h, _ in heads)), out), stat


def one_row_price(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench: the calibration's one-row timings per mode (the same forward in each: no
    patch applies to one row), the plain step's price as run 8's code read it ("auto" less
    the dense copy's and the fused attention's savings, floored at 0) and as it reads now
    (core/dispatch/curve.py `verify_cost`), and the bench's own measured median plain step
    (target-only's step_ms)."""
    from core.dispatch.curve import VerifyCostCurve, verify_cost

    out = []
    for d in docs:
        ec = (d.get("protocol") or {}).get("engine_curve") or {}
        times = ec.get("t_verify_s") or {}
        one = {m: float(t["1"]) for m, t in times.items() if "1" in t}
        if "auto" not in one:
            continue
        a = one["auto"]
        saved = max(a - one.get("dense", a), 0.0)
        if "fused" in one and one["fused"] < a:
            saved += a - one["fused"]
        curve = VerifyCostCurve.from_dict({"times": times, "backend": "cuda",
                                           "context_len": int(ec.get("context") or 0)})  # fmt: skip
        base = baseline(d) or {}
        step = statistics.median(base.get("step_ms") or [0.0]) or None
        out.append([_ns_label(d), *(num(one[m] * 1e3, ".2f") if m in one else "-"
                                    for m in ("auto", "dense", "fused")),
                    num(max(a - saved, 0.0) * 1e3, ".2f"),
                    num(verify_cost(curve, "auto")(1) * 1e3, ".2f"),
                    num(step, ".2f")])  # fmt: skip
    stat = ("ms; each mode's cell = the calibration's median of its timed one-row forwards "
            "(the JSON's protocol.engine_curve.t_verify_s); measured step = the median over "
            "target-only's timed requests of each request's median plain step (step_ms)")
    return md_table(("Prompt, T", "auto", "dense", "fused", "step price, run 8's code",
                     "step price now", "measured step"), out), stat


def round_autopsy(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/h200/round_autopsy.py: per prompt and row, what the consumer's clock
    saw of each request untraced: its E2E, its plain steps' median gap, its drafting rounds'
    gaps (the round's own call, its host sync included, and the host work before it), and the
    gap of the step after each round (the pipeline break)."""
    out = []
    for d in docs:
        reqs = d.get("requests") or []
        for row_name in dict.fromkeys(r["row"] for r in reqs):
            mine = [r for r in reqs if r["row"] == row_name]
            e2es = [r["e2e_s"] * 1e3 for r in mine]
            steps, rounds, after, toks = [], [], [], []
            for r in mine:
                ev = r["events"]
                steps.append(statistics.median([e["gap_ms"] for e in ev if not e["proposed"]] or [0.0]))
                for i, e in enumerate(ev):
                    if e["proposed"]:
                        rounds.append(e["gap_ms"])
                        toks.append(e["tokens"])
                        if i + 1 < len(ev):
                            after.append(ev[i + 1]["gap_ms"])
            mm = lambda xs: f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})" if xs else "-"  # noqa: E731
            out.append([f"{d.get('prompt')}, T = {d.get('temperature'):g}", row_name,
                        f"{min(e2es):.0f}-{max(e2es):.0f}", mm(steps), str(len(rounds)),
                        f"{sum(toks) / len(toks):.1f}" if toks else "-", mm(rounds), mm(after)])  # fmt: skip
    stat = ("untraced requests of the bench's rows (engine reset, the kept calibration, one warm-up "
            "request each, rows rotated per seed), clocked by the consumer between events: E2E "
            "min-max (ms); plain step = each request's median gap between consecutive steps, "
            "median (min-max) over requests; a round = its gap from the event before (the plan, "
            "its catch-up and the round's call with its host sync); step after = the gap of the "
            "event after a round (the pipeline break), median (min-max) over every round")
    return md_table(("Prompt, T", "row", "E2E ms", "plain step ms", "rounds", "tokens a round",
                     "ms a round", "ms the step after"), out), stat


def rare_round(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/h200/rare_round.py: per MLX setting and stretch of plain steps before
    it, what a speculative round cost (pooled over T and R), and the first step after it."""
    out = []
    for d in docs:
        trials = [t for t in d.get("trials") or [] if not t.get("traced")]
        for st in sorted({t["stretch"] for t in trials}):
            mine = [t for t in trials if t["stretch"] == st]
            rs = [t["round_s"] * 1e3 for t in mine]
            af = [t["after_s"][0] * 1e3 for t in mine if t.get("after_s")]
            env = ", ".join(f"{k}={v}" for k, v in sorted((d.get("env") or {}).items())) or "default"
            out.append([env, str(st), str(len(mine)), f"{statistics.median(rs):.1f}",
                        f"{min(rs):.1f}-{max(rs):.1f}", f"{statistics.median(af):.1f}",
                        f"{d.get('plain_step_ms_median'):.2f}"])  # fmt: skip
    stat = ("each row = the untraced trials after that many plain target steps (0: back to back), "
            "pooled over T (0, 0.7) and R (3, 12, 25, 33 rows), shuffled; a round's ms = its call, "
            "host sync included, median and min-max; the step after = the first plain step's "
            "round time after it, median; plain step = the median pipelined step of the stretches")
    return md_table(("MLX setting", "plain steps before", "trials", "ms a round (median)",
                     "min-max", "ms the step after", "plain step ms"), out), stat


def step_split(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/h200/step_split.py, each prompt's files in the order they ran: per row,
    a request's E2E over its tokens at its own median step, the host time a plain step spent
    outside its own timer (the consumer, the plan, the loop: what the bench's step_ms leaves
    out) and the plan's share, and the loop's stretches, restarts and drafting rounds."""
    out, seen = [], Counter()
    for d in docs:
        seen[d.get("prompt")] += 1
        for row in d.get("summary") or {}:
            reqs = [r for r in d.get("requests") or [] if r["row"] == row]
            ex = [r["excess"] for r in reqs if r.get("excess")]
            outside = [statistics.fmean([x["gap"] - x["timer"] for x in r["steps"]])
                       for r in reqs if r.get("steps")]  # fmt: skip
            plan = [statistics.fmean([x["plan"] for x in r["steps"]]) for r in reqs if r.get("steps")]
            out.append([f"{d.get('prompt')}, T = {d.get('temperature')}", str(seen[d.get("prompt")]),
                        row, str(len(reqs)),
                        f"{statistics.median(ex):.3f} ({min(ex):.3f}-{max(ex):.3f})",
                        f"{statistics.median(outside):.3f}", f"{statistics.median(plan):.3f}",
                        *(str(sum(r.get(k, 0) for r in reqs))
                          for k in ("stretches", "restarts", "rounds"))])  # fmt: skip
    stat = ("run = the prompt's files in the order they ran (one device call); each row = the "
            "row's requests (one warm-up each before, rows rotated per seed); E2E over tokens x "
            "the request's median plain step (`excess`: the bench's step_ms statistic), median "
            "(min-max) over requests; outside the timer = a plain step's gap between events "
            "less its own timed span, mean per request, median over requests, and the plan's "
            "part of it likewise; stretches, restarts (a stretch begun right after a plain "
            "step) and drafting rounds summed over the requests")
    return md_table(("Prompt, T", "run", "row", "requests", "E2E / (tokens x median step)",
                     "ms a step outside its timer", "of which the plan", "stretches",
                     "restarts", "rounds"), out), stat


def step_split_ab(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/h200/step-split-ab.sh's files, listed as they ran: old tree, new tree,
    old, new, ... (the JSON does not name its tree; the script alternates them). Per prompt
    and row, every plain step of the version's requests pooled (each request's first step
    left out, as step_split.py's summary does): the median gap between events, the mean host
    time outside the step's own timer and the plan's part of it, and that outside time less
    target-only's in the same tree: what the speculative loop adds to a plain step."""
    pooled: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for i, d in enumerate(docs):
        v = "old" if i % 2 == 0 else "new"
        label = f"{d.get('prompt')}, T = {d.get('temperature')}"
        for r in d.get("requests") or []:
            m = pooled.setdefault((label, r["row"], v), {"gap": [], "out": [], "plan": []})
            for x in r["steps"][1:]:
                m["gap"].append(x["gap"])
                m["out"].append((x["gap"] - x["timer"]) * 1e3)
                m["plan"].append(x["plan"] * 1e3)
    out = []
    for label, row in dict.fromkeys((k[0], k[1]) for k in pooled):
        cells = []
        for key, fn, fmt in (("gap", statistics.median, "{:.2f}"), ("out", statistics.fmean, "{:.0f}"),
                             ("plan", statistics.fmean, "{:.0f}")):  # fmt: skip
            a, b = (pooled.get((label, row, v), {}).get(key) for v in ("old", "new"))
            cells.append(f"{fmt.format(fn(a))} → {fmt.format(fn(b))}" if a and b else "-")
        extra = []
        for v in ("old", "new"):
            base = pooled.get((label, "target-only", v), {}).get("out")
            mine = pooled.get((label, row, v), {}).get("out")
            extra.append(statistics.fmean(mine) - statistics.fmean(base) if base and mine else None)
        cells.append(" → ".join("-" if x is None else f"{x:+.0f}" for x in extra))
        n = [len(pooled.get((label, row, v), {}).get("gap", [])) for v in ("old", "new")]
        out.append([label, row, f"{n[0]} / {n[1]}", *cells])
    stat = ("old → new = the old tree's steps → the new tree's, the files alternated as they ran; "
            "steps = plain steps pooled over the version's requests (each request's first left "
            "out); gap = ms between a plain step's event and the one before, median; outside = "
            "µs of that gap outside the step's own timer (the consumer, the plan, the loop's "
            "observes: what the bench's step_ms leaves out), mean; plan = `Engine._plan`'s µs "
            "a step, mean; over target-only = outside less target-only's in the same tree and "
            "prompt")
    return md_table(("Prompt, T", "row", "steps", "median gap ms", "outside the timer µs",
                     "of which the plan µs", "outside over target-only's µs"), out), stat


def forward_split(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/h200/forward_split.py: per file, mode and R, the host's graph build,
    the mx.eval after it (encode, device, sync) and a pipelined chain's ms a forward, medians
    over the timed passes, with the chain's cost over the same mode's one-row chain."""
    out = []
    for d in docs:
        ms = d.get("ms") or {}
        for mode, by_r in ms.items():
            ref = ms.get("auto", by_r) if mode.startswith("queued-") else by_r  # vs a plain step
            one = statistics.median(ref["1"]["chain"]) if "1" in ref else None
            for r, tab in by_r.items():
                med = {k: statistics.median(v) for k, v in tab.items()}
                ratio = f"{med['chain'] / one:.2f}" if one else "-"
                out.append([str(d.get("device")), mode, r, f"{med['build']:.2f}",
                            f"{med['eval']:.2f}", f"{med['build'] + med['eval']:.2f}",
                            f"{med['chain']:.2f}", ratio])  # fmt: skip
    d0 = docs[0] if docs else {}
    stat = (f"ms, medians over {d0.get('repeats')} timed passes after one warm-up (modes and R "
            f"interleaved, the KV length advancing by one a forward from a {d0.get('context')}-"
            f"token context; {d0.get('target')}, MLX {d0.get('mlx')}); build = the Python call "
            "that makes the lazy graph; eval = the mx.eval after it (encode, device, host sync); "
            f"pipelined = a chain of {d0.get('chain')} forwards, each fed the one before's "
            "argmax, queued with async_eval and read at the end, per forward; x one row = "
            "pipelined over the same mode's one-row chain (a queued-* mode: over auto's, the "
            "plain step it replaces)")
    return md_table(("device", "mode", "R", "build", "eval", "build + eval", "pipelined",
                     "x one row"), out), stat


CURVE_ROWS = ("2", "4", "8", "16", "24", "33")


def curve_modes(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench, the engine's calibration (the JSON's protocol.engine_curve.t_verify_s): each
    mode's timing at a few R, and at how many of the curve's R from 2 up "fused" read cheaper
    than "auto" (on CUDA the plain attention), which is where the engine verifies with it."""
    out = []
    for d in docs:
        if "times" in d:  # a `specdec-tui calibrate --json` curve: its times in seconds, by R
            times = {m: {str(r): t for r, t in tab.items()} for m, tab in d["times"].items()}
            label = f"calibrate, context {d.get('context_len')}"
        else:
            times = ((d.get("protocol") or {}).get("engine_curve") or {}).get("t_verify_s") or {}
            label = _ns_label(d) if times else ""
        if "fused" not in times or "auto" not in times:
            continue
        rows = [r for r in times["auto"] if int(r) > 1 and r in times["fused"]]
        cheaper = sum(times["fused"][r] < times["auto"][r] for r in rows)
        for mode in ("auto", "fused"):
            out.append([label, mode, *(num(times[mode][r] * 1e3, ".1f") if r in times[mode]
                                              else "-" for r in CURVE_ROWS),
                        f"{cheaper} of {len(rows)}" if mode == "fused" else ""])  # fmt: skip
    stat = ("ms, the calibration's median of its timed forwards at each R (the KV length "
            "advancing by one a call); auto = MLX's kernels with the backend's attention (plain "
            "on CUDA), fused = MLX's fused attention as the engine asks for it; fused cheaper = "
            "the R from 2 up where fused read less than auto")
    return md_table(("Prompt, T", "mode", *(f"R = {r}" for r in CURVE_ROWS), "fused cheaper"),
                    out), stat


def curve_buckets(docs: list[Doc], mode: str = "auto") -> tuple[list[str], str]:
    """Per bench, the engine's calibration of `mode` within each row bucket of the bucketed
    attention (core/dispatch/bucketed.py: 2-16 rows verify at one padded shape, 17-33 at
    another): min, median and max ms and the R where the min and the max fell. Within a
    bucket the attention's shape is one, so a spread there is the calibration's noise, and
    the cost-aware policy prices each k by these points."""
    out = []
    for d in docs:
        times = (((d.get("protocol") or {}).get("engine_curve") or {}).get("t_verify_s")
                 or {}).get(mode) or {}  # fmt: skip
        if "1" not in times:
            continue
        cells = [num(times["1"] * 1e3, ".1f")]
        for lo, hi in ((2, 16), (17, 33)):
            xs = {r: times[str(r)] * 1e3 for r in range(lo, hi + 1) if str(r) in times}
            if not xs:
                cells += ["-", "-"]
                continue
            rmin, rmax = min(xs, key=xs.get), max(xs, key=xs.get)
            cells += [f"{xs[rmin]:.1f} / {statistics.median(xs.values()):.1f} / {xs[rmax]:.1f}",
                      f"{rmin} / {rmax}"]  # fmt: skip
        out.append([_ns_label(d), *cells])
    stat = (f"ms, the JSON's protocol.engine_curve.t_verify_s[{mode}] (the calibration's median "
            "of its timed forwards at each R, before the bench); min / median / max over the R "
            "of each row bucket, and the R where its min and max fell")
    return md_table(("Prompt, T", "R = 1", "R 2-16: min / median / max", "at R",
                     "R 17-33: min / median / max", "at R"), out), stat  # fmt: skip


def plan_cost(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/policy/plan_cost.py, one file per commit (before, after): per price
    regime, prompt and row, the engine's plan between plain steps, median and mean ms."""
    keyed = [{(r["prices"], r["prompt"], r["row"]): r for r in d.get("results") or []} for d in docs]
    heads = [f"{d.get('commit', '?')}: median (mean) ms" for d in docs]
    out = []
    for key in keyed[0] if keyed else []:
        cells = [f"{k[key]['median_ms']:.3f} ({k[key]['mean_ms']:.3f})" if key in k else "-"
                 for k in keyed]  # fmt: skip
        out.append([key[0], key[1], key[2], *cells])
    machine = ", ".join(sorted({f"{d.get('machine')} Python {d.get('python')}" for d in docs}))
    stat = (f"each cell = the engine's `_plan` after each of an answer's tokens (the prompt's text "
            f"again), 3 passes, its median and mean ms per step, on {machine} (this repository's "
            "CI machine: host work only, no MLX call is timed); h200 = run 5's interleaved "
            "calibration of the default model, rows-cost-steps = the same with R rows priced at R "
            "single-row steps")
    return md_table(("prices", "prompt", "row", *heads), out), stat


def lookup_after_round(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/lookup/after_round.py's replay: per greedy bench, the default's copy
    policy at each (lookup_min_match, lookup_min_match_after_round), its tokens a round and
    the speedup its rounds would reach at the bench's own calibrated prices with each
    pipeline break charged, beside the bench's measured lookup row."""
    (d,) = docs
    configs = [tuple(c) for c in d["configs"]]

    def head(c: tuple[int, int]) -> str:
        return f"{c[0]}+" + (f", {c[1]}+ after a round" if c[1] else "")

    out = []
    for r in d["rows"]:
        cells = []
        for c in configs:
            x = next(x for x in r["replays"] if (x["min_match"], x["after_round"]) == c)
            cells.append(f"{x['tokens_per_round']:.2f} / {x['target_only_s'] / x['broken_s']:.2f}x")
        measured = r.get("measured_lookup_x")
        call = Path(r.get("source", "")).parent.name  # which call's answer it replays
        out.append([r["bench"].removesuffix("-t0.0") + (f" ({call})" if call else ""), *cells,
                    "-" if measured is None else f"{measured:.2f}x"])
    stat = ("greedy, each bench's seed-0 answer of target-only, teacher-forced; each cell = "
            "tokens a round / the predicted speedup: target-only's steps at the calibration's "
            "one-row price over the replayed rounds at its price of k + 1 rows, plus one step "
            "for each plain step right after a drafting round (the pipeline break); the policy "
            "hears acceptance, seconds and breaks as in the engine; measured = the bench's "
            "lookup row, target-only's median E2E over its (a different clock: host work, "
            "plan builds, noise)")
    return md_table(("Prompt", *(f"match {head(c)}" for c in configs), "lookup, measured"),
                    out), stat


def copy_stall(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/lookup/stall_replay.py's replay: per greedy bench and variant, the
    predicted speedup of the default's copy policy with no stall and with each pattern of
    stalled drafting rounds, and its drafting rounds (a collapse reads as 1.00x and few)."""
    (d,) = docs
    patterns = list(d["patterns"])
    out = []
    for r in d["rows"]:
        call = Path(r.get("source", "")).parent.name
        for gate in d["gates"]:
            cells = []
            for p in patterns:
                x = next(x for x in r["replays"] if (x["gate"], x["stalls"]) == (gate, p))
                cells.append(f"{x['target_only_s'] / x['broken_s']:.2f}x ({x['drafting_rounds']})")
            out.append([r["bench"].removesuffix("-t0.0") + (f" ({call})" if call else ""),
                        gate, *cells])  # fmt: skip
    stat = ("greedy, each bench's seed-0 answer of target-only, teacher-forced, replayed as "
            "after_round.py's default (match 2+); each cell = the predicted speedup (the "
            "replayed rounds at the bench's calibrated prices, each pipeline break charged, over "
            "target-only's steps) and in brackets the drafting rounds; a stalled round is heard "
            "by the policy at that multiple of its price and charged at its price; variant = the "
            "copy probe's cost: observed = the drafted rounds' observed scale "
            "(probe_at_observed_cost = true, the default), lesser = the lesser of it and the "
            "calibration; clip 1.5x = each observation moving the cost scale by at most 1.5x "
            "of it (cost_scale_clip = 1.5; the default 5x)")
    return md_table(("Prompt", "variant", *(f"stall: {p}" for p in patterns)), out), stat


def copy_texts(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/lookup/texts.py: per greedy prompt, each distinct seed-0 text the
    calls' rows wrote, its lookup copy bound, and the speeds of the rows that wrote it, so
    a reader sees whether a row's speed follows its text or its call."""
    (d,) = docs
    texts: dict[tuple[str, str], dict[str, Any]] = {}
    for b in d["benches"]:
        prompt, call = b["bench"].removesuffix("-t0.0"), Path(b["source"]).parent
        label = f"{call.parent.name.rsplit('-', 1)[-1]}/{call.name.removeprefix('never-slower-')}"
        for r in b["rows"]:
            t = texts.setdefault((prompt, r["output_sha"]), {
                "bound": r["copy_tokens_per_round"], "oracle": r["oracle_tokens_per_round"],
                "target-only": [], "lookup": [], "default": []})  # fmt: skip
            kind = ("target-only" if r["mode"] == "target-only"
                    else "lookup" if r["draft_source"] == "lookup" else "default")  # fmt: skip
            t[kind].append(label if kind == "target-only"
                           else f"{r['vs_target_only']:.2f}x ({label})")  # fmt: skip
    out = []
    for (prompt, sha), t in sorted(texts.items(), key=lambda kv: (kv[0][0], -kv[1]["bound"])):
        calls = Counter(t["target-only"])  # target-only and its A/A twin, by call
        wrote = ", ".join(c if n == 1 else f"{c} (x{n})" for c, n in calls.items())
        out.append([prompt, f"`{sha[:8]}`", f"{t['bound']:.2f}", f"{t['oracle']:.2f}", wrote or "-",
                    ", ".join(t["lookup"]) or "-",
                    ", ".join(t["default"]) or "-"])  # fmt: skip
    stat = ("greedy; one line per distinct seed-0 text (`output_sha`, its first 8 hex digits) "
            "that a row of these calls wrote; copy bound = tokens a round when every repeat of "
            "2+ tokens is copied, up to 32 drafts, teacher-forced on that text (lookup/"
            "ceiling.py `replay`); any copy = the same when each round copies the longest "
            "earlier run of the text from anywhere (ceiling.py `oracle`), a bound for any "
            "copying drafter; a round costs at least a plain step, so no copying row beats "
            "target-only by more than its text's tokens a round; then the rows whose seed-0 "
            "request wrote it: target-only "
            "and its A/A twin by call, the lookup rows and the default rows (A/B variants "
            "included) with their median E2E speed over target-only's in that call; a call is "
            "its data folder's session / never-slower call (s18: data/h200-2026-12-03-s18/, "
            "s19: data/h200-2026-12-04-s19/). Only seed 0's tokens are "
            "kept: a row's other seeds may have written another text")
    return md_table(("Prompt", "text", "lookup copy (tokens a round)", "any copy",
                     "target-only wrote it in",
                     "lookup rows", "default rows"), out), stat  # fmt: skip


def lookup_ceiling(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/lookup/ceiling.py's replay: per greedy bench, the lookup's tokens a
    round when asked at every repeat, a copying bound, the bench's own, and the speedups."""
    (d,) = docs
    out = []
    for r in d["rows"]:
        name = r["bench"].removesuffix("-t0.0")
        out.append([name, f"{r['always']['tokens_per_round']:.2f}",
                    f"{r['always_own_answer']['tokens_per_round']:.2f}",
                    f"{r.get('policy_tokens_per_round', 0):.2f}",
                    f"{r.get('substitution_tokens_per_round', 0):.2f}",
                    f"{r['oracle_tokens_per_round']:.2f}", f"{r['bench_lookup_tokens_per_round']:.2f}",
                    f"{r['ceiling_x']:.2f}x", f"{r['ceiling_own_x']:.2f}x",
                    f"{r['bench_lookup_ratio']:.2f}x"])  # fmt: skip
    stat = (f"greedy, 256 tokens, k = {d['k']}, repeats of {d['min_match']}+ tokens; tokens a "
            "round = the answer's tokens over its rounds, teacher-forced on the seed-0 answer of "
            "target-only (\"always\") or of the lookup row (\"own answer\"); the policy's k = "
            "the default's cost-aware copy policy choosing each round's k, priced by the curve, "
            "on target-only's answer; substitution skip = after a correction the copy goes on "
            "one source token further, on target-only's answer (lookup/ceiling.py "
            "`substitution`); bound = each round copies the longest earlier run anywhere; "
            "ceiling = every round priced at the "
            f"calibrated 33-row verification ({d['verify_33_s'] * 1e3:.1f} ms) and every plain "
            f"step at the 1-row forward ({d['step_s'] * 1e3:.1f} ms) of {d['curve']}")
    return md_table(("Prompt", "always, tokens a round", "always, own answer",
                     "the policy's k", "substitution skip (dropped)", "copy bound",
                     "bench's lookup", "ceiling", "ceiling, own answer", "bench's lookup, measured"),
                    out), stat  # fmt: skip


def _catch_up(t: list[dict[str, Any]], src: str) -> list[int]:
    """Per round of `src` in a trace, the tokens committed since that source's previous round
    ended (its KV cache is that far behind the target's): the context the round starts at
    minus where the last one left off."""
    out, end = [], (t[0].get("context", 0) if t else 0)
    for x in t:
        if (x.get("source") or "") == src:
            out.append(int(x.get("context", 0)) - int(end))
            end = x.get("context", 0) + x.get("tokens", 0)
    return out


ROUND_KINDS = (("", "plain step"), ("lookup", "lookup round"), ("model", "model round"))


def traced_k(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench and drafting row, its traced request: the E2E, its drafting rounds and plain
    steps, the drafting round at which k first left the 16-row bucket (k + 1 > 16, core/
    dispatch/bucketed.py: a copy policy goes long once runs have proven long), the tokens a
    drafting round committed (mean) and the drafts kept. At T = 0 every row commits the same
    text, so these say how each policy's choices of k cut it into rounds."""
    out = []
    for d in docs:
        for r in rows(d):
            t = trace(r)
            drafted = [x for x in t if x.get("source") not in (None, "", "none")]
            if not drafted:
                continue
            first = next((i + 1 for i, x in enumerate(drafted) if x.get("proposed", 0) + 1 > 16),
                         None)  # fmt: skip
            proposed = sum(x.get("proposed", 0) for x in drafted)
            kept = sum(x.get("accepted", 0) for x in drafted)
            out.append([_ns_label(d), ns_row_label(r, code=False), secs(r.get("traced_e2e_s")),
                        str(len(drafted)), str(len(t) - len(drafted)),
                        "-" if first is None else f"{first} of {len(drafted)}",
                        num(sum(x.get("tokens", 0) for x in drafted) / len(drafted), ".1f"),
                        pct(kept / proposed if proposed else None)])  # fmt: skip
    stat = ("one traced request a row (the first seed's, right after its timed request; its k "
            "policy fresh, as each request's is; each round synced, so slower than untraced): E2E; drafting rounds and plain steps; the first drafting round "
            "proposing more than 15 (verified past the 16-row bucket); tokens a drafting round "
            "committed, mean; drafts kept of drafts proposed")
    return md_table(("Prompt, T", "row", "traced E2E", "drafting rounds", "plain steps",
                     "k > 15 from", "tokens a round", "kept"), out), stat  # fmt: skip


def traced_rounds(docs: list[Doc]) -> tuple[list[str], str]:
    """The traced request of each row, its rounds split by kind (plain target step, lookup
    round, model round): how many, the median ms of the round and of each phase, and the
    draft ms per drafted token. Traced rounds sync after each phase, so they are not
    pipelined: a plain step here costs more than in an untraced request."""
    out = []
    for d in docs:
        for r in rows(d):
            t = trace(r)
            for src, kind in ROUND_KINDS:
                xs = [x for x in t if (x.get("source") or "") == src]
                if not xs:
                    continue

                def med(key: str, xs: list[dict[str, Any]] = xs) -> str:
                    return num(statistics.median(x.get(key, 0.0) for x in xs), ".1f")

                drafted = sum(x.get("proposed", 0) for x in xs)
                gaps = _catch_up(t, src) if src == "model" else []
                rest = statistics.median(x.get("sample_ms", 0.0) + x.get("cache_ms", 0.0)
                                         + x.get("other_ms", 0.0) for x in xs)
                out.append([_ns_label(d), ns_row_label(r, code=False),
                            kind, str(len(xs)),
                            num(sum(x.get("total_ms", 0.0) for x in xs), ".0f"),
                            med("total_ms"), med("draft_ms"), med("verify_ms"), num(rest, ".1f"),
                            num(statistics.median(x.get("proposed", 0) for x in xs), ".0f"),
                            num(sum(x.get("draft_ms", 0.0) for x in xs) / drafted
                                if drafted else None, ".1f"),
                            "/".join(str(g) for g in gaps) or "-"])
    stat = ("one traced request a row (256 tokens), its rounds by kind; ms, total = all rounds "
            "of that kind; round, draft, verify, sample + cache + other, drafts = medians over "
            "those rounds; draft ms a drafted token = the kind's draft ms over its drafted tokens; "
            "tokens behind = per model round, the tokens committed since the previous model "
            "round ended (the first: since the request's first round), which the draft model "
            "reads before it drafts")
    return md_table(("Prompt, T", "Row", "round", "rounds", "ms, total", "ms a round",
                     "draft", "verify", "sample + cache + other", "drafts a round",
                     "draft ms a drafted token", "tokens behind"), out), stat


def traced_outside(docs: list[Doc]) -> tuple[list[str], str]:
    """The traced request of each row: its E2E, the ms inside its rounds and the ms outside
    them (prefill, set-up, between rounds), against target-only's outside ms, same bench."""
    out = []
    for d in docs:
        b = baseline(d)
        base = b.get("outside_rounds_ms") if b else None
        for r in rows(d):
            o = r.get("outside_rounds_ms")
            out.append([_ns_label(d), ns_row_label(r, code=False),
                        secs(r.get("traced_e2e_s")),
                        num(sum(x.get("total_ms", 0.0) for x in trace(r)), ".0f"),
                        num(o, ".0f"),
                        num(o - base if o is not None and base is not None else None, "+.0f")])
    return md_table(("Prompt, T", "Row", "traced E2E", "ms in rounds", "ms outside rounds",
                     "outside, vs target-only's"), out), (
        "one traced request a row; ms outside rounds = the request's prefill and everything "
        "between its rounds (`outside_rounds_ms`)")


# -- first use on a fresh machine (issue 31) ---------------------------------------------------


def _kernel_kinds(names: Sequence[str]) -> str:
    """A step's new kernel-cache files, by kernel (the .ptx of each; .cu and .txt are its
    source and log): qmm tiles by name, the fused elementwise kernels counted."""
    ptx = [n.removesuffix(".ptx") for n in names if n.endswith(".ptx")]
    named = sorted(n.removesuffix("_affine") for n in ptx if not n.startswith("CV2"))
    fused = len(ptx) - len(named)
    return ", ".join(named + ([f"{fused} fused elementwise"] if fused else [])) or "-"


def first_probe(docs: list[Doc]) -> tuple[list[str], str]:
    """first_probe.py's steps, a row each: seconds and the kernels each added, per variant."""
    variants = [v for d in docs for v in ((d.get("variants") or {}).values() or [d])]
    steps: list[str] = []
    for v in sorted(variants, key=lambda v: -len(v.get("steps") or [])):  # the longest's order
        steps += [s["step"] for s in v.get("steps") or [] if s["step"] not in steps]
    out = []
    for name in steps:
        cells = [name]
        for v in variants:
            s = next((x for x in v.get("steps") or [] if x["step"] == name), None)
            cells += ([num(s.get("s"), ".2f"), f"{s.get('kernels_added', 0)} "
                       f"({(s.get('bytes_added') or 0) / 1e6:.1f} MB)",
                       _kernel_kinds(s.get("kernels") or [])] if s else ["-", "-", "-"])
        out.append(cells)
    head = ["Step"]
    for v in variants:
        head += [f"{v.get('variant')}: s", "files added", "kernels among them"]
    return md_table(head, out), (
        "one step at a time on an empty kernel cache (MLX " + str(variants[0].get("mlx", "?"))
        + ", " + str(variants[0].get("device", "?")) + "); files added = new files in the kernel "
        "cache after the step (a kernel is a .ptx, .cu and .txt file), and their size; kernels among "
        "them = the .ptx names the probe listed (qmm = quantized matrix-matrix tiles)")


STAMP = re.compile(r"^\[\s*(?P<s>[\d.]+) s\] (?P<stream>out|err): (?P<text>.*)$")
MILESTONES = (("imports done (\"loading\")", "loading "),
              ("load done (narrow start)", "first use of this GPU"),
              ("calibration reused", "calibration kept from"),
              ("kernels compiled", "compiled GPU kernels"),
              ("calibrated", "calibrated in"),
              ("prefill starts", "prefilling"))


def _stamps(text: str) -> list[tuple[float, str]]:
    return [(float(m["s"]), m["text"]) for line in text.splitlines() if (m := STAMP.match(line))]


def first_use(docs: list[Doc]) -> tuple[list[str], str]:
    """first-use.sh's parts: each milestone's stamp in the part's log (seconds since the
    command started), the first token on stdout and the exit from first-use.json."""
    doc, *logs = docs
    parts = doc.get("parts") or {}
    names = [str(lg.get("name", "")).removeprefix("first-use-").removesuffix(".log")
             for lg in logs]  # fmt: skip
    out = []
    for label, needle in MILESTONES:
        cells = []
        for lg in logs:
            at = next((s for s, t in _stamps(str(lg.get("text", ""))) if t.startswith(needle)
                       or needle in t[:40]), None)  # fmt: skip
            cells.append(f"{at:.2f}" if at is not None else "-")
        if any(c != "-" for c in cells):
            out.append([label, *cells])
    for label, key in (("first token on stdout", "first_token_s"), ("exit", "total_s")):
        out.append([label, *(num((parts.get(n) or {}).get(key), ".2f") for n in names)])
    out.append([f"goal: first token <= {doc.get('goal_s', '?'):g} s",
                *(_met((parts.get(n) or {}).get("met")) for n in names)])
    return md_table(("Seconds since the command started", *names), out), (
        "stamps from each part's log (first-use.sh stamps every line); first token and exit "
        "from first-use.json")


for _part in ("cold", "warm"):
    FIELDS[f"first_token_{_part}"] = lambda d, r, p=_part: secs(
        ((d.get("parts") or {}).get(p) or {}).get("first_token_s"))


IMPORT = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)")


def _imports(text: str) -> list[tuple[int, int, int, str]]:
    """`python -X importtime` lines: (self us, cumulative us, depth, module)."""
    return [(int(m[1]), int(m[2]), len(m[3]) // 2, m[4])
            for line in text.splitlines() if (m := IMPORT.match(line))]


def importtime(docs: list[Doc]) -> tuple[list[str], str]:
    """Where the CLI's imports go: the chain from core.cli down to the heaviest module
    (cumulative s at each link), then the packages by their modules' own time; one column
    per importtime file (without and with bytecode)."""
    runs = [_imports(str(d.get("text", ""))) for d in docs]
    names = [str(d.get("name", "?")).removesuffix(".txt") for d in docs]
    ref = runs[-1]
    # The chain: from the heaviest top-level import, each step the heaviest child (importtime
    # lists a module's children right before it, one level deeper).
    chain: list[str] = []
    idx = max((i for i, x in enumerate(ref) if x[2] == 0), key=lambda i: ref[i][1])
    while True:
        chain.append(ref[idx][3])
        depth, kids, j = ref[idx][2], [], idx - 1
        while j >= 0 and ref[j][2] > depth:
            if ref[j][2] == depth + 1:
                kids.append(j)
            j -= 1
        if not kids or ref[max(kids, key=lambda k: ref[k][1])][1] < 0.5 * ref[idx][1]:
            break
        idx = max(kids, key=lambda k: ref[k][1])

    def cum(run: list[tuple[int, int, int, str]], mod: str) -> str:
        return num(max((c for _, c, _, n in run if n == mod), default=None) and
                   max(c for _, c, _, n in run if n == mod) / 1e6, ".2f")

    def total(run: list[tuple[int, int, int, str]]) -> float:
        return sum(c for _, c, d, _ in run if d == 0) / 1e6

    out = [["all imports", *(f"{total(x):.2f}" for x in runs)]]
    # Markdown strips a cell's leading spaces: the depth is a dot a level
    out += [[f"{'· ' * i}`{m}`", *(cum(x, m) for x in runs)] for i, m in enumerate(chain)]
    own: dict[str, list[float]] = {}
    for k, run in enumerate(runs):
        for s, _, _, n in run:
            own.setdefault(n.split(".")[0], [0.0] * len(runs))[k] += s / 1e6
    top = sorted(own, key=lambda p: -own[p][-1])[:8]
    out += [[f"package `{p}` (own time of its modules)", *(f"{v:.2f}" for v in own[p])]
            for p in top]
    return md_table(("Import (s, cumulative)", *names), out), (
        "python -X importtime of the chat command's imports; chain = from the heaviest top-level "
        "import, each line its heaviest child (a dot a level); packages = the sum of their modules' own (self) "
        "time, the 8 heaviest with bytecode; importtime's own bookkeeping inflates all of it")


# -- the tables the pages use: NAME -> renderer ------------------------------------------------

SEED_COLS = (("Configuration", "label"), ("Acceptance", "acceptance"),
             ("Rounds/request", "rounds"), ("Median E2E (min-max)", "median_mm"),
             ("vs target-only", "ratio"))
PRED_COLS = (*SEED_COLS, ("Predicted", "predicted"), ("Measured (decode)", "decode"),
             ("Efficiency", "efficiency"))
PHASE_COLS = (("Configuration", "name"), ("draft", "draft"), ("verify", "verify"),
              ("sample", "sample"), ("cache", "cache"), ("prefill + outside rounds", "outside"))
PEER_COLS = (("Row", "label"), ("Median E2E (min-max)", "median_mm"), ("vs mlx-lm (medians)",
             "peer_ratio"), ("paired: median", "paired_median"), ("min-max", "paired_min_max"),
             ("per round (traced, median)", "round_ms"))
LOOKUP_COLS = (("Configuration", "label"), ("Acceptance", "acceptance"),
               ("Rounds/request", "rounds"), ("Median E2E (min-max)", "median_mm"),
               ("vs target-only", "ratio"), ("Predicted", "predicted"),
               ("Measured (decode)", "decode"), ("Efficiency", "efficiency"),
               ("Tracing overhead", "overhead"))

def round_ops(docs: list[Doc]) -> tuple[list[str], str]:
    """round_ops.py's counts, before and after (two files) or one file: per kind of round,
    its own MLX calls (outside the models' forwards), its host syncs, the models' calls."""
    cases = [{c.get("case"): c for c in d.get("cases") or []} for d in docs]
    names = list(cases[-1])
    out = []
    for name in names:
        got = [c.get(name) or {} for c in cases]
        cells = [" -> ".join(num(g.get(k), ".1f") for g in got)
                 for k in ("own_calls", "syncs")]  # fmt: skip
        out.append([name, *cells, num(got[-1].get("model_calls"), ".0f"),
                    str(got[-1].get("rounds", "-"))])  # fmt: skip
    commits = " -> ".join(str(((d.get("environment") or {}).get("specdec_tui") or {})
                              .get("commit", "?"))[:7] for d in docs)  # fmt: skip
    head = ("Round", "own MLX calls a round", "host syncs a round",
            "MLX calls in the models' forwards", "rounds counted")
    return md_table(head, out), (f"mean per round; a -> b: the code at {commits} "
                                 "(round_ops.py on shape:tiny, CPU)")


TABLES: dict[str, Callable[[list[Doc]], tuple[list[str], str]]] = {
    "bench-seed": bench(SEED_COLS),
    "bench-predicted": bench(PRED_COLS),
    "bench-lookup": bench(LOOKUP_COLS),
    "bench-peer": bench(PEER_COLS, only=("target-only greedy", "mlx-lm target-only",
                                         "speculative greedy k=4", "mlx-lm speculative k=4")),
    "phases": bench(PHASE_COLS),
    "phases-comm": bench((*PHASE_COLS[:5], ("comm", "comm"), PHASE_COLS[5],
                          ("traced E2E", "traced_e2e"), ("tracing overhead", "overhead"))),
    "prediction": bench((("Configuration", "name"), ("mean k", "mean_k"),
                         ("Predicted", "predicted"), ("Measured (decode)", "decode"),
                         ("Efficiency", "efficiency"), ("best k here (predicted)", "best_k"),
                         ("draft ms, predicted / traced", "draft_phase"),
                         ("verify ms, predicted / traced", "verify_phase")),
                        where=lambda r: r.get("prediction")),
    "cpu-timing": bench((("Configuration", "label"), ("Min-max E2E", "min_max"), ("TTFT", "ttft"),
                         ("Decode tok/s", "tok_s"), ("Mean accepted length", "mal"),
                         ("Per-position acceptance", "ppa"))),
    "cpu-phases": bench((("Configuration", "label"), ("draft", "draft"), ("verify", "verify"),
                         ("sample", "sample"), ("cache", "cache"), ("other", "other"),
                         ("prefill + outside rounds", "outside"), ("traced E2E", "traced_e2e"),
                         ("tracing overhead", "overhead"), ("predicted kernel", "kernel"))),
    "cpu-nll": bench((("Configuration", "label"), ("Target NLL/token", "nll"),
                      ("Target-only NLL/token", "nll_base"), ("Difference", "nll_delta"),
                      ("Mean per-step TV", "tv"))),
    "per-round": bench((("Configuration", "name"), ("rounds", "traced_rounds"),
                        ("draft ms per step", "draft_step_ms"),
                        ("verify ms per round", "verify_round"),
                        ("sample ms per round", "sample_round"),
                        ("tokens per round", "tokens_round")),
                       only=("target-only", "fixed-8-tv1:bonus=true", "fixed-8-tv1:k=15,bonus=true",
                             "fixed-8-tv1:k=15,bonus=true,fused_draft=true",
                             "fixed-8-tv1:k=31,bonus=true")),
    "lookup-matrix": lookup_matrix,
    "min-match": min_match,
    "calibration": calibration,
    "calibration-row": calibration_row,
    "host-cost": host_cost,
    "step-costs": step_costs,
    "seed-m2": seed_m2,
    "dispatch-matrix": dispatch_matrix,
    "cost-aware-runs": cost_aware_runs,
    "tp-pair": tp_pair,
    "never-slower": never_slower,
    "never-slower-goals": never_slower_goals,
    "never-slower-summary": never_slower_summary,
    "model-alone-split": model_alone_split,
    "never-slower-copy": never_slower_copy,
    "step-split": step_split,
    "round-ops": round_ops,
    "never-slower-kept": never_slower_kept,
    "never-slower-tally": never_slower_tally,
    "never-slower-control": never_slower_control,
    "never-slower-verdict": never_slower_verdict,
    "never-slower-normalized": never_slower_normalized,
    "never-slower-steps": never_slower_steps,
    "step-split-ab": step_split_ab,
    "step-excess": step_excess,
    "round-autopsy": round_autopsy,
    "one-row-price": one_row_price,
    "overlap-ab": overlap_ab,
    "price-ab": lambda docs: setting_ab(docs, "price_buckets"),
    "chain-ab": lambda docs: setting_ab(docs, "lookup_min_match_after_round", "1"),
    "guard-requests": guard_requests,
    "probe-ab": lambda docs: setting_ab(docs, "probe_at_observed_cost"),
    "copy-stall": copy_stall,
    "same-text": same_text,
    "clip-ab": lambda docs: setting_ab(docs, "cost_scale_clip", "1.5"),
    "guard-rates": guard_rates,
    "guard-plan": guard_plan,
    "traced-k": traced_k,
    "curve-buckets": curve_buckets,
    "forward-split": forward_split,
    "curve-modes": curve_modes,
    "rare-round": rare_round,
    "plan-cost": plan_cost,
    "never-slower-runs": never_slower_runs,
    "target-only-spread": target_only_spread,
    "traced-rounds": traced_rounds,
    "lookup-ceiling": lookup_ceiling,
    "copy-texts": copy_texts,
    "lookup-after-round": lookup_after_round,
    "lookup-round-cost": lookup_round_cost,
    "traced-outside": traced_outside,
    "first-probe": first_probe,
    "first-use": first_use,
    "importtime": importtime,
}


# -- rewriting the pages -----------------------------------------------------------------------


TEXT_SUFFIXES = (".log", ".txt")


def _load(page: Path, src: str, cache: dict[Path, Doc] | None = None) -> list[Doc]:
    """The files a block names, each parsed once per page (values quote the same files)."""
    cache = {} if cache is None else cache
    out = []
    for s in src.split(","):
        path = (page.parent / s.strip()).resolve()
        if path not in cache:
            # a log or importtime text (plain or .xz) is read as {"name", "text"}; the rest JSON
            plain = Path(path.name.removesuffix(".xz"))
            cache[path] = ({"name": plain.name, "text": read_text(path)}
                           if plain.suffix in TEXT_SUFFIXES else load_json(path))
        out.append(cache[path])
    return out


def _link(src: str) -> str:
    """The block's files as links; where several share a folder, it is named once and each
    link reads the rest of its path (the pages' footers were a third of never-slower.md)."""
    paths = [s.strip() for s in src.split(",")]
    common = os.path.commonpath(paths) if len(paths) > 1 else ""
    if not common or common in paths:
        return ", ".join(f"[{p}]({p})" for p in paths)
    cut = len(common) + 1
    return f"in {common}/: " + ", ".join(f"[{p[cut:]}]({p})" for p in paths)


def render_page(page: Path) -> str:
    """The page with every generated block and value rewritten from its data."""
    text = page.read_text()
    cache: dict[Path, Doc] = {}
    last: list[str] = []  # the files of the block before, in page order

    def block(m: re.Match[str]) -> str:
        name, src = m["name"], m["src"]
        if name not in TABLES:
            raise KeyError(f"{page.name}: no table {name!r} in render.py's TABLES")
        lines, stat = TABLES[name](_load(page, src, cache))
        # A run's tables often read the same files: linked once, then "the same files"
        same = [s.strip() for s in src.split(",")] == last
        data = "the same files as the table before" if same else _link(src)
        last[:] = [s.strip() for s in src.split(",")]
        body = "\n".join(lines) + f"\n\n*{stat[0].upper() + stat[1:]}. Data: {data}.*\n"
        return m.group(1) + body + m.group(5)

    def value(m: re.Match[str]) -> str:
        (doc,) = _load(page, m["src"], cache)
        # a row of "-" quotes a file without bench rows (first-use.json, say)
        r = {} if m["row"] == "-" else row(doc, m["row"])
        return m.group(1) + FIELDS[m["field"]](doc, r) + m.group(6)

    return VALUE.sub(value, BLOCK.sub(block, text))


def pages(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if "data" not in p.relative_to(root).parts)


def check(root: Path = ROOT) -> list[str]:
    """Each generated block or value that differs from its data, as 'page: what'."""
    problems = []
    for page in pages(root):
        old, new = page.read_text(), render_page(page)
        if old == new:
            continue
        olds = [m.group(0) for m in (*BLOCK.finditer(old), *VALUE.finditer(old))]
        news = [m.group(0) for m in (*BLOCK.finditer(new), *VALUE.finditer(new))]
        for o, n in zip(olds, news, strict=True):
            if o != n:
                head = o.splitlines()[0][:120]
                problems.append(f"{page.relative_to(root)}: {head} differs from its data")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 on a mismatch")
    ap.add_argument("--root", type=Path, default=ROOT, help="the benchmarks folder")
    args = ap.parse_args(argv)
    if args.check:
        problems = check(args.root)
        for p in problems:
            print(p)
        return 1 if problems else 0
    for page in pages(args.root):
        new = render_page(page)
        if new != page.read_text():
            page.write_text(new)
            print(f"rewrote {page.relative_to(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
