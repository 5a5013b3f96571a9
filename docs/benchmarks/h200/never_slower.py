"""Issue 28's bench on the H200 in one device call: every shipped prompt at T = 0 and 0.7,
each row against target-only in the same bench, loaded once.

Why a driver and not 18 `specdec-tui bench` processes: each would load the pair, import MLX
and warm its kernels again (about 8 s a bench, 2.5 min of an 8-minute call). This runs the
same CLI (`core.cli.main`, so the JSON and Markdown are the bench's own) in one process, with
`core.models.load_pair` memoised: every bench gets a fresh Engine (fresh caches, its own
calibration) on the same loaded weights.

Usage (on the device, PYTHONPATH set by pack.sh's calls): python3 never_slower.py OUT_DIR
(a work folder, then tar it into $OUT: the device tool brings back at most 8 files, and run
14 lost five benches' JSON written straight into $OUT; never-slower.sh does this).
Environment: BUDGET_S (default 390: no bench starts after it; the rest are listed in
skipped.txt), TOKENS (256), SEEDS (3), PROMPTS (space-separated; default: all shipped, the
issue's three first), TEMPS ("0.0 0.7"), TARGET and DRAFT (default, self:bits=4), TRACED
(1: each row also runs its one traced request, so the JSON has per-round phases, `trace` and
`phase_ms`; docs/benchmarks/never-slower.md asks for it to split a model round's cost),
PART (1 or 2: the first or second half of the benches, prompts outermost, so every shipped
prompt at both temperatures runs in two calls), FRESH_GUARD (1: every request starts with a
fresh measured guard, as each request did before the engine kept them; default: the engine
keeps each row's guard across its requests, so the warm-up request and the seeds before a
seed are what it starts from, as a chat's later turns do; each request's carried rounds are
in the JSON's `guard.<source>.earlier_rounds`), DROP (space-separated row names left out of
every bench, e.g. DROP="hybrid-cost-aware cost-aware": an A/B of the default and the lookup
fits twice the benches in a call without the two model-drafting rows, the slowest),
and the switches of AB_ROWS (1: the default and the lookup again with one setting flipped, in
the same interleave, `flipped`; none now: docs/decisions/ holds the ones that ran).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Fields every row gets from the call's flags (or the pair loaded), not from its profile.
FLAGGED = ("target", "draft", "temperature", "repetition_penalty", "seed", "max_tokens",
           "ignore_eos", "traced")


def default_row() -> str:
    """The app's default (core.settings.first_run_settings) as a bench row: the target-only
    preset overwritten with every field where the default differs from it, but the flagged
    ones. Derived, not written out: run 3's row was typed by hand, and the default's k_max = 32
    (run 4 on) would have been missed."""
    import dataclasses

    from core.profile import load_profile
    from core.settings import first_run_settings

    base, want = load_profile("target-only").settings, first_run_settings()
    diff = [(f.name, getattr(want, f.name)) for f in dataclasses.fields(want)
            if f.name not in FLAGGED and getattr(base, f.name) != getattr(want, f.name)]
    text = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in diff)
    return f"target-only:{text}" if text else "target-only"


ROWS = [
    "target-only",  # the baseline, named first so that the A/A control below is not it
    default_row(),  # the app's default, written over the target-only preset
    "lookup",
    "hybrid-cost-aware",
    "cost-aware",  # the draft model alone, cost-aware k 1..8
    # The A/A control: target-only again (top_p=1.0 is every row's value, so only the name
    # differs), timed in the same interleave. The H200's host put identical target-only
    # requests at 0.97 and 1.65 s in one bench; this row's ratio is that noise's size.
    "target-only:top_p=1.0",
]


def flipped(override: str) -> list[str]:
    """The default row and the lookup preset, each with `override` (key=value) on top: an
    A/B's two rows beside the bare ones."""
    row = default_row()
    return [f"{row}{',' if ':' in row else ':'}{override}", f"lookup:{override}"]


