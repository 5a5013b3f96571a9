"""A drafting round's own cost against mlx-lm's loop, counted on the CPU (issue 28).

On the H200 our speculative decoding ran at 0.93x of mlx-lm's `speculative_generate_step` on
the same models while our target-only ran at 1.06x of its `generate_step`: what our round does
beyond mlx-lm's costs the difference. A CPU clock cannot show what a host-bound GPU pays, so
this counts, on the same tiny random pair (`shape:tiny` target; `shape:tiny-draft`, and the
target as its own draft, every draft accepted), greedy, k = 4, the same prompt and tokens:
- every MLX call a round makes outside the models' forwards (the functions of `mlx.core` and
  the methods and operators of `mx.array`: each is a graph node or a host read), by caller;
- the host syncs a round (`eval`, and `int()`/`float()` of an array) and host reads
  (`tolist`, `item`) of arrays already evaluated;
- the round's Python time with the models' forwards and the device's work left out (cProfile
  tottime of every frame but the models', and of the MLX calls made outside them, `eval` and
  the reads excluded). That figure is this machine's; only its ratio, ours to mlx-lm's in the
  same run (requests interleaved ABAB), is reported.

    python docs/benchmarks/peer_ops.py count OUT.json      (repo root; ~1 min on 2 cores)
    python docs/benchmarks/peer_ops.py count OUT.json --pairs h200   (a GPU: h200/peer-ops.sh)
    python docs/benchmarks/peer_ops.py page                (round-overhead.md from the data)

`page` writes docs/benchmarks/round-overhead.md whole from data/cpu-2026-12-01-peer-ops/
(before.json.xz and after.json.xz); tests/docs/test_peer_ops_page.py checks it agrees.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import platform
import pstats
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

DATA = HERE / "data" / "cpu-2026-12-01-peer-ops"
PAGE = HERE / "round-overhead.md"
MODEL_PATHS = ("/mlx_lm/models/", "/mlx/nn/")  # the forwards (and the caches they update)
PEER_PATH = "/mlx_lm/generate.py"
SYNCS = {"eval", "array.int", "array.float", "array.bool", "array.index"}  # the host waits
READS = {"array.tolist", "array.item"}  # of arrays an eval already computed
# where the host may wait on the device: timed apart while profiling (an MLX call is C code
# cProfile does not see, so its time would otherwise be its caller's own)
WAITS = ("eval", "async_eval")
WAIT_METHODS = ("tolist", "item", "__int__", "__float__", "__bool__", "__index__")
ARRAY_METHODS = (
    "astype", "reshape", "sum", "squeeze", "flatten", "tolist", "item", "cumprod", "argmax",
    "max", "min", "prod", "log", "exp", "abs", "__getitem__", "__eq__", "__ne__", "__lt__",
    "__le__", "__gt__", "__ge__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
    "__rmul__", "__truediv__", "__rtruediv__", "__neg__", "__and__", "__or__", "__invert__",
    "__int__", "__float__", "__bool__", "__index__",
)
PROMPT = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
K = 4


def where_called(skip: int = 2) -> str:
    """Who made an MLX call: "model" inside a forward, "mlx-lm:FUNC" in mlx-lm's loop,
    "ours:FILE:FUNC" in core/, the harness's greedy sampler as mlx-lm's, else "?"."""
    f: Any = sys._getframe(skip)
    while f is not None:
        path = f.f_code.co_filename
        if any(m in path for m in MODEL_PATHS):
            return "model"
        if PEER_PATH in path:
            return "mlx-lm:" + f.f_code.co_name
        if "/core/" in path:
            return "ours:" + path.split("/core/")[-1] + ":" + f.f_code.co_name
        if f.f_code.co_name == "mlx_lm_sampler":
            return "mlx-lm:sampler"
        f = f.f_back
    return "?"


class OpCounter:
    """Wraps mlx.core's functions and mx.array's methods while installed; counts per
    (operation, caller). Removed again before anything is timed."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, owner: Any, name: str, label: str) -> None:
        fn = getattr(owner, name)
        seen = self.seen

        def counted(*a: Any, **k: Any) -> Any:
            seen[(label, where_called())] += 1
            return fn(*a, **k)

        try:
            setattr(owner, name, counted)
        except (AttributeError, TypeError):
            return
        self._saved.append((owner, name, fn))

    def install(self) -> None:
        import mlx.core as mx

        for name in dir(mx):
            obj = getattr(mx, name)
            if name.startswith("_") or isinstance(obj, type) or not callable(obj):
                continue
            self._wrap(mx, name, name)
        for name in ("split", "key", "uniform", "categorical"):
            self._wrap(mx.random, name, "random." + name)
        for name in ARRAY_METHODS:
            if hasattr(mx.array, name):
                self._wrap(mx.array, name, "array." + name.strip("_"))

    def remove(self) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved = []


