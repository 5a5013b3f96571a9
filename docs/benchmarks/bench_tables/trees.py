"""trees.md's GPU table: copies verified as a tree against the one-chain lookup
(docs/benchmarks/h200/tree-ab.sh), per prompt and temperature, by per-seed pairs."""

from __future__ import annotations

import statistics
from typing import Any

from bench_tables.never_slower import text_letters
from bench_tables.rows import Doc
from bench_tables.steps import _spread
from core.bench.report import md_table, num

ROWS = {"target-only": "target-only+flags", "chain": "lookup+flags",
        "tree": "lookup:draft_source=tree+flags"}


def _source(result: dict[str, Any]) -> dict[str, Any]:
    """The result's drafting source's totals (the one that is not plain target steps)."""
    return next((v for k, v in (result.get("per_source") or {}).items()
                 if k != "target steps"), {})


def _round_in_steps(result: dict[str, Any]) -> float | None:
    """A drafting round's cost in plain steps, from untraced totals: the median request's E2E
    less its plain steps at the median step, over its drafting rounds."""
    src = _source(result)
    n = result.get("timed_requests") or 0
    if not src.get("rounds") or not n or not result.get("step_ms"):
        return None
    drafting = src["rounds"] / n
    step = statistics.median(result["step_ms"])
    plain = (result.get("rounds_per_request") or 0) - drafting
    return (result["median_e2e_s"] * 1e3 - plain * step) / drafting / step


def tree_ab(docs: list[Doc]) -> tuple[list[str], str]:
    """Per bench (a prompt at a temperature): chain and tree over target-only per seed, the
    tree over the chain per seed, the chain's drafts and the tree's depth and each one's
    accepted tokens a round, a round's cost."""
    out = []
    for d in docs:
        res = {r["name"]: r for r in d.get("results") or []}
        base, chain, tree = (res.get(ROWS[k]) for k in ("target-only", "chain", "tree"))
        if not (base and chain and tree):
            continue

        def speed(r: dict[str, Any], over: dict[str, Any]) -> list[float]:
            return [b / a for a, b in zip(r["e2e_s"], over["e2e_s"], strict=True)]

        prompt = (d.get("protocol") or {}).get("prompt") or {}
        temp = (chain.get("settings") or {}).get("temperature")
        cells = [f"`{prompt.get('name', '?')}`", num(temp, ".1f"),
                 _spread(speed(chain, base)), _spread(speed(tree, base)),
                 _spread(speed(tree, chain))]
        for r in (chain, tree):
            src = _source(r)
            rounds = src.get("rounds") or 0
            cells.append(f"{num(src.get('proposed', 0) / rounds, '.1f')} / "
                         f"{num(src.get('accepted', 0) / rounds, '.2f')}" if rounds else "-")
        cells += [f"{num(_round_in_steps(chain), '.1f')} / {num(_round_in_steps(tree), '.1f')}",
                  " / ".join(str(len(set(r.get("output_sha") or []))) for r in (base, chain, tree))]
        out.append(cells)
    env = docs[0].get("environment") or {}
    head = ["Prompt", "T", "chain / target-only", "tree / target-only", "tree / chain",
            "chain: drafts / accepted a round", "tree: depth / accepted a round",
            "round in plain steps: chain / tree", "texts: target / chain / tree"]
    return md_table(head, out), (
        f"default model (draft self:bits=4 unused by these rows), 256 tokens, 5 seeds, one "
        f"warm-up request per row, untraced, {env.get('device_name', '?')}, MLX "
        f"{env.get('mlx', '?')}; speed = per seed, target-only's E2E over the row's (the rows "
        "interleaved per seed), as median (min-max, n); tree / chain likewise per seed; "
        "drafts (the chain) or depth (a tree round reports its depth as proposed, not its "
        "nodes) and accepted tokens a drafting round = the source's totals over its rounds; "
        "a round in plain steps = (the median request's E2E less its plain steps at "
        "their median) over its drafting rounds, in plain steps: an estimate from untraced "
        "totals, no trace; texts = distinct outputs over the seeds (greedy is not bit-stable "
        "on this backend: rows of one prompt may have written different texts)")


