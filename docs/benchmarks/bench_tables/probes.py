"""The GPU probes' tables on the never-slower pages: the round autopsy, the rare round, the
step split, the forward split, the verify curve's modes and buckets, and the traced rounds."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from bench_tables.never_slower import _ns_label, ns_row_label
from bench_tables.rows import Doc, baseline, rows, trace
from core.bench.report import md_table, num, pct, secs


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
                        f"{sum(toks) / len(toks):.1f}" if toks else "-", mm(rounds), mm(after)])
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
                        f"{d.get('plain_step_ms_median'):.2f}"])
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
                       for r in reqs if r.get("steps")]
            plan = [statistics.fmean([x["plan"] for x in r["steps"]]) for r in reqs if r.get("steps")]
            out.append([f"{d.get('prompt')}, T = {d.get('temperature')}", str(seen[d.get("prompt")]),
                        row, str(len(reqs)),
                        f"{statistics.median(ex):.3f} ({min(ex):.3f}-{max(ex):.3f})",
                        f"{statistics.median(outside):.3f}", f"{statistics.median(plan):.3f}",
                        *(str(sum(r.get(k, 0) for r in reqs))
                          for k in ("stretches", "restarts", "rounds"))])
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
                             ("plan", statistics.fmean, "{:.0f}")):
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
                            f"{med['chain']:.2f}", ratio])
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
                        f"{cheaper} of {len(rows)}" if mode == "fused" else ""])
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
                 or {}).get(mode) or {}
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
                      f"{rmin} / {rmax}"]
        out.append([_ns_label(d), *cells])
    stat = (f"ms, the JSON's protocol.engine_curve.t_verify_s[{mode}] (the calibration's median "
            "of its timed forwards at each R, before the bench); min / median / max over the R "
            "of each row bucket, and the R where its min and max fell")
    return md_table(("Prompt, T", "R = 1", "R 2-16: min / median / max", "at R",
                     "R 17-33: min / median / max", "at R"), out), stat


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
                         None)
            proposed = sum(x.get("proposed", 0) for x in drafted)
            kept = sum(x.get("accepted", 0) for x in drafted)
            out.append([_ns_label(d), ns_row_label(r, code=False), secs(r.get("traced_e2e_s")),
                        str(len(drafted)), str(len(t) - len(drafted)),
                        "-" if first is None else f"{first} of {len(drafted)}",
                        num(sum(x.get("tokens", 0) for x in drafted) / len(drafted), ".1f"),
                        pct(kept / proposed if proposed else None)])
    stat = ("one traced request a row (the first seed's, right after its timed request; its k "
            "policy fresh, as each request's is; each round synced, so slower than untraced): E2E; drafting rounds and plain steps; the first drafting round "
            "proposing more than 15 (verified past the 16-row bucket); tokens a drafting round "
            "committed, mean; drafts kept of drafts proposed")
    return md_table(("Prompt, T", "row", "traced E2E", "drafting rounds", "plain steps",
                     "k > 15 from", "tokens a round", "kept"), out), stat


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