def peer_sampler(vocab: int) -> Callable[[Any], Any]:
    """mlx-lm's greedy sampler on our vocabulary slice, as core/bench/peer.py gives it (its
    calls are counted as mlx-lm's: `where_called` knows its name)."""
    import mlx.core as mx

    def mlx_lm_sampler(logprobs: Any) -> Any:
        return mx.argmax(logprobs[..., :vocab], axis=-1)

    return mlx_lm_sampler


def our_rounds(engine: Any, tokens: int) -> Iterator[list[int]]:
    """Our engine's greedy k = 4 model rounds: yields each round's tokens as it commits."""
    from core.settings import Settings

    s = Settings(mode="speculative", draft_source="model", policy="fixed", k=K, k_max=8,
                 rule="greedy", temperature=0.0, bonus=True, traced=False, ignore_eos=True,
                 max_tokens=tokens)
    engine.reset()
    for item in engine.generate(PROMPT, s):
        if hasattr(item, "index"):
            yield [t.id for t in item.tokens]
    engine.reset()


def peer_rounds(pair: Any, tokens: int) -> Iterator[list[int]]:
    """mlx-lm's speculative_generate_step on the same models: yields each round's tokens
    (a round ends with the target's own token, from_draft False)."""
    import mlx.core as mx
    from mlx_lm.generate import speculative_generate_step

    gen = speculative_generate_step(
        mx.array(PROMPT, dtype=mx.uint32), pair.target.model, pair.draft.model,
        num_draft_tokens=K, max_tokens=tokens, sampler=peer_sampler(pair.vocab_size),
    )
    got: list[int] = []
    for tok, _, from_draft in gen:
        got.append(int(tok))
        if not from_draft:
            yield got
            got = []
    if got:
        yield got


def count_side(rounds: Iterator[list[int]], counter: OpCounter) -> dict[str, Any]:
    """Mean counts per round over every round but the first (its prefill, a draft's first
    catch-up) and the run's end (never inside a round's window)."""
    counter.seen.clear()
    per_round: list[Counter[tuple[str, str]]] = []
    ids: list[int] = []
    for i, toks in enumerate(rounds):
        if i > 0:
            per_round.append(Counter(counter.seen))
        ids.extend(toks)
        counter.seen.clear()
    n = len(per_round)
    total: Counter[tuple[str, str]] = Counter()
    for r in per_round:
        total.update(r)
    loop = {(op, w): v for (op, w), v in total.items() if w != "model"}
    return {
        "rounds": n,
        "tokens": len(ids),
        "token_ids": ids,
        "loop_calls": sum(loop.values()) / n,
        "syncs": sum(v for (op, _), v in loop.items() if op in SYNCS) / n,
        "reads": sum(v for (op, _), v in loop.items() if op in READS) / n,
        "model_calls": sum(v for (op, w), v in total.items() if w == "model") / n,
        "by_call": {f"{op} @ {w}": v / n
                    for (op, w), v in sorted(loop.items(), key=lambda kv: -kv[1])},
    }


def _is_model(path: str) -> bool:
    return any(m in path for m in MODEL_PATHS)