# Each A/B switch (an environment variable set to 1) and its extra rows, in the order they are
# appended, e.g. {"CHAIN_AB": lambda: flipped("lookup_min_match=1")}. Empty: the five switches
# whose A/B ran here were decided and removed (docs/decisions/README.md).
AB_ROWS: dict[str, Callable[[], list[str]]] = {}

FIRST = ["rewrite-paragraph", "code-edit-pasted", "creative-seed-vault", "code-refactor-pasted"]


def main(out: Path) -> int:
    import core.models
    from core.bench.prompts import prompt_names
    from core.cli import main as cli

    start = time.perf_counter()
    budget = float(os.environ.get("BUDGET_S", "390"))
    tokens = os.environ.get("TOKENS", "256")
    seeds = os.environ.get("SEEDS", "3")
    names = os.environ.get("PROMPTS", "").split() or (
        [p for p in FIRST if p in prompt_names()] + [p for p in prompt_names() if p not in FIRST]
    )
    temps = os.environ.get("TEMPS", "0.0 0.7").split()
    target = os.environ.get("TARGET", "default")  # shape:tiny / shape:tiny-draft: a CPU smoke run
    draft = os.environ.get("DRAFT", "self:bits=4")
    traced = os.environ.get("TRACED", "0") == "1"
    fresh = os.environ.get("FRESH_GUARD", "0") == "1"
    extra = [row for switch, rows_of in AB_ROWS.items()
             if os.environ.get(switch, "0") == "1" for row in rows_of()]
    core.models.load_pair = functools.lru_cache(maxsize=2)(core.models.load_pair)
    if fresh:  # every request measures from the prior, as before the engine kept guards
        from core.decode.engine import Engine

        reset = Engine.reset

        def reset_all(self: Engine) -> None:
            reset(self)
            self.forget_guards()

        Engine.reset = reset_all  # type: ignore[method-assign]
    out.mkdir(parents=True, exist_ok=True)
    benches = part_of([(n, tp) for n in names for tp in temps], os.environ.get("PART", ""))
    dropped = [r for r in ROWS + extra if r not in rows(extra)]
    (out / "method.txt").write_text(method(tokens, seeds, traced, fresh, benches)
                                    + (f"A/B rows: {' '.join(extra)}\n" if extra else "")
                                    + (f"rows left out: {' '.join(dropped)}\n" if dropped else ""))
    done, skipped = [], []
    for name, temp in benches:
        tag = f"{name}-t{temp}"
        if time.perf_counter() - start > budget:
            skipped.append(tag)
            continue
        argv = ["bench", "--target", target, "--draft", draft,
                "--prompt-name", name, "--tokens", tokens, "--seeds", seeds,
                "--invocations", "1", "--warmup", "1", "--temperature", temp,
                "--repetition-penalty", "1.0", "--no-quality", "--no-predict",
                *([] if traced else ["--no-traced"]),
                "--json", str(out / f"{tag}.json"), "--markdown", str(out / f"{tag}.md")]
        for row in rows(extra):
            argv += ["--profile", row]
        t0 = time.perf_counter()
        try:
            rc = cli(argv)
        except SystemExit as exc:  # a refused bench is a line, not the end of the call
            rc = exc.code
        except Exception as exc:  # noqa: BLE001 - keep the other benches
            print(f"{tag}: {type(exc).__name__}: {exc}", flush=True)
            rc = 1
        print(f"{tag}: exit {rc} in {time.perf_counter() - t0:.0f} s "
              f"({time.perf_counter() - start:.0f} s in all)", flush=True)
        done.append(tag)
        (out / "summary.md").write_text(summary(out, done))  # kept if the call is cut
    (out / "skipped.txt").write_text("".join(f"{t}\n" for t in skipped))
    (out / "summary.md").write_text(summary(out, done))
    print(f"{len(done)} benches, {len(skipped)} skipped (skipped.txt)", flush=True)
    return 0