def tree_primitives(docs: list[Doc]) -> tuple[list[str], str]:
    """tree_primitives.py: a verification's graph nodes, tree against chain, by row count."""
    d = docs[0]
    rows = [[str(c["rows"]), str(c["chain"]), str(c["tree"]),
             ", ".join(f"{k} {v:+d}" for k, v in c["more_in_tree"].items()) or "-"]
            for c in d.get("cases") or []]
    return md_table(("rows", "chain forward", "tree forward", "tree less chain, by primitive"),
                    rows), (
        f"graph nodes of one verification's logits, counted from MLX {d.get('mlx', '?')}'s "
        f"graph export (mx.export_to_dot), nothing evaluated; default model, a "
        f"{d.get('context')}-token context; the tree: the pending token's row and two "
        "branches of equal depth; data: lookup/tree_primitives.py")


# -- why a tree round cost more: the forward split, the traced rounds, the keep A/B ------------

SPLIT_MODES = ("step", "chain", "tree-chain", "tree", "tree-norope", "gather", "trim")
FIRST_MODES = ("step", "chain", "tree-chain", "tree", "gather")


def tree_forward_split(docs: list[Doc]) -> tuple[list[str], str]:
    """tree_forward_split.py: per rows R, each mode's median build + eval ms, the chain's, the
    tree's and the gather's sums in plain steps (the one-row step's at the same R), and each
    mode's first call."""
    d = docs[0]
    ms = d.get("ms") or {}
    out = []
    for r in sorted((ms.get("step") or {}), key=int):
        med = {m: (statistics.median(ms[m][r]["build"]), statistics.median(ms[m][r]["eval"]))
               for m in SPLIT_MODES if r in (ms.get(m) or {})}
        step = sum(med["step"])
        cells = [r, *(f"{num(b, '.2f')} + {num(e, '.2f')}" if b is not None else "-"
                      for b, e in (med.get(m, (None, None)) for m in SPLIT_MODES))]
        cells.append(" / ".join(num(sum(med[m]) / step, ".2f") for m in ("chain", "tree", "gather")))
        cells.append(" / ".join(num((ms[m][r].get("first") or [None])[0], ".0f")
                                for m in FIRST_MODES))
        out.append(cells)
    head = ["rows", *SPLIT_MODES, "in plain steps: chain / tree / gather",
            "first call ms: " + " / ".join(FIRST_MODES)]
    return md_table(head, out), (
        f"{d.get('device', '?')}, MLX {d.get('mlx', '?')}, the default model "
        f"({d.get('model', '?')}), a {d.get('context')}-token context in a KV buffer of "
        f"{d.get('buffer')} that never grows, so each shape's plan is built once; each mode's "
        f"cell = median build ms (the Python call that builds the graph) + median eval ms (the "
        f"mx.eval after it) over {d.get('repeats')} calls, the modes rotated within a pass; "
        "step = a one-row decode step, chain = the engine's chain verification of R rows, "
        "tree-chain = the tree forward over a chain of R - 1 nodes, tree = the tree forward "
        "over four equal branches of R - 1 nodes, tree-norope = tree without the per-row RoPE "
        "(wrong positions, same shapes), gather = keeping the last branch's K/V (moved into "
        "place by a gather and a slice update a layer, the rule before "
        "docs/decisions/0009-tree-keep-refeed.md; after a tree forward not timed), trim = "
        "keeping the first branch; in plain steps = the mode's build + eval over step's at the "
        "same R; first call = the first call of each (mode, R), build + eval, pass 0 (R in "
        "this order, so R = 12's first calls carry every first use); data: "
        "h200/tree_forward_split.py")


