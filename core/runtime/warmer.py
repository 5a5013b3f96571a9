"""Warm-up in the order of need: the first rounds' shapes before a turn, the rest while idle.

Why: a fresh H200 compiled for more than 300 s before the default model's first token when
every size went first. A `Warmer` splits `warm_up`'s forwards (core/runtime/warmup.py) into
`WarmSize`s and remembers which ran: `first_round_sizes` before a turn's first round, the
others queued (`plan_idle`) and run one at a time (`idle_step`) whenever the engine thread is
idle, so a turn waits at most for the size in flight. All on the engine's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.runtime.compile_watch import THRESHOLD_S, CompileWatch, Notify, kernel_cache_dir
from core.runtime.warmup import WarmShapes, WarmupRecord, sampling_configs, tree_rows

PREFILLS = ("prefill", "draft-prefill")


@dataclass(frozen=True)
class WarmSize:
    """One unit of an incremental warm-up: the forward(s) that compile together, and the unit
    between which the idle warmer yields to a turn.

    kind "prefill" / "draft-prefill": the target's / the draft's prefill of `rows` tokens (a
    power of two up to the chunk: the matmul tile classes a prompt's length picks); "verify":
    a verification of `rows` rows under calibration mode `mode` with each config's processing
    and acceptance; "tree": a tree source's verification of `rows` rows (its tree forward and
    tree rules, core/runtime/warmup.py WarmShapes.tree); "draft": two chained draft steps per
    config, `compiled` or plain.
    `configs` are core.primitives.sampling.LogitsConfig.
    """

    kind: str
    rows: int
    mode: str = "auto"
    configs: tuple[Any, ...] = ()
    compiled: bool = False

    def parts(self) -> list[tuple[Any, ...]]:
        """What it warms, one key per config: a size is done when all its keys are."""
        if self.kind in PREFILLS:
            return [(self.kind, self.rows)]
        return [(self.kind, self.rows, self.mode, self.compiled, c) for c in self.configs]

    def order(self) -> tuple[Any, ...]:
        """Smallest first: fewer rows first; at equal rows a draft step, then a verification,
        then a prefill; configs as sampling_configs sorts them."""
        rank = {"draft": 0, "verify": 1, "tree": 2, "draft-prefill": 3, "prefill": 4}[self.kind]
        cfg = [(c.temperature, c.top_p, c.repetition_penalty) for c in self.configs]
        return (self.rows, rank, self.mode, self.compiled, cfg)

    def describe(self) -> str:
        if self.kind in PREFILLS:
            who = "draft " if self.kind == "draft-prefill" else ""
            return f"{who}prefill of {self.rows} tokens"
        if self.kind == "draft":
            return "compiled draft step" if self.compiled else "draft step"
        mode = "" if self.mode == "auto" else f" ({self.mode})"
        what = "tree verification" if self.kind == "tree" else "verification"
        return f"{what} of {self.rows} row{'s' if self.rows != 1 else ''}{mode}"


def prefill_bucket(prompt_tokens: int, chunk: int) -> int:
    """The prefill a prompt of this length needs warmed: its longest chunk, rounded up to a
    power of two (at most the chunk), so later turns of a growing chat find it done."""
    n = max(1, min(int(prompt_tokens), chunk))
    return min(1 << (n - 1).bit_length(), chunk)


def starting_k(settings: Any, curve: Any | None = None) -> int:
    """The k the first rounds of `settings` propose: a fixed or adaptive policy's starting k;
    the cost-aware policy's first choice on `curve` (at least 1: its first probe), with every
    row up to k_max when there is no curve yet (its calibration warms them all first). A
    copying source (lookup, hybrid) may take the copy policy's first choice instead."""
    s = settings
    if s.mode != "speculative":
        return 0
    from core.cost.policy import make_policy

    if s.policy != "cost-aware":
        return int(make_policy(s).next_k())
    if curve is None:
        return s.k_max
    view = curve.for_sampling(s.greedy) if hasattr(curve, "for_sampling") else curve
    ks = [make_policy(s, view).next_k()]
    if s.draft_source != "model":
        ks.append(make_policy(s, view, copies=True).next_k())
    return max(1, *(int(k) for k in ks))