class DeviceWaits:
    """While installed, every call that may wait on the device (eval, async_eval, the reads)
    runs inside a Python frame named `device_wait`, so cProfile charges its time there (left
    out) instead of to its caller's own time (kept)."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        import mlx.core as mx

        for owner, names in ((mx, WAITS), (mx.array, WAIT_METHODS)):
            for name in names:
                fn = getattr(owner, name)

                def device_wait(*a: Any, _fn: Any = fn, **k: Any) -> Any:
                    return _fn(*a, **k)

                setattr(owner, name, device_wait)
                self._saved.append((owner, name, fn))

    def remove(self) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved = []


def host_seconds(stats: pstats.Stats) -> tuple[float, dict[str, float], int]:
    """The Python time outside the models' forwards: every frame's own time (with the MLX
    calls it made, which cProfile cannot see apart) but the models', the harness's and the
    device waits'; a Python builtin's only from callers outside the models. Also the
    Python calls made there (deterministic, unlike their time)."""
    total, by, calls = 0.0, {}, 0
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (path, _line, name), (_cc, nc, tt, _ct, callers) in raw.items():
        harness = path == __file__ and name != "mlx_lm_sampler"
        if _is_model(path) or harness or "lsprof" in name:
            continue
        if path == "~":  # a builtin: charged to each caller outside the models
            outside = [c for (cp, _l, cn), c in callers.items()
                       if not _is_model(cp) and cn != "device_wait"]
            tt, nc = sum(c[2] for c in outside), sum(c[1] for c in outside)
        calls += nc
        if tt <= 0:
            continue
        total += tt
        short = path.split("/core/")[-1] if "/core/" in path else Path(path).name
        key = f"{short}:{name}"
        by[key] = by.get(key, 0.0) + tt
    return total, by, calls


def profile_side(rounds: Iterator[list[int]]) -> tuple[float, int, dict[str, float], int]:
    """Profiled host seconds over every round but the first, and the rounds counted; each
    round its own profile, so the run's end (the summary, a reset) is left out too."""
    it = iter(rounds)
    next(it)  # the first round: its prefill and first catch-up
    profiles = []
    waits = DeviceWaits()
    waits.install()
    try:
        _profile_rounds(it, profiles)
    finally:
        waits.remove()
    stats = pstats.Stats(profiles[0])
    for prof in profiles[1:]:
        stats.add(prof)
    secs, by, calls = host_seconds(stats)
    return secs, len(profiles), by, calls


def thread_side(rounds: Iterator[list[int]]) -> tuple[float, float, int]:
    """This thread's CPU seconds and the wall seconds over every round but the first,
    unprofiled (no per-call instrumentation to bias the side with more Python calls), and
    the rounds counted. MLX computes on its own threads, so the CPU time is the host's work:
    the loop's and the graph building of the models' forwards (the same forwards on both
    sides). The wall time is reported from a GPU only (never a speed on the CPU)."""
    it = iter(rounds)
    next(it)
    cpu, wall, n = 0.0, 0.0, 0
    while True:
        t0, w0 = time.thread_time(), time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        cpu += time.thread_time() - t0
        wall += time.perf_counter() - w0
        n += 1
    return cpu, wall, n


def _profile_rounds(it: Iterator[list[int]], profiles: list[cProfile.Profile]) -> None:
    while True:
        prof = cProfile.Profile(time.thread_time)  # this thread's CPU: no other process, no wait
        prof.enable()
        try:
            next(it)
        except StopIteration:
            prof.disable()
            break
        prof.disable()
        profiles.append(prof)


# The pairs counted: (label, target, draft). "tiny" is this CPU's; "h200" is issue 28's peer
# (docs/benchmarks/h200/peer512.sh: the 7B/0.5B shapes), and the 0.5B as its own draft.
PAIRS = {
    "tiny": (("tiny-draft (1 of 2 layers)", "shape:tiny", "shape:tiny-draft"),
             ("draft = target (every draft accepted)", "shape:tiny", "shape:tiny")),
    "h200": (("qwen2.5-7b / qwen2.5-0.5b shapes", "shape:qwen2.5-7b", "shape:qwen2.5-0.5b"),
             ("qwen2.5-0.5b drafting itself (every draft accepted)", "shape:qwen2.5-0.5b",
              "shape:qwen2.5-0.5b")),
}


