"""Tables of the H200 editions, the CPU page and the lookup's minimum match (archive/h200*.md,
cpu.md, archive/lookup-min-match.md): tables over several files, or not of a bench."""

from __future__ import annotations

from bench_tables.rows import (
    FIELDS,
    STATISTIC,
    Doc,
    baseline,
    median,
    median_mm,
    overhead,
    per_round,
    row,
    rows,
    speedup,
)
from core.bench.report import md_table, num, pct, ratio


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