def rows(extra: list[str]) -> list[str]:
    """The bench's rows: ROWS and the A/B rows, less those DROP names (never target-only,
    every ratio's baseline)."""
    drop = set(os.environ.get("DROP", "").split()) - {"target-only"}
    return [r for r in ROWS + extra if r not in drop]


def part_of(benches: list[tuple[str, str]], part: str) -> list[tuple[str, str]]:
    """PART=1 or 2: the first or the second half of the benches; PART=i/n: the i-th of n
    near-equal parts (5 seeds need three calls of 6 benches); all of them otherwise."""
    i, n = {"1": (1, 2), "2": (2, 2)}.get(part, (0, 0))
    if "/" in part:
        a, _, b = part.partition("/")
        if a.isdigit() and b.isdigit() and 1 <= int(a) <= int(b):
            i, n = int(a), int(b)
    if n == 0:
        return benches
    size = -(-len(benches) // n)
    return benches[(i - 1) * size : i * size]


def method(tokens: str, seeds: str, traced: bool, fresh: bool,
           benches: list[tuple[str, str]]) -> str:
    """What the call ran, in words, kept beside its data (the report's method reads it)."""
    guard = ("a fresh measured guard every request (FRESH_GUARD=1)" if fresh else
             "the engine's measured guard kept across each row's requests: the warm-up and "
             "the seeds before a seed are what it starts from (issue 28)")
    return (f"{len(benches)} benches: {' '.join(f'{n}@T{tp}' for n, tp in benches)}\n"
            f"{tokens} tokens, {seeds} seeds, 1 warm-up, interleaved by seed, "
            f"{'with' if traced else 'no'} traced request per seed\nguard: {guard}\n")


def summary(out: Path, tags: list[str]) -> str:
    """One table from the benches' JSON: each row's median E2E against target-only's, with
    the per-seed paired ratios' min-max (the same seed of both rows, run back to back), the
    medians themselves, what the guard decided per source, and the rounds its requests
    carried in from the row's earlier requests (0 everywhere with FRESH_GUARD=1)."""
    lines = ["| prompt, T | row | vs target-only (median) | per seed min-max | median E2E, "
             "row / target-only | guard | carried rounds |", "|---|---|---|---|---|---|---|"]
    for tag in tags:
        path = out / f"{tag}.json"
        if not path.exists():
            lines.append(f"| {tag} | (no report) | | | | | |")
            continue
        rows = json.loads(path.read_text())["results"]
        base = next(r for r in rows if r["settings"].get("mode") == "target-only")
        for r in rows:
            if r is base:
                continue
            pairs = [b / x for b, x in zip(base["e2e_s"], r["e2e_s"], strict=False) if x]
            span = f"{min(pairs):.2f}-{max(pairs):.2f}x" if pairs else "-"
            sp = r.get("speedup_vs_target")
            guard = {s: g for s, g in (r.get("guard") or {}).items() if s != "none"}
            said = "; ".join(f"{src}: {'/'.join(sorted({str(x) for x in g['guard'] if x}))}"
                             for src, g in guard.items())
            carried = "; ".join(f"{src}: {_carried(g)}" for src, g in guard.items())
            meds = f"{_median(r['e2e_s']):.3f} / {_median(base['e2e_s']):.3f} s"
            lines.append(f"| {tag} | {r['name']} | {'-' if sp is None else f'{sp:.2f}x'} | "
                         f"{span} | {meds} | {said or '-'} | {carried or '-'} |")
    return "\n".join(lines) + "\n"


def _carried(g: dict) -> str:
    """A source's rounds carried into each request, and "(plan N)": its rounds left out so
    far for building an attention plan (core/cost/guard.py), where any were."""
    plan = max((x or 0 for x in g.get("plan_rounds") or []), default=0)
    return "/".join(str(x) for x in g.get("earlier_rounds", [])) + (f" (plan {plan})" if plan else "")


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[len(s) // 2] + s[(len(s) - 1) // 2]) / 2 if s else float("nan")


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/never-slower")))
