"""One bench row's numbers, recomputed from its raw timings, and the tables of one bench
JSON: FIELDS (what a value marker or a column quotes) and `bench` (a table of its rows)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from core.bench.report import md_table, num, pct, ratio, secs

Row = dict[str, Any]


Doc = dict[str, Any]


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


for _part in ("cold", "warm"):
    FIELDS[f"first_token_{_part}"] = lambda d, r, p=_part: secs(
        ((d.get("parts") or {}).get(p) or {}).get("first_token_s"))


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
