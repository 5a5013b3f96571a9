"""Issue 28's bench on the H200 in one device call: every shipped prompt at T = 0 and 0.7,
each row against target-only in the same bench, loaded once.

Why a driver and not 18 `specdec-tui bench` processes: each would load the pair, import MLX
and warm its kernels again (about 8 s a bench, 2.5 min of an 8-minute call). This runs the
same CLI (`core.cli.main`, so the JSON and Markdown are the bench's own) in one process, with
`core.models.load_pair` memoised: every bench gets a fresh Engine (fresh caches, its own
calibration) on the same loaded weights.

Usage (on the device, PYTHONPATH set by pack.sh's calls): python3 never_slower.py OUT_DIR
Environment: BUDGET_S (default 390: no bench starts after it; the rest are listed in
skipped.txt), TOKENS (256), SEEDS (3), PROMPTS (space-separated; default: all shipped, the
issue's three first), TEMPS ("0.0 0.7"), TARGET and DRAFT (default, self:bits=4), TRACED
(1: each row also runs its one traced request, so the JSON has per-round phases, `trace` and
`phase_ms`; docs/benchmarks/never-slower.md asks for it to split a model round's cost).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path

ROWS = [
    # The app's default (tui.app.default_settings: Settings() with hybrid and cost-aware),
    # written over the target-only preset, whose other fields are Settings' defaults.
    "target-only:mode=speculative,draft_source=hybrid,policy=cost-aware,bonus=true",
    "lookup",
    "hybrid-cost-aware",
    "cost-aware",  # the draft model alone, cost-aware k 1..8
]
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
    core.models.load_pair = functools.lru_cache(maxsize=2)(core.models.load_pair)
    out.mkdir(parents=True, exist_ok=True)
    done, skipped = [], []
    for name in names:
        for temp in temps:
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
            for row in ROWS:
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
                  f"({time.perf_counter() - start:.0f} s in all)", flush=True)  # fmt: skip
            done.append(tag)
            (out / "summary.md").write_text(summary(out, done))  # kept if the call is cut
    (out / "skipped.txt").write_text("".join(f"{t}\n" for t in skipped))
    (out / "summary.md").write_text(summary(out, done))
    print(f"{len(done)} benches, {len(skipped)} skipped (skipped.txt)", flush=True)
    return 0


def summary(out: Path, tags: list[str]) -> str:
    """One table from the benches' JSON: each row's median E2E against target-only's, with
    the per-seed paired ratios' min-max (the same seed of both rows, run back to back), and
    what the guard decided per source."""
    lines = ["| prompt, T | row | vs target-only (median) | per seed min-max | guard |",
             "|---|---|---|---|---|"]
    for tag in tags:
        path = out / f"{tag}.json"
        if not path.exists():
            lines.append(f"| {tag} | (no report) | | | |")
            continue
        rows = json.loads(path.read_text())["results"]
        base = next(r for r in rows if r["settings"].get("mode") == "target-only")
        for r in rows:
            if r is base:
                continue
            pairs = [b / x for b, x in zip(base["e2e_s"], r["e2e_s"], strict=False) if x]
            span = f"{min(pairs):.2f}-{max(pairs):.2f}x" if pairs else "-"
            sp = r.get("speedup_vs_target")
            said = "; ".join(
                f"{src}: {'/'.join(sorted({str(x) for x in g['guard'] if x}))}"
                for src, g in (r.get("guard") or {}).items() if src != "none"
            )
            lines.append(f"| {tag} | {r['name']} | {'-' if sp is None else f'{sp:.2f}x'} | "
                         f"{span} | {said or '-'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/never-slower")))