TREE_GATHER = "lookup:draft_source=tree+flags"
TREE_REFEED = "lookup:draft_source=tree,tree_keep=refeed+flags"
TRACED_ROWS = {"target-only+flags": "target-only", "lookup+flags": "chain (`lookup`)",
               TREE_GATHER: "tree (gather)",
               "lookup:policy=fixed,k=5,lookup_min_match=4+flags": "n-gram, k 5, min 4",
               "lookup:policy=fixed,k=5,lookup_min_match=5+flags": "n-gram, k 5, min 5"}


def _per_seed(num_row: dict[str, Any], den_row: dict[str, Any],
              same_text: bool = False) -> list[float]:
    """den_row's E2E over num_row's, seed by seed (the speed of num_row against den_row);
    `same_text`: only the seeds where both rows wrote the same text (output_sha)."""
    pairs = zip(num_row.get("e2e_s") or [], den_row.get("e2e_s") or [],
                num_row.get("output_sha") or [], den_row.get("output_sha") or [], strict=True)
    return [b / a for a, b, sa, sb in pairs if not same_text or sa == sb]


def _per_round(r: dict[str, Any]) -> str:
    """The source's proposed / accepted tokens a drafting round: a chain round proposes its
    drafts, a tree round reports its depth (its nodes are in the trace alone)."""
    src = _source(r)
    rounds = src.get("rounds") or 0
    return (f"{num(src.get('proposed', 0) / rounds, '.1f')} / "
            f"{num(src.get('accepted', 0) / rounds, '.2f')}" if rounds else "-")


def _letters(doc: Doc, r: dict[str, Any]) -> str:
    """The row's distinct texts as the bench's letters, in the order its seeds wrote them; past
    three, their count (where every seed wrote its own, the letters say nothing more)."""
    letters = text_letters(doc)
    mine = "".join(dict.fromkeys(letters[x] for x in r.get("output_sha") or []))
    return mine if len(mine) <= 3 else f"{len(mine)} texts"


def tree_keep_ab(docs: list[Doc]) -> tuple[list[str], str]:
    """tree-ab.sh's gather/refeed A/B: per bench, each way of keeping the accepted path against
    the chain and each other, by per-seed pairs, and over the seeds that wrote one text."""
    out = []
    for d in docs:
        res = {r["name"]: r for r in d.get("results") or []}
        base, chain = res.get(ROWS["target-only"]), res.get(ROWS["chain"])
        gather, refeed = res.get(TREE_GATHER), res.get(TREE_REFEED)
        if not (base and chain and gather and refeed):
            continue
        prompt = ((d.get("protocol") or {}).get("prompt") or {}).get("name", "?")
        same = _per_seed(refeed, gather, same_text=True)
        out.append([
            f"`{prompt}`", num((chain.get("settings") or {}).get("temperature"), ".1f"),
            str(len(base.get("e2e_s") or [])),
            _spread(_per_seed(gather, chain)), _spread(_per_seed(refeed, chain)),
            _spread(_per_seed(refeed, gather)), _spread(same) if same else "- (n=0)",
            _spread(_per_seed(refeed, base)),
            *(_per_round(r) for r in (chain, gather, refeed)),
            " / ".join(_letters(d, r) for r in (base, chain, gather, refeed))])
    env = docs[0].get("environment") or {}
    head = ["Prompt", "T", "seeds", "gather / chain", "refeed / chain", "refeed / gather",
            "refeed / gather, same text", "refeed / target-only",
            "chain: drafts / accepted a round", "gather: depth / accepted a round",
            "refeed: depth / accepted a round",
            "texts: target / chain / gather / refeed"]
    return md_table(head, out), (
        f"default model, 256 tokens, greedy or T = 0.7, one warm-up request per row, untraced, "
        f"{env.get('device_name', '?')}, MLX {env.get('mlx', '?')}; gather = the tree row "
        "keeping the accepted path's K/V by gathering them into place (`lookup:draft_source="
        "tree`), refeed = keeping only the part already in place and feeding the rest as the "
        "next forward's pending rows (`...,tree_keep=refeed`), both with trees of at most 63 "
        "nodes; each ratio A / B = per seed, B's E2E over A's (A's speed against B; the rows "
        "interleaved per seed), as median (min-max, n); same text = only the seeds where "
        "gather and refeed wrote the same output (output_sha): elsewhere they timed different "
        "texts (greedy is not bit-stable on this backend); drafts (the chain) or depth (a tree "
        "round reports its depth as proposed; its node count is not in untraced totals) and "
        "accepted tokens a drafting round = the source's totals over its rounds; texts = the "
        "distinct outputs over the seeds, as the bench's letters (one letter is one text in "
        "every row of the bench), or their count past three")


