"""The never-slower pages' tables (never-slower.md, archive/never-slower-runs.md): issue 28's
rows, the floor by medians and by pairs against the A/A control's noise, the A/Bs of one
setting, the guard's requests and the texts each row wrote."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from typing import Any

from bench_tables.rows import (
    FIELDS,
    SAID,
    Doc,
    Row,
    baseline,
    decode_vs_steps,
    e2e,
    guard_counts,
    median,
    median_mm,
    rows,
    seed_min_max,
    speedup,
    steps_vs_target_only,
    target_share,
)
from core.bench.report import md_table, num, pct, ratio, secs

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
            if x > 0 and y > 0]


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
                            strict=False):
        if x > 0 and y > 0 and sx and sy:
            out.append(math.log((x / sx) / (y / sy)))
    return out


def aa_sigma(docs: list[Doc], pairs_of: Callable[[Doc, Row], list[float]] = _log_pairs
             ) -> tuple[float | None, int]:
    """The host's noise on one pair, from the A/A control: the root mean square of its
    per-seed log ratios over every bench (its true ratio is 1, so the mean is not fitted),
    and how many pairs that is."""
    pairs = [x for d in docs for r in rows(d) if r.get("name") == NS_CONTROL
             for x in pairs_of(d, r)]
    if len(pairs) < 2:
        return None, len(pairs)
    return (sum(x * x for x in pairs) / len(pairs)) ** 0.5, len(pairs)


def _verdict(logs: list[float], sigma: float, against: float = FLOOR,
             words: tuple[str, str, str] = ("held", "**broken**", "undecided"),
             ) -> tuple[str, str]:
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
                         what: str = "target-only's E2E over the row's") -> tuple[list[str], str]:
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
                  for c in (counts[n] for n in parts))])
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
                                                 strict=False) if sx and sy]


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
                              ("hybrid", NS_HYBRID))}
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
                        if (x := speedup(d, r)) is not None)
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
                    f"{min(step):.1f}-{max(step):.1f}"])
    stat = ("the lookup row of each bench; ms a lookup round = its tokens a lookup round (accepted "
            "plus one, over the row's requests) over the guard's measured lookup rate, per request "
            "(the JSON's guard.lookup.measured_tok_s: the rounds' seconds with the pipeline breaks "
            "charged to them), min-max; a target step = 1 / guard.none.measured_tok_s, min-max")
    return md_table(("Prompt, T", "lookup rounds", "drafts a round", "tokens a round",
                     "ms a lookup round", "ms a target step"), out), stat


def _drafted(r: Row) -> int:
    """Drafting rounds of a row over its timed requests (every source but plain steps)."""
    return sum(int(v.get("rounds") or 0) for k, v in (r.get("per_source") or {}).items()
               if k != "none")


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
                if m]
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
                     (bare_on and "overlap_round=false" not in name))
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
                    f"{stopped} of {len(g.get('guard') or [])}"])
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
                         for x in g.get("guard") or [])
        out.append([_ns_label(d), f"`{r.get('name')}`", seq("earlier_rounds", "d"),
                    seq("plan_rounds", "d"), seq("vs_target", ".2f"), asked])
    stat = (f"the JSON's guard.{source}, one value per timed request in seed order (the warm-up "
            "came before the first): carried = the rounds its kept guard had counted before the "
            "request; plan rounds = its rounds left out so far because their verification built "
            "an attention plan (core/cost/guard.py); vs target steps and asked/stopped as the "
            "request ended")
    return md_table(("Prompt, T", "row", "carried rounds", "plan rounds", "vs target steps",
                     "at the end"), out), stat


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
                         for t, o in zip(theirs, ours, strict=False))
        scales = g.get("cost_scale") or [None] * n
        drafted = "/".join(f"{x[1]:.2f}" if x else "-" for x in scales)
        steps = ((r.get("guard") or {}).get("none") or {}).get("measured_rounds") or [None] * n
        out.append([_ns_label(d), f"`{r.get('name')}`", speed, seq("measured_rounds"),
                    "/".join("-" if x is None else f"{x:d}" for x in steps),
                    seq("stops"), seq("refused"), drafted, _texts(d, r)])
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
                     "stops", "refused", "round cost", "text"), out), stat


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
                                           "context_len": int(ec.get("context") or 0)})
        base = baseline(d) or {}
        step = statistics.median(base.get("step_ms") or [0.0]) or None
        out.append([_ns_label(d), *(num(one[m] * 1e3, ".2f") if m in one else "-"
                                    for m in ("auto", "dense", "fused")),
                    num(max(a - saved, 0.0) * 1e3, ".2f"),
                    num(verify_cost(curve, "auto")(1) * 1e3, ".2f"),
                    num(step, ".2f")])
    stat = ("ms; each mode's cell = the calibration's median of its timed one-row forwards "
            "(the JSON's protocol.engine_curve.t_verify_s); measured step = the median over "
            "target-only's timed requests of each request's median plain step (step_ms)")
    return md_table(("Prompt, T", "auto", "dense", "fused", "step price, run 8's code",
                     "step price now", "measured step"), out), stat