def mode_of(settings: Any, rows: int = 2, curve: Any | None = None) -> str:
    """The calibration mode (core.dispatch.calibrate.MODE_SETTINGS) whose overrides a run of
    `settings` verifies `rows` rows under (with `curve`, "auto" may run the dense copy)."""
    from core.dispatch.patches import resolve_dispatch

    dispatch = getattr(settings, "dispatch", "auto")
    attention = getattr(settings, "verify_attention", "auto")
    if attention != "auto":
        return attention
    curve = curve if hasattr(curve, "times") else None
    resolved = resolve_dispatch(dispatch, rows, curve) if rows > 1 else dispatch
    return resolved if resolved in ("gemv", "gemm", "dense") else "auto"


def first_round_sizes(
    settings: Any,
    prompt_tokens: int,
    *,
    curve: Any | None = None,
    chunk: int | None = None,
    has_draft: bool = True,
) -> list[WarmSize]:
    """What the first rounds of a run of `settings` use, smallest first: the prompt's prefill,
    the decode step, verifications of 1..starting k + 1 rows and the draft's steps, with the
    settings' own logits processing only. Target-only runs no draft; draft-only no target
    (its prefill is the draft's, warmed with the draft's steps)."""
    from core.primitives.cached_model import PREFILL_CHUNK

    chunk = chunk or getattr(settings, "prefill_chunk", None) or PREFILL_CHUNK
    cfgs = (_config_of(settings),)
    sizes: list[WarmSize] = []
    mode = settings.mode
    if mode != "draft-only":
        sizes.append(WarmSize("prefill", prefill_bucket(prompt_tokens, chunk)))
        top = starting_k(settings, curve) + 1 if mode == "speculative" and has_draft else 1
        spec = mode == "speculative"
        modes = [mode_of(settings, r, curve) if spec else "auto" for r in range(1, top + 1)]
        sizes += [WarmSize("verify", r, m, cfgs) for r, m in enumerate(modes, 1)]
        if modes[0] != "auto":  # the decode step and a k = 0 round verify unpatched
            sizes.append(WarmSize("verify", 1, "auto", cfgs))
    if mode != "target-only" and has_draft:
        sizes.append(WarmSize("draft-prefill", prefill_bucket(prompt_tokens, chunk)))
        sizes.append(WarmSize("draft", 1, configs=cfgs,
                              compiled=getattr(settings, "step", "eager") != "eager"))
    return sorted(sizes, key=WarmSize.order)


def _config_of(settings: Any) -> Any:
    """The logits processing a run of `settings` uses, as sampling_configs spells it."""
    from core.primitives.sampling import LogitsConfig

    s = settings
    return LogitsConfig(0.0 if s.greedy else 0.7, 0.9 if s.top_p < 1.0 else 1.0,
                        1.1 if s.repetition_penalty != 1.0 else 1.0, s.repetition_context)


def every_size(
    settings: Sequence[Any],
    *,
    rows: Sequence[int],
    modes: Sequence[str] = ("auto",),
    chunk: int | None = None,
    has_draft: bool = True,
) -> list[WarmSize]:
    """Everything a session of these settings can use (what `warm_up` runs at once), one
    size per row count, mode and draft variant, smallest first; a tree source's settings add
    its tree verifications (`tree_rows`)."""
    from core.primitives.cached_model import PREFILL_CHUNK

    cfgs = tuple(sampling_configs(settings))
    sizes = [WarmSize("verify", int(r), m, cfgs) for m in dict.fromkeys(modes) for r in rows]
    sizes += [WarmSize("tree", r, m, cfgs) for m in dict.fromkeys(modes)
              for r in tree_rows(settings)]
    if has_draft:
        sizes.append(WarmSize("draft-prefill", chunk or PREFILL_CHUNK))
        for compiled in dict.fromkeys((False, any(getattr(s, "step", "eager") != "eager"
                                                  for s in settings))):
            sizes.append(WarmSize("draft", 1, configs=cfgs, compiled=compiled))
    sizes.append(WarmSize("prefill", chunk or PREFILL_CHUNK))
    return sorted(sizes, key=WarmSize.order)