BUCKETS = (("1-16", 1, 16), ("17-64", 17, 64), ("65+", 65, None))


def _med_n(values: list[float], fmt: str = ".1f") -> str:
    return f"{num(statistics.median(values), fmt)} ({len(values)})" if values else "-"


def tree_phases(docs: list[Doc]) -> tuple[list[str], str]:
    """tree-ab.sh's traced requests (TRACED=1): per row, its drafting rounds' verification by
    row bucket, the plain step right after a drafting round against the other plain steps,
    and the rounds past 40 ms."""
    out = []
    for d in docs:
        prompt = ((d.get("protocol") or {}).get("prompt") or {}).get("name", "?")
        for r in d.get("results") or []:
            t = r.get("trace") or []
            if not t:
                continue
            drafting = [x for x in t if x.get("source")]
            cells = [f"`{prompt}`", TRACED_ROWS.get(r["name"], f"`{r['name']}`"),
                     f"{len(drafting)} / {len(t)}",
                     num(statistics.median(x["rows"] for x in drafting), ".0f")
                     if drafting else "-"]
            for _, lo, hi in BUCKETS:
                cells.append(_med_n([x["verify_ms"] for x in drafting
                                     if x["rows"] >= lo and (hi is None or x["rows"] <= hi)]))
            # a request's first round follows the prefill: neither kind of plain step
            after = [t[i]["verify_ms"] for i in range(1, len(t))
                     if not t[i].get("source") and t[i - 1].get("source")]
            other = [t[i]["verify_ms"] for i in range(1, len(t))
                     if not t[i].get("source") and not t[i - 1].get("source")]
            slow = [x for x in t if x["total_ms"] > 40]
            cells += [_med_n(after), _med_n(other),
                      f"{len(slow)}" + (" (" + ", ".join(f"{x['rows']}: {x['total_ms']:.0f}"
                                                          for x in slow) + ")" if slow else "")]
            out.append(cells)
    env = docs[0].get("environment") or {}
    head = ["Prompt", "Row", "rounds: drafting / all", "rows a drafting round (median)",
            *(f"verify ms, {name} rows" for name, _, _ in BUCKETS),
            "plain step after a drafting round", "other plain steps",
            "rounds over 40 ms (rows: ms)"]
    return md_table(head, out), (
        f"each row's first traced request (seed 0's, after its untraced one), default model, 256 tokens, greedy, "
        f"{env.get('device_name', '?')}, MLX {env.get('mlx', '?')}, at "
        f"{str(env.get('specdec_tui_commit', '?'))[:7]} (the tree keeps its path by the gather, "
        "trees up to 64 nodes); verify ms = the round's verify phase (its forward, evaluated), "
        "median (rounds) of the drafting rounds whose rows (pending tokens + drafts or nodes) "
        "fall in 1-16, 17-64 (the row buckets of core/dispatch/bucketed.py) or past them; a "
        "plain step = a round that drafted nothing: its verify ms right after a drafting round "
        "and after another plain step (the request's first round, after the prefill, is "
        "neither), median (rounds); rounds over 40 ms = by total round time, each as its rows: "
        "its ms")


