"""trees.md's GPU table: copies verified as a tree against the one-chain lookup
(docs/benchmarks/h200/tree-ab.sh), per prompt and temperature, by per-seed pairs."""

from __future__ import annotations

import statistics
from typing import Any

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
    tree over the chain per seed, their drafts and accepted tokens a round, a round's cost."""
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
            "chain: drafts / accepted a round", "tree: nodes / accepted a round",
            "round in plain steps: chain / tree", "texts: target / chain / tree"]
    return md_table(head, out), (
        f"default model (draft self:bits=4 unused by these rows), 256 tokens, 5 seeds, one "
        f"warm-up request per row, untraced, {env.get('device_name', '?')}, MLX "
        f"{env.get('mlx', '?')}; speed = per seed, target-only's E2E over the row's (the rows "
        "interleaved per seed), as median (min-max, n); tree / chain likewise per seed; "
        "drafts or nodes and accepted tokens a drafting round = the source's totals over its "
        "rounds; a round in plain steps = (the median request's E2E less its plain steps at "
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