def count(out: Path, tokens: int, repeats: int, pairs: str = "tiny") -> int:
    from core.decode.engine import Engine
    from core.models import load_pair
    from core.version import tool_version

    cases = []
    import mlx.core as mx

    on_gpu = mx.default_device() == mx.gpu
    for label, target, draft in PAIRS[pairs]:
        pair = load_pair(target, draft)
        engine = Engine.from_pair(pair)
        for _ in our_rounds(engine, 16):  # a warm-up of each loop, uncounted
            pass
        for _ in peer_rounds(pair, 16):
            pass
        counter = OpCounter()
        counter.install()
        try:
            ours = count_side(our_rounds(engine, tokens), counter)
            theirs = count_side(peer_rounds(pair, tokens), counter)
        finally:
            counter.remove()
        ratios, ours_us, theirs_us = [], [], []
        cpu_ratios, ours_cpu, theirs_cpu = [], [], []
        wall: list[tuple[float, float]] = []  # (ours, mlx-lm) us a round: a GPU's only
        ours_by: dict[str, float] = {}
        for _ in range(repeats):  # interleaved: a slow spell of the host hits both sides
            a, wa, na = thread_side(our_rounds(engine, tokens))
            b, wb, nb = thread_side(peer_rounds(pair, tokens))
            ours_cpu.append(a / na * 1e6)
            theirs_cpu.append(b / nb * 1e6)
            if on_gpu:
                wall.append((wa / na * 1e6, wb / nb * 1e6))
            cpu_ratios.append(ours_cpu[-1] / theirs_cpu[-1])
            a, na, by, ours_calls = profile_side(our_rounds(engine, tokens))
            b, nb, _, peer_calls = profile_side(peer_rounds(pair, tokens))
            ours["python_calls"], theirs["python_calls"] = ours_calls / na, peer_calls / nb
            ours_us.append(a / na * 1e6)
            theirs_us.append(b / nb * 1e6)
            ratios.append(ours_us[-1] / theirs_us[-1])
            for key, v in by.items():
                ours_by[key] = ours_by.get(key, 0.0) + v / na * 1e6 / repeats
        top = dict(sorted(ours_by.items(), key=lambda kv: -kv[1])[:20])
        cases.append({
            "case": label, "target": target, "draft": draft, "k": K, "tokens": tokens,
            "same_tokens": ours["token_ids"] == theirs["token_ids"],
            "ours": ours, "mlx_lm": theirs,
            "host_us_per_round": {"ours": ours_us, "mlx_lm": theirs_us, "ratio": ratios,
                                  "ratio_median": statistics.median(ratios)},
            "thread_cpu_us_per_round": {"ours": ours_cpu, "mlx_lm": theirs_cpu,
                                        "ratio": cpu_ratios,
                                        "ratio_median": statistics.median(cpu_ratios)},
            "ours_host_us_by_frame": top,
        })
        if wall:
            cases[-1]["wall_us_per_round"] = {
                "ours": [w[0] for w in wall], "mlx_lm": [w[1] for w in wall],
                "ratio": [w[0] / w[1] for w in wall],
                "ratio_median": statistics.median(w[0] / w[1] for w in wall)}
        c = cases[-1]
        print(
            f"{label}: ours {ours['loop_calls']:.1f} loop calls, {ours['syncs']:.1f} syncs, "
            f"{ours['reads']:.1f} reads a round; mlx-lm {theirs['loop_calls']:.1f}, "
            f"{theirs['syncs']:.1f}, {theirs['reads']:.1f}; host time ratio "
            f"{c['host_us_per_round']['ratio_median']:.2f}, thread CPU ratio "
            f"{c['thread_cpu_us_per_round']['ratio_median']:.2f} (same tokens: {c['same_tokens']})"
        )
    import mlx_lm

    doc = {
        "schema": 1,
        "what": "a speculative round's own MLX calls, syncs and host time, ours against "
                "mlx-lm's speculative_generate_step (peer_ops.py)",
        "environment": {"python": platform.python_version(), "machine": platform.machine(),
                        "mlx": mx.__version__, "mlx_lm": mlx_lm.__version__,
                        "specdec_tui": tool_version(), "repeats": repeats,
                        "device": str(mx.default_device()),
                        "device_name": mx.device_info().get("device_name")},
        "cases": cases,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


# -- the page ---------------------------------------------------------------------------------


def _f(x: float, spec: str = ".1f") -> str:
    return format(x, spec)


def _range(r: dict[str, Any]) -> str:
    return (f"{_f(r['ratio_median'], '.2f')}x ({_f(min(r['ratio']), '.2f')}-"
            f"{_f(max(r['ratio']), '.2f')})")


def table(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Per case and per round: ours before -> after, then mlx-lm's (its loop is the same
    code in both files: the after run's), for the counts; the two host-time ratios, ours to
    mlx-lm's (median of the interleaved repeats, min-max), before -> after."""
    rows = ["| Case | loop MLX calls | host syncs | host reads | Python calls | MLX calls in "
            "the forwards | host time "
            "outside the forwards (cProfile), ours / mlx-lm | this thread's CPU, "
            "unprofiled, ours / mlx-lm | rounds (ours / mlx-lm) |",
            "|---|---|---|---|---|---|---|---|---|"]
    by_case = {c["case"]: c for c in before["cases"]}
    for a in after["cases"]:
        b = by_case.get(a["case"], a)
        cells = []
        for key in ("loop_calls", "syncs", "reads", "python_calls", "model_calls"):
            cells.append(f"{_f(b['ours'][key])} -> {_f(a['ours'][key])} / "
                         f"{_f(a['mlx_lm'][key])}")
        for key in ("host_us_per_round", "thread_cpu_us_per_round"):
            cells.append(f"{_range(b[key])} -> {_range(a[key])}")
        rows.append(f"| {a['case']} | {' | '.join(cells)} | "
                    f"{a['ours']['rounds']} / {a['mlx_lm']['rounds']} |")
    return rows


def calls_table(doc: dict[str, Any], side: str, case: int = 0) -> list[str]:
    """One side's calls a round outside the forwards, by operation and caller."""
    c = doc["cases"][case][side]
    rows = ["| call @ caller | per round |", "|---|---|"]
    rows += [f"| `{k}` | {_f(v, '.2f')} |" for k, v in c["by_call"].items()]
    return rows


def commit_of(doc: dict[str, Any]) -> str:
    v = (doc.get("environment") or {}).get("specdec_tui") or {}
    return str(v.get("commit") or "?")[:7] + ("+dirty" if v.get("dirty") else "")


def render_page(data: Path = DATA) -> str:
    """round-overhead.md, every number from the two JSON files."""
    from rawdata import load_json

    before, after = load_json(data / "before.json.xz"), load_json(data / "after.json.xz")
    rel = f"data/{data.name}"
    env = after["environment"]
    lines = [
        "# A drafting round's own cost against mlx-lm's loop (issue 28)",
        "",
        "<!-- written whole by peer_ops.py page from its data; tests/docs/test_peer_ops_page.py"
        " checks it -->",
        "",
        "On the H200 ([never-slower.md](never-slower.md), run 3) our speculative decoding ran "
        "at 0.93x of mlx-lm's `speculative_generate_step` on the 7B/0.5B shapes (greedy, k = 4,"
        " 128 tokens) while our target-only ran at 1.06x of its `generate_step`. "
        "[peer_ops.py](peer_ops.py) counts what a round does outside the models' forwards, "
        "ours and mlx-lm's, on the same tiny random pair (`shape:tiny`, drafted by "
        "`shape:tiny-draft` and by itself), the same prompt, greedy, k = 4, "
        f"{after['cases'][0]['tokens']} tokens, on this CPU (MLX {env['mlx']}, mlx-lm "
        f"{env['mlx_lm']}). Counted, never timed on this CPU: the host time column is a "
        "ratio of ours to mlx-lm's within the same run (cProfile's own time of every frame "
        "outside the forwards, `eval` and the reads left out, and this thread's CPU time "
        f"unprofiled; {env['repeats']} interleaved repeats), never a speed.",
        "",
        f"Before: the code at {commit_of(before)}; after: {commit_of(after)}.",
        "",
        *table(before, after),
        "",
        f"*Mean per round, the first round (prefill) left out; a -> b / c: ours before -> "
        "ours after / mlx-lm's. Loop MLX calls: every "
        "function of `mlx.core` and every method or operator of `mx.array` called outside "
        "the models' forwards (each a graph node or a read). Host syncs: `eval` and `int()` "
        "of an array; host reads: `tolist`/`item` of an evaluated array; Python calls: "
        "the function calls cProfile counts outside the forwards (exact, unlike their time). "
        "Host time: cProfile's own time of those frames on this thread's CPU clock, which "
        "charges its per-call cost to the side with more calls; this thread's CPU, "
        "unprofiled: the round's whole host work, the forwards' graph building included "
        "(MLX computes on its own threads). Data: "
        f"[{rel}/before.json.xz]({rel}/before.json.xz), "
        f"[{rel}/after.json.xz]({rel}/after.json.xz).*",
        "",
        f"Same greedy tokens as mlx-lm in every case: "
        f"{all(c['same_tokens'] for c in after['cases'])}.",
        "",
        "## What changed",
        "",
        "- A greedy round splits no random key: the engine's loop and the round each split "
        "one a round and nothing drew from them (mlx-lm's loop splits none). A greedy "
        "`DraftRequest` carries no keys.",
        "- Greedy acceptance is one array, [drafts, the target's argmax per row, n] "
        "(`core.primitives.sampling.accept_greedy_packed`): one eval and one read a round, the "
        "next token taken as row n's on the host; the Verdict's constant TV, its read and "
        "the packing's casts and reshapes are gone. n is still counted on the device.",
        "- The verification and each draft step keep their rows with one slice of the "
        "output, none where the output already is what is kept.",
        "- After a round that accepted every draft, the draft model is one token behind (the "
        "last draft): it is fed with the pending token in the first draft step's forward, as "
        "mlx-lm's loop does, instead of a forward of its own first (the forwards' column, "
        "every-draft-accepted row). On a host-bound GPU that forward cost about a draft step.",
        "- A lossless round builds and reads no TV (it realises none); the predicted kernel "
        "is asked once per row count; the rewinds compare without copying the conversation.",
        "",
        "## What is left",
        "",
        "- Python calls: ours are several times mlx-lm's (the table): each round asks the "
        "plan and its policy who drafts, builds a RoundEvent with its timer, keeps the "
        "run's totals and acceptance tallies, and reads the clock for the guard; mlx-lm's "
        "loop does none of it. These are what the app and the bench show, so they stay; "
        "what a GPU pays for them is what the H200 call below measures.",
        "- Host time: cProfile charges its per-call cost to the side with more calls, so its "
        "ratio overstates ours; the unprofiled thread CPU includes the forwards' graph "
        "building and moves within its own spread between runs here. Neither is a speed.",
        "",
        "## Ours after, call by call (tiny-draft)",
        "",
        *calls_table(after, "ours"),
        "",
        "## mlx-lm's, call by call (tiny-draft)",
        "",
        *calls_table(after, "mlx_lm"),
        "",
        "## What a GPU run would confirm",
        "",
        "The paired peer on the H200, untraced (the lead's call, ~113 s), and these counts "
        "with each loop's wall time a round on the 7B/0.5B shapes "
        "([h200/peer-ops.sh](h200/peer-ops.sh), ~5 min):",
        "",
        "```sh",
        "TOKENS=128 SEEDS=3 TRACED=0 bash docs/benchmarks/h200/peer512.sh $OUT",
        "bash docs/benchmarks/h200/peer-ops.sh $OUT",
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("count", help="count both loops on the tiny pair into a JSON file")
    c.add_argument("out", type=Path)
    c.add_argument("--tokens", type=int, default=128)
    c.add_argument("--repeats", type=int, default=3)
    c.add_argument("--pairs", choices=sorted(PAIRS), default="tiny",
                   help="tiny: this CPU's pair; h200: issue 28's 7B/0.5B shapes (a GPU)")
    sub.add_parser("page", help="write round-overhead.md from the data")
    args = ap.parse_args(argv)
    if args.cmd == "count":
        return count(args.out, args.tokens, args.repeats, args.pairs)
    PAGE.write_text(render_page())
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