# Issue 57's goals at T = 0, over target-only: the refactor 2.6x, the edit and the rename 1.5x
# (and no lower than the chain's), the rewrite 5x on the text the lookup can copy.
GOALS = {"code-refactor-pasted": 2.6, "code-edit-pasted": 1.5, "code-rename": 1.5,
         "rewrite-paragraph": 5.0}


def _ceiling(r: dict[str, Any], step: float, budget: float) -> list[str]:
    """One row's cells: plain steps a request and their ms at the bench's median step, tokens a
    drafting round, a drafting round's ms, and the tokens a drafting round would need for the
    goal's E2E (`budget` ms) at that round cost, or why no round could reach it."""
    src, n = _source(r), r.get("timed_requests") or 0
    if not src.get("rounds") or not n:
        return ["-"] * 4
    drafting = src["rounds"] / n
    plain = (r.get("rounds_per_request") or 0) - drafting
    tokens = r.get("tokens_per_request") or 256
    plain_ms = plain * step
    round_ms = (r["median_e2e_s"] * 1e3 - plain_ms) / drafting
    if plain_ms >= budget:
        need = f"none can: plain steps alone {plain_ms:.0f} ms"
    else:
        need = num((tokens - plain) / ((budget - plain_ms) / round_ms), ".1f")
    return [f"{plain:.0f} ({plain_ms:.0f} ms)", num((tokens - plain) / drafting, ".2f"),
            num(round_ms, ".1f"), need]


def tree_ceiling(docs: list[Doc]) -> tuple[list[str], str]:
    """What the goals would need: per greedy bench, the goal's E2E, the plain steps where no
    source drafts (their time alone), and the tokens a drafting round would have to commit
    at its measured cost, for the chain and the tree (refeed)."""
    out = []
    for d in docs:
        res = {r["name"]: r for r in d.get("results") or []}
        base = res.get(ROWS["target-only"])
        prompt = ((d.get("protocol") or {}).get("prompt") or {}).get("name", "?")
        if not base or prompt not in GOALS or (base.get("settings") or {}).get("temperature"):
            continue
        step = statistics.median(base.get("step_ms") or [0.0])
        budget = base["median_e2e_s"] * 1e3 / GOALS[prompt]
        for label, name in (("chain", ROWS["chain"]), ("tree", TREE_REFEED)):
            r = res.get(name)
            if r:
                out.append([f"`{prompt}`", f"{GOALS[prompt]:.1f}x: {budget:.0f} ms", label,
                            str(len(r.get("e2e_s") or [])), *_ceiling(r, step, budget)])
    env = docs[0].get("environment") or {}
    head = ["Prompt", "goal: its E2E", "row", "seeds", "plain steps a request (their ms)",
            "tokens a drafting round", "ms a drafting round", "tokens a drafting round the goal needs"]
    return md_table(head, out), (
        f"default model, 256 tokens, greedy, {env.get('device_name', '?')}, MLX "
        f"{env.get('mlx', '?')}, tree-ab.sh's untraced rows; goal = issue 57's ratio over "
        "target-only (the refactor 2.6x, the edit and the rename 1.5x, the rewrite 5x), its "
        "E2E = target-only's median E2E over it; plain steps = a request's rounds where no "
        "source drafted (the text has no earlier repeat to copy), their ms = that count times "
        "target-only's median plain step in the same bench; tokens a drafting round = the "
        "median request's tokens less its plain steps, over its drafting rounds; ms a drafting "
        "round = the row's median E2E less its plain steps' ms, over its drafting rounds (the "
        "step after it included); the tokens the goal needs = the same tokens over as many "
        "rounds of that cost as fit the goal's E2E after the plain steps, or none where the "
        "plain steps alone exceed it; tree = the tree row keeping its path by refeed (the rule "
        "now)")
