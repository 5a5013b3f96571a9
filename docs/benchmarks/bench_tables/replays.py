"""The CPU replays' and counts' tables on the never-slower pages: the plan's host cost, the
lookup after a round, the copy stall, the texts' copy bounds, the lookup's ceiling, and
round_ops.py's counts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from bench_tables.rows import Doc
from core.bench.report import md_table, num


def plan_cost(docs: list[Doc]) -> tuple[list[str], str]:
    """docs/benchmarks/policy/plan_cost.py, one file per commit (before, after): per price
    regime, prompt and row, the engine's plan between plain steps, median and mean ms."""
    keyed = [{(r["prices"], r["prompt"], r["row"]): r for r in d.get("results") or []} for d in docs]
    heads = [f"{d.get('commit', '?')}: median (mean) ms" for d in docs]
    out = []
    for key in keyed[0] if keyed else []:
        cells = [f"{k[key]['median_ms']:.3f} ({k[key]['mean_ms']:.3f})" if key in k else "-"
                 for k in keyed]
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
                        gate, *cells])
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
                "target-only": [], "lookup": [], "default": []})
            kind = ("target-only" if r["mode"] == "target-only"
                    else "lookup" if r["draft_source"] == "lookup" else "default")
            t[kind].append(label if kind == "target-only"
                           else f"{r['vs_target_only']:.2f}x ({label})")
    out = []
    for (prompt, sha), t in sorted(texts.items(), key=lambda kv: (kv[0][0], -kv[1]["bound"])):
        calls = Counter(t["target-only"])  # target-only and its A/A twin, by call
        wrote = ", ".join(c if n == 1 else f"{c} (x{n})" for c, n in calls.items())
        out.append([prompt, f"`{sha[:8]}`", f"{t['bound']:.2f}", f"{t['oracle']:.2f}", wrote or "-",
                    ", ".join(t["lookup"]) or "-",
                    ", ".join(t["default"]) or "-"])
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
                     "lookup rows", "default rows"), out), stat


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
                    f"{r['bench_lookup_ratio']:.2f}x"])
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
                    out), stat


def round_ops(docs: list[Doc]) -> tuple[list[str], str]:
    """round_ops.py's counts, before and after (two files) or one file: per kind of round,
    its own MLX calls (outside the models' forwards), its host syncs, the models' calls."""
    cases = [{c.get("case"): c for c in d.get("cases") or []} for d in docs]
    names = list(cases[-1])
    out = []
    for name in names:
        got = [c.get(name) or {} for c in cases]
        cells = [" -> ".join(num(g.get(k), ".1f") for g in got)
                 for k in ("own_calls", "syncs")]
        out.append([name, *cells, num(got[-1].get("model_calls"), ".0f"),
                    str(got[-1].get("rounds", "-"))])
    commits = " -> ".join(str(((d.get("environment") or {}).get("specdec_tui") or {})
                              .get("commit", "?"))[:7] for d in docs)
    head = ("Round", "own MLX calls a round", "host syncs a round",
            "MLX calls in the models' forwards", "rounds counted")
    return md_table(head, out), (f"mean per round; a -> b: the code at {commits} "
                                 "(round_ops.py on shape:tiny, CPU)")


def tree_host_cost(docs: list[Doc]) -> tuple[list[str], str]:
    """lookup/tree_host_cost.py: a tree round's host work per part, by context (µs)."""
    (d,) = docs
    out = []
    for r in d.get("rows") or []:
        out.append([f"{r['context']:,}", f"{r['median_nodes']:.0f}",
                    f"{r['share_at_budget']:.0%}",
                    *(f"{r[f'{p}_median_us']:.0f} / {r[f'{p}_p90_us']:.0f}"
                      if f"{p}_median_us" in r else "-"
                      for p in ("index", "tree", "flatten", "round", "round_sampled"))])
    env = d.get("environment") or {}
    load = env.get("loadavg_before_after") or [[None], [None]]
    stat = (f"median / p90 µs over {env.get('rounds', '?')} rounds, depth "
            f"{(d.get('rows') or [{}])[0].get('depth', '?')}, node budget "
            f"{(d.get('rows') or [{}])[0].get('node_budget', '?')}, on a {env.get('cpus', '?')}-CPU "
            f"machine whose 1-minute load was {num(load[0][0], '.1f')} before and "
            f"{num(load[1][0], '.1f')} after")
    return md_table(("context", "nodes (median)", "rounds at the budget", "index", "tree",
                     "flatten + mask", "round (greedy)", "round (lossless)"), out), stat