@dataclass(frozen=True)
class IdleProgress:
    """What the idle warmer just did: `done` of `total` sizes, the last one's description;
    `running`: it is about to warm that one (Warmer.idle_next), so the status says it works
    (for 90 s after a start on a CPU the app used a core while the status said "ready")."""

    done: int
    total: int
    last: str
    seconds: float
    running: bool = False

    @property
    def finished(self) -> bool:
        return self.done >= self.total and not self.running

    def text(self) -> str:
        if self.running:
            return (f"warming kernels while idle: {self.done + 1}/{self.total} · stops when "
                    "you type")
        if self.finished:
            return f"kernels warmed in the background ({self.total} shapes)"
        return f"kernels warmed while idle: {self.done}/{self.total}"


class Warmer:
    """An engine's warm-up in the order of need, remembering what ran.

    `first_round(settings, prompt_tokens)` runs, inside a CompileWatch (its notices as
    `warm_up`'s), only what the first rounds of that run use; `plan_idle(sizes)` queues the
    rest, and each `idle_step()` warms the smallest pending size and returns, so a caller
    that checks for work between steps (the app's engine thread) makes a turn wait at most
    for the size in flight. Nothing runs on the CPU backend unless `force`. Its caches are
    its own (fresh, small), never the engine's; all calls on the engine's thread.
    """

    def __init__(self, engine: Any, *, label: str | None = None, backend: Any | None = None,
                 force: bool = False, chunk: int | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        from core.dispatch.backend import current_backend
        from core.primitives.cached_model import PREFILL_CHUNK

        self.engine = engine
        models = getattr(engine, "models", None) or {}
        self.label = label or getattr(models.get("target"), "spec", None) or "this model"
        self.backend = backend or current_backend()
        self.enabled = force or self.backend.backend != "cpu"
        self.chunk = chunk or PREFILL_CHUNK
        self.clock = clock
        self.done: set[tuple[Any, ...]] = set()
        self.idle: list[WarmSize] = []
        self.idle_total = 0
        self.ran: list[WarmSize] = []  # every size run, in order (tests, the record)
        self._shapes: WarmShapes | None = None
        self._target: Any = None
        self._drafts: dict[bool, Any] = {}

    @property
    def has_draft(self) -> bool:
        return getattr(self.engine, "draft_model", None) is not None

    def pending(self, sizes: Iterable[WarmSize]) -> list[WarmSize]:
        """The sizes with something not yet warmed, smallest first."""
        return sorted((z for z in sizes if not self.done.issuperset(z.parts())),
                      key=WarmSize.order)

    def first_round(self, settings: Any, prompt_tokens: int, *,
                    on_notice: Notify | None = None, curve: Any | None = None,
                    threshold_s: float = THRESHOLD_S) -> WarmupRecord:
        """Warm what the first rounds of a run of `settings` on a prompt of `prompt_tokens`
        use (first_round_sizes), with the compile notices of `warm_up`. Prefills are of the
        smaller of the Warmer's chunk and the settings' own, which the engine prefills in (a
        narrow start's is small: core/runtime/warm_start.py)."""
        if curve is None:
            curve = getattr(self.engine, "cost_curve", None)
        chunk = min(self.chunk, getattr(settings, "prefill_chunk", None) or self.chunk)
        sizes = first_round_sizes(settings, prompt_tokens, curve=curve, chunk=chunk,
                                  has_draft=self.has_draft)
        return self.run(sizes, on_notice=on_notice, threshold_s=threshold_s,
                        prompt_tokens=prompt_tokens)

    def run(self, sizes: Sequence[WarmSize], *, on_notice: Notify | None = None,
            threshold_s: float = THRESHOLD_S, prompt_tokens: int = 0) -> WarmupRecord:
        """The pending ones of `sizes`, inside one CompileWatch (silent unless one stalls)."""
        if not self.enabled:
            return WarmupRecord(False, backend=self.backend.backend,
                                reason="the CPU backend compiles no kernels at first use")
        # As a run uses them: the prefills first (they give the rest its context).
        todo = sorted(self.pending(sizes), key=lambda z: (z.kind not in PREFILLS, z.order()))
        record = WarmupRecord(True, backend=self.backend.backend, prompt_tokens=prompt_tokens,
                              rows=sorted({z.rows for z in todo if z.kind == "verify"}),
                              tree_rows=sorted({z.rows for z in todo if z.kind == "tree"}))
        t0 = self.clock()
        watch = CompileWatch(self.label, on_notice=on_notice, threshold_s=threshold_s,
                             cache_dir=kernel_cache_dir(self.backend.backend))
        with watch:
            for size in todo:
                self._run(size, watch.progress)
        record.seconds = self.clock() - t0
        record.cache_growth_bytes = watch.cache_growth_bytes
        grew = watch.cache_growth_bytes
        record.compiled = bool(grew) if grew is not None else watch.noticed
        return record

    def plan_idle(self, sizes: Iterable[WarmSize]) -> None:
        """Queue `sizes` for idle_step, smallest first (what is done already is skipped)."""
        if not self.enabled:
            return
        self.idle = self.pending([*self.idle, *sizes])
        self.idle_total = len(self.idle)

    @property
    def idle_pending(self) -> bool:
        return bool(self.idle)

    def idle_next(self, first: Sequence[WarmSize] = ()) -> IdleProgress | None:
        """What idle_step(first) would warm next, before it runs (running=True); None when
        nothing is left."""
        pending = self.pending(self.idle)
        preferred = [z for z in self.pending(first) if z.kind not in PREFILLS]
        if not pending and not preferred:
            return None
        size = preferred[0] if preferred else pending[0]
        total = self.idle_total + sum(z not in pending for z in preferred)
        return IdleProgress(self.idle_total - len(pending), total, size.describe(), 0.0, True)

    def idle_step(self, first: Sequence[WarmSize] = ()) -> IdleProgress | None:
        """Warm one size: the smallest pending of `first` (what the current settings' next
        turn would use), else of the idle plan; None when nothing is left. No notices: the
        caller says what it does (the status line)."""
        self.idle = self.pending(self.idle)
        preferred = [z for z in self.pending(first) if z.kind not in PREFILLS]
        if not self.idle and not preferred:
            self._release()
            return None
        size = preferred[0] if preferred else self.idle[0]
        if size not in self.idle:
            self.idle_total += 1
        t0 = self.clock()
        self._run(size, lambda: None)
        self.idle = self.pending(self.idle)
        done = self.idle_total - len(self.idle)
        if not self.idle:
            self._release()
        # the next turn's sizes still to come count in the total (not yet in the plan)
        coming = [z for z in self.pending(first) if z.kind not in PREFILLS and z not in self.idle]
        return IdleProgress(done, self.idle_total + len(coming), size.describe(),
                            self.clock() - t0)

    def _run(self, size: WarmSize, progress: Callable[[], None]) -> None:
        shapes = self._shapes_for(progress)
        todo = [p for p in size.parts() if p not in self.done]
        if size.kind == "prefill":
            # A new context of this length: the verifications after it run on top of it.
            self._target = shapes.target_cache(shapes.prompt(size.rows), self.chunk)
        elif size.kind == "draft-prefill":
            self._drafts = {False: shapes.draft_cache(shapes.prompt(size.rows), self.chunk)}
        elif size.kind in ("verify", "tree"):
            if self._target is None:
                self._target = shapes.target_cache(shapes.prompt(1), self.chunk)
            configs = [p[-1] for p in todo]
            run = shapes.verify if size.kind == "verify" else shapes.tree
            run(self._target, size.rows, size.mode, configs)
        else:
            d = self._drafts.get(size.compiled)
            if d is None:  # a context of one token (a prefilled cache: the fused step needs one)
                d = self._drafts[size.compiled] = shapes.draft_cache(shapes.prompt(1), self.chunk)
            shapes.draft_steps(d, [p[-1] for p in todo], size.compiled)
        self.done.update(todo)
        self.ran.append(size)

    def _shapes_for(self, progress: Callable[[], None]) -> WarmShapes:
        if self._shapes is None:
            e = self.engine
            self._shapes = WarmShapes(e.target_model, getattr(e, "draft_model", None),
                                   e.vocab_size, [], self.backend, progress)
        self._shapes.progress = progress
        return self._shapes

    def _release(self) -> None:
        """Nothing left to warm: the warmer's own caches go (their memory is the engine's)."""
        self._target = None
        self._drafts.clear()
