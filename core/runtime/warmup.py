"""Compiles seen, never timed: a watch that says when a model's first use stalls on GPU kernel
compilation, and a warm-up that runs every shape the timed work will use before any timing.

Why: on a fresh CUDA machine MLX compiles its kernels (NVRTC) at their first use and caches
them on disk (`MLX_PTX_CACHE_DIR`, else <tmp>/mlx/<version>/ptx); on Metal it compiles at first
use in every process, with no disk cache; on the CPU only `mx.compile`d functions compile. A
first chat then waited a minute with no sign, and a calibration or a timed request that ran
first paid for compiles it should never have measured. So:

- `CompileWatch` wraps first uses: a daemon timer thread that, when the guarded work made no
  progress for `threshold_s` (under a second), says "compiling GPU kernels for <model>: first
  use on this machine", then the elapsed time every `interval_s`, then "compiled in N s" with
  the kernel cache's growth where there is a disk cache. Fast work says nothing. Notices go
  to `on_notice` and to the `core.runtime.warmup` logger as WARNINGs carrying the notice
  (`record.compile_notice`): the app's bridge forwards them, the CLIs print them
  (`notices_to`).
- `warm_up` runs, on fresh caches (the engine's are untouched), the target's prefill at the
  chunk size, its decode step, verifications of every row count asked for (per calibration
  mode) with the acceptance rules, the draft's prefill and decode steps (greedy and sampled,
  compiled when asked), inside one watch; then a settle check repeats a single-row target step
  until two consecutive timings agree within `settle_tolerance`. On the CPU backend it does
  nothing unless forced. It only runs before timed work: decode rounds are never touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

THRESHOLD_S = 0.75  # no progress for this long: a compile is under way (said within a second)
INTERVAL_S = 5.0  # then the elapsed time this often
SETTLE_TRIES = 8
SETTLE_TOLERANCE = 0.2  # two consecutive single-row steps within 20% of each other
PTX_CACHE_ENV = "MLX_PTX_CACHE_DIR"  # mlx/backend/cuda/jit_module.cpp: ptx_cache_dir()


def kernel_cache_dir(backend: str, environ: dict[str, str] | None = None) -> Path | None:
    """Where MLX keeps compiled GPU kernels on disk: CUDA only (Metal and the CPU keep none).

    As MLX's `ptx_cache_dir()`: $MLX_PTX_CACHE_DIR, else <temp dir>/mlx/<mlx version>/ptx.
    """
    if backend != "cuda":
        return None
    env = os.environ if environ is None else environ
    if env.get(PTX_CACHE_ENV):
        return Path(env[PTX_CACHE_ENV])
    import mlx.core as mx

    return Path(tempfile.gettempdir()) / "mlx" / mx.__version__ / "ptx"


def tree_bytes(path: Path | None) -> int | None:
    """Bytes of the files under `path` (None: no such folder)."""
    if path is None or not path.is_dir():
        return None
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_size
    return total


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


@dataclass(frozen=True)
class CompileNotice:
    """One line about a compile: "started" (once), "progress" (every interval), "done"."""

    kind: str
    label: str
    elapsed_s: float
    text: str
    cache_growth_bytes: int | None = None


Notify = Callable[[CompileNotice], None]


class CompileWatch:
    """Say so when the guarded first use stalls (a compile), with its elapsed time; else nothing.

    `progress()` marks that the guarded work moved on (a warm-up calls it between its steps),
    so only a step that stalls past `threshold_s` is taken for a compile, not a long run of
    fast steps. The timer thread never touches MLX and the guarded work never waits for it.
    """

    def __init__(
        self,
        label: str,
        *,
        on_notice: Notify | None = None,
        threshold_s: float = THRESHOLD_S,
        interval_s: float = INTERVAL_S,
        cache_dir: Path | None = None,
        log_notices: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.on_notice = label, on_notice
        self.threshold_s, self.interval_s = threshold_s, interval_s
        self.cache_dir, self.log_notices, self.clock = cache_dir, log_notices, clock
        self.noticed = False
        self.seconds = 0.0
        self.cache_growth_bytes: int | None = None
        self._cache_before: int | None = None
        self._t0 = self._last = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CompileWatch:
        self._cache_before = tree_bytes(self.cache_dir)
        self._t0 = self._last = self.clock()
        self._thread = threading.Thread(target=self._watch, name="compile-watch", daemon=True)
        self._thread.start()
        return self

    def progress(self) -> None:
        """The guarded work finished a step: the stall timer starts again."""
        self._last = self.clock()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.seconds = self.clock() - self._t0
        after = tree_bytes(self.cache_dir)
        if after is not None:
            self.cache_growth_bytes = max(after - (self._cache_before or 0), 0)
        with self._lock:
            noticed = self.noticed
        if noticed:
            grew = self.cache_growth_bytes
            if grew == 0:  # a disk cache that did not grow: slow, but nothing was compiled
                text = (f"first use of {self.label} took {self.seconds:.0f} s; no kernel was "
                        "compiled (the kernel cache did not grow)")
            else:
                cache = f" (kernel cache +{_mb(grew)})" if grew else ""
                text = f"compiled GPU kernels for {self.label} in {self.seconds:.0f} s{cache}"
            self._emit("done", text, grew)

    def _watch(self) -> None:
        next_at = None
        while not self._stop.is_set():
            now = self.clock()
            if next_at is None:
                wait = self._last + self.threshold_s - now
                if wait <= 0:
                    with self._lock:
                        if self._stop.is_set():
                            return
                        self.noticed = True
                    self._emit("started", f"compiling GPU kernels for {self.label}: first use "
                               "on this machine")  # fmt: skip
                    next_at = now + self.interval_s
                    continue
            else:
                wait = next_at - now
                if wait <= 0:
                    grew = self._growth()
                    cache = f", kernel cache +{_mb(grew)}" if grew else ""
                    self._emit("progress", f"still compiling GPU kernels for {self.label}: "
                               f"{now - self._t0:.0f} s{cache}", grew)  # fmt: skip
                    next_at = now + self.interval_s
                    continue
            self._stop.wait(min(max(wait, 0.01), 0.25))

    def _growth(self) -> int | None:
        after = tree_bytes(self.cache_dir)
        return None if after is None else max(after - (self._cache_before or 0), 0)

    def _emit(self, kind: str, text: str, grew: int | None = None) -> None:
        notice = CompileNotice(kind, self.label, self.clock() - self._t0, text, grew)
        if self.on_notice is not None:
            self.on_notice(notice)
        if self.log_notices:
            log.warning(text, extra={"compile_notice": notice})


@contextlib.contextmanager
def notices_to(show: Callable[[CompileNotice], None]) -> Iterator[None]:
    """While the block runs, the watch's notices go to `show` (a CLI prints them on stderr);
    without a handler, logging's last resort would print them plainly."""

    class _Show(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notice = getattr(record, "compile_notice", None)
            if notice is not None:
                show(notice)

    handler = _Show(logging.WARNING)
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)


@dataclass
class WarmupRecord:
    """What the warm-up did, as bench reports and calibration files keep it."""

    ran: bool
    seconds: float = 0.0
    compiled: bool = False  # a compile was seen: the kernel cache grew (CUDA) or a step stalled
    settled: bool | None = None  # two consecutive single-row steps agreed (None: not run)
    cache_growth_bytes: int | None = None  # None: this backend keeps no disk cache
    backend: str = ""
    reason: str | None = None  # why it did not run
    rows: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    settle_s: list[float] = field(default_factory=list)  # the settle check's step timings

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verify_rows(settings: Iterable[Any], extra: int = 0) -> list[int]:
    """1..R: every row count a verification of these settings (or a calibration of `extra`
    rows) can run: the longest proposal plus one."""
    from core.settings import MAX_K

    longest = 0
    for s in settings:
        if s.mode == "speculative":
            longest = max(longest, s.k if s.policy == "fixed" else max(s.k, s.k_max))
    top = max(min(longest, MAX_K) + 1, extra, 1)
    return list(range(1, top + 1))


def sampling_configs(settings: Iterable[Any] = ()) -> list[Any]:
    """One LogitsConfig per kind of logits processing the settings use (greedy, temperature,
    top-p, repetition penalty), plus greedy and a plain sampled one, which any run may use."""
    from core.decode.sampling import LogitsConfig

    out = {LogitsConfig(0.0), LogitsConfig(0.7)}
    for s in settings:
        out.add(LogitsConfig(
            0.0 if s.greedy else 0.7,
            0.9 if s.top_p < 1.0 else 1.0,
            1.1 if s.repetition_penalty != 1.0 else 1.0,
            s.repetition_context,
        ))  # fmt: skip
    return sorted(out, key=lambda c: (c.temperature, c.top_p, c.repetition_penalty))


def warm_up(
    target: Any,
    draft: Any | None = None,
    *,
    vocab: int,
    rows: Sequence[int] = (1,),
    prompt_tokens: int = 0,
    chunk: int | None = None,
    modes: Sequence[str] = ("auto",),
    configs: Sequence[Any] | None = None,
    fused_draft: bool = False,
    label: str = "this model",
    backend: Any | None = None,
    force: bool = False,
    on_notice: Notify | None = None,
    threshold_s: float = THRESHOLD_S,
    settle_tries: int = SETTLE_TRIES,
    settle_tolerance: float = SETTLE_TOLERANCE,
    lockstep: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> WarmupRecord:
    """Run every shape the timed work will use once, on fresh caches, inside a CompileWatch.

    `rows`: the verification row counts; `prompt_tokens`: the prefill's length (the timed
    work's prompt, prefilled in `chunk`s as the engine does; one chunk when not known); `modes`: calibration modes whose dispatch and
    attention overrides the verifications run under. `lockstep` (a sharded target: every rank
    must run the same forwards) runs all `settle_tries` steps instead of stopping when settled.
    `backend` fakes the machine in tests (core.dispatch.backend_info(query=...)).
    """
    from core.decode.cached_model import PREFILL_CHUNK
    from core.dispatch.backend import current_backend

    b = backend or current_backend()
    if b.backend == "cpu" and not force:
        return WarmupRecord(False, backend="cpu",
                            reason="the CPU backend compiles no kernels at first use")  # fmt: skip
    chunk = chunk or PREFILL_CHUNK
    n_prompt = prompt_tokens if prompt_tokens > 0 else chunk
    row_list = sorted({int(r) for r in rows if int(r) >= 1}) or [1]
    record = WarmupRecord(True, backend=b.backend, rows=row_list, prompt_tokens=n_prompt)
    t0 = clock()
    watch = CompileWatch(label, on_notice=on_notice, threshold_s=threshold_s,
                         cache_dir=kernel_cache_dir(b.backend))  # fmt: skip
    with watch:
        cfgs = list(configs) if configs is not None else sampling_configs()
        run = _Shapes(target, draft, vocab, cfgs, b, watch.progress)
        prompt = run.prompt(n_prompt)
        t_cache = run.target(prompt, chunk, row_list, modes)
        if draft is not None:
            run.draft(prompt, chunk, fused_draft)
        record.settle_s, record.settled = _settle(
            t_cache, run, settle_tries, settle_tolerance, lockstep, clock)
    record.seconds = clock() - t0
    record.cache_growth_bytes = watch.cache_growth_bytes
    grew = watch.cache_growth_bytes
    record.compiled = bool(grew) if grew is not None else watch.noticed
    return record


def warm_up_engine(
    engine: Any,
    settings: Sequence[Any] = (),
    *,
    prompt_tokens: int = 0,
    rows: Sequence[int] | None = None,
    modes: Sequence[str] = ("auto",),
    label: str | None = None,
    **kw: Any,
) -> WarmupRecord:
    """`warm_up` for an Engine's pair and the settings its timed work will run (rows 1..the
    longest proposal + 1 unless given; the settings' logits processing; their fused draft)."""
    target = getattr(engine, "target_model", None)
    if target is None:  # a stand-in engine (tests) with no model to warm
        return WarmupRecord(False, reason="the engine exposes no target model")
    models = getattr(engine, "models", None) or {}
    target_id = models.get("target")
    name = label or (getattr(target_id, "spec", None) or "this model")
    fused = any(getattr(s, "fused_draft", False) for s in settings)
    return warm_up(
        target, getattr(engine, "draft_model", None), vocab=engine.vocab_size,
        rows=rows if rows is not None else verify_rows(settings), prompt_tokens=prompt_tokens,
        modes=modes, configs=sampling_configs(settings), fused_draft=fused, label=name,
        lockstep=getattr(engine, "spmd", None) is not None, **kw,
    )  # fmt: skip


# -- In the order of need: the first rounds' shapes now, the rest while the engine is idle ----


PREFILLS = ("prefill", "draft-prefill")


@dataclass(frozen=True)
class WarmSize:
    """One unit of an incremental warm-up: the forward(s) that compile together, and the unit
    between which the idle warmer yields to a turn.

    kind "prefill" / "draft-prefill": the target's / the draft's prefill of `rows` tokens (a
    power of two up to the chunk: the matmul tile classes a prompt's length picks); "verify":
    a verification of `rows` rows under calibration mode `mode` with each config's processing
    and acceptance; "draft": two chained draft steps per config, `compiled` or plain.
    `configs` are core.decode.sampling.LogitsConfig.
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
        rank = {"draft": 0, "verify": 1, "draft-prefill": 2, "prefill": 3}[self.kind]
        cfg = [(c.temperature, c.top_p, c.repetition_penalty) for c in self.configs]
        return (self.rows, rank, self.mode, self.compiled, cfg)

    def describe(self) -> str:
        if self.kind in PREFILLS:
            who = "draft " if self.kind == "draft-prefill" else ""
            return f"{who}prefill of {self.rows} tokens"
        if self.kind == "draft":
            return "compiled draft step" if self.compiled else "draft step"
        mode = "" if self.mode == "auto" else f" ({self.mode})"
        return f"verification of {self.rows} row{'s' if self.rows != 1 else ''}{mode}"


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


def mode_of(settings: Any) -> str:
    """The calibration mode (core.dispatch.calibrate.MODE_SETTINGS) whose overrides a run of
    `settings` verifies under."""
    dispatch = getattr(settings, "dispatch", "auto")
    attention = getattr(settings, "verify_attention", "auto")
    if attention != "auto":
        return attention
    return dispatch if dispatch in ("gemv", "gemm") else "auto"


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
    from core.decode.cached_model import PREFILL_CHUNK

    chunk = chunk or getattr(settings, "prefill_chunk", None) or PREFILL_CHUNK
    cfgs = (_config_of(settings),)
    sizes: list[WarmSize] = []
    mode = settings.mode
    if mode != "draft-only":
        sizes.append(WarmSize("prefill", prefill_bucket(prompt_tokens, chunk)))
        top = starting_k(settings, curve) + 1 if mode == "speculative" and has_draft else 1
        run_mode = mode_of(settings) if mode == "speculative" else "auto"
        sizes += [WarmSize("verify", r, run_mode, cfgs) for r in range(1, top + 1)]
        if run_mode != "auto":  # the decode step and a k = 0 round verify unpatched
            sizes.append(WarmSize("verify", 1, "auto", cfgs))
    if mode != "target-only" and has_draft:
        sizes.append(WarmSize("draft-prefill", prefill_bucket(prompt_tokens, chunk)))
        sizes.append(WarmSize("draft", 1, configs=cfgs,
                              compiled=bool(getattr(settings, "fused_draft", False))))  # fmt: skip
    return sorted(sizes, key=WarmSize.order)


def _config_of(settings: Any) -> Any:
    """The logits processing a run of `settings` uses, as sampling_configs spells it."""
    from core.decode.sampling import LogitsConfig

    s = settings
    return LogitsConfig(0.0 if s.greedy else 0.7, 0.9 if s.top_p < 1.0 else 1.0,
                        1.1 if s.repetition_penalty != 1.0 else 1.0, s.repetition_context)  # fmt: skip


def every_size(
    settings: Sequence[Any],
    *,
    rows: Sequence[int],
    modes: Sequence[str] = ("auto",),
    chunk: int | None = None,
    has_draft: bool = True,
) -> list[WarmSize]:
    """Everything a session of these settings can use (what `warm_up` runs at once), one
    size per row count, mode and draft variant, smallest first."""
    from core.decode.cached_model import PREFILL_CHUNK

    cfgs = tuple(sampling_configs(settings))
    sizes = [WarmSize("verify", int(r), m, cfgs) for m in dict.fromkeys(modes) for r in rows]
    if has_draft:
        sizes.append(WarmSize("draft-prefill", chunk or PREFILL_CHUNK))
        for compiled in dict.fromkeys((False, any(getattr(s, "fused_draft", False)
                                                  for s in settings))):  # fmt: skip
            sizes.append(WarmSize("draft", 1, configs=cfgs, compiled=compiled))
    sizes.append(WarmSize("prefill", chunk or PREFILL_CHUNK))
    return sorted(sizes, key=WarmSize.order)


@dataclass(frozen=True)
class IdleProgress:
    """What the idle warmer just did: `done` of `total` sizes, the last one's description."""

    done: int
    total: int
    last: str
    seconds: float

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def text(self) -> str:
        if self.finished:
            return f"GPU kernels warmed in the background ({self.total} shapes)"
        return f"warming GPU kernels while idle: {self.done}/{self.total} ({self.last})"


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
                 clock: Callable[[], float] = time.perf_counter) -> None:  # fmt: skip
        from core.decode.cached_model import PREFILL_CHUNK
        from core.dispatch.backend import current_backend

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
        self._shapes: _Shapes | None = None
        self._target: Any = None
        self._drafts: dict[bool, Any] = {}

    @property
    def has_draft(self) -> bool:
        return getattr(self.engine, "draft_model", None) is not None

    def pending(self, sizes: Iterable[WarmSize]) -> list[WarmSize]:
        """The sizes with something not yet warmed, smallest first."""
        return sorted((z for z in sizes if not self.done.issuperset(z.parts())),
                      key=WarmSize.order)  # fmt: skip

    def first_round(self, settings: Any, prompt_tokens: int, *,
                    on_notice: Notify | None = None, curve: Any | None = None,
                    threshold_s: float = THRESHOLD_S) -> WarmupRecord:  # fmt: skip
        """Warm what the first rounds of a run of `settings` on a prompt of `prompt_tokens`
        use (first_round_sizes), with the compile notices of `warm_up`."""
        if curve is None:
            curve = getattr(self.engine, "cost_curve", None)
        sizes = first_round_sizes(settings, prompt_tokens, curve=curve, chunk=self.chunk,
                                  has_draft=self.has_draft)  # fmt: skip
        return self.run(sizes, on_notice=on_notice, threshold_s=threshold_s,
                        prompt_tokens=prompt_tokens)  # fmt: skip

    def run(self, sizes: Sequence[WarmSize], *, on_notice: Notify | None = None,
            threshold_s: float = THRESHOLD_S, prompt_tokens: int = 0) -> WarmupRecord:  # fmt: skip
        """The pending ones of `sizes`, inside one CompileWatch (silent unless one stalls)."""
        if not self.enabled:
            return WarmupRecord(False, backend=self.backend.backend,
                                reason="the CPU backend compiles no kernels at first use")  # fmt: skip
        # As a run uses them: the prefills first (they give the rest its context).
        todo = sorted(self.pending(sizes), key=lambda z: (z.kind not in PREFILLS, z.order()))
        record = WarmupRecord(True, backend=self.backend.backend, prompt_tokens=prompt_tokens,
                              rows=sorted({z.rows for z in todo if z.kind == "verify"}))  # fmt: skip
        t0 = self.clock()
        watch = CompileWatch(self.label, on_notice=on_notice, threshold_s=threshold_s,
                             cache_dir=kernel_cache_dir(self.backend.backend))  # fmt: skip
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
        return IdleProgress(done, self.idle_total, size.describe(), self.clock() - t0)

    def _run(self, size: WarmSize, progress: Callable[[], None]) -> None:
        shapes = self._shapes_for(progress)
        todo = [p for p in size.parts() if p not in self.done]
        if size.kind == "prefill":
            # A new context of this length: the verifications after it run on top of it.
            self._target = shapes.target_cache(shapes.prompt(size.rows), self.chunk)
        elif size.kind == "draft-prefill":
            self._drafts = {False: shapes.draft_cache(shapes.prompt(size.rows), self.chunk)}
        elif size.kind == "verify":
            if self._target is None:
                self._target = shapes.target_cache(shapes.prompt(1), self.chunk)
            configs = [p[-1] for p in todo]
            shapes.verify(self._target, size.rows, size.mode, configs)
        else:
            d = self._drafts.get(size.compiled)
            if d is None:  # a context of one token (a prefilled cache: the fused step needs one)
                d = self._drafts[size.compiled] = shapes.draft_cache(shapes.prompt(1), self.chunk)
            shapes.draft_steps(d, [p[-1] for p in todo], size.compiled)
        self.done.update(todo)
        self.ran.append(size)

    def _shapes_for(self, progress: Callable[[], None]) -> _Shapes:
        if self._shapes is None:
            e = self.engine
            self._shapes = _Shapes(e.target_model, getattr(e, "draft_model", None),
                                   e.vocab_size, [], self.backend, progress)  # fmt: skip
        self._shapes.progress = progress
        return self._shapes

    def _release(self) -> None:
        """Nothing left to warm: the warmer's own caches go (their memory is the engine's)."""
        self._target = None
        self._drafts.clear()


class _Shapes:
    """The forwards of a warm-up, built from the engine's own pieces so the kernels match."""

    def __init__(self, target: Any, draft: Any, vocab: int, configs: list[Any], backend: Any,
                 progress: Callable[[], None]) -> None:  # fmt: skip
        import numpy as np

        self.target_model, self.draft_model, self.vocab = target, draft, vocab
        self.configs, self.backend, self.progress = configs, backend, progress
        self.rng = np.random.default_rng(0)

    def prompt(self, n: int) -> list[int]:
        return [int(x) for x in self.rng.integers(0, self.vocab, n)]

    def _tokens(self, n: int) -> Any:
        import mlx.core as mx

        return mx.array(self.rng.integers(0, self.vocab, n), dtype=mx.int32)

    def _process(self, logits: Any, drafts: Any, hist: Any, configs: Sequence[Any]) -> list[Any]:
        """Every sampling config's processing and acceptance of `logits` [R, V] (lazy)."""
        import mlx.core as mx

        from core.decode.sampling import (
            accept_greedy,
            accept_sampled,
            one_hot,
            penalize,
            sample,
            to_probs,
        )

        out = []
        k = drafts.shape[0]
        key = mx.random.key(0)
        for cfg in configs:
            lg = penalize(logits, mx.concatenate([hist, drafts]), cfg)
            if cfg.greedy:
                v = accept_greedy(mx.argmax(lg, axis=-1), drafts)
                out += [v.n_accepted, v.next_token]
                continue
            p = to_probs(lg, cfg)
            out.append(sample(p[-1:], key))
            if k:
                q = one_hot(drafts, self.vocab)
                for rule in ("lossless", "mentored"):
                    v = accept_sampled(p, q, drafts, rule, 0.5, key)
                    out += [v.n_accepted, v.next_token, v.tv_sum]
        return out

    def target(self, prompt: list[int], chunk: int, rows: list[int], modes: Sequence[str]) -> Any:
        """Prefill, then each row count under each mode; returns the cache (trimmed back)."""
        t = self.target_cache(prompt, chunk)
        for mode in dict.fromkeys(modes):
            for r in rows:
                self.verify(t, r, mode, self.configs)
        return t

    def target_cache(self, prompt: list[int], chunk: int) -> Any:
        """A fresh target cache holding `prompt` (prefilled in `chunk`s, as the engine does)."""
        from core.decode.cached_model import CachedModel

        t = CachedModel.fresh(self.target_model)
        t.prefill(prompt, chunk)
        self.progress()
        return t

    def verify(self, t: Any, r: int, mode: str, configs: Sequence[Any]) -> None:
        """One verification of `r` rows under `mode`, with each config's processing and
        acceptance, on top of `t`'s context, then taken back."""
        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache

        from core.dispatch.calibrate import MODE_SETTINGS
        from core.dispatch.patches import verification_patches

        dispatch, attention = MODE_SETTINGS[mode]
        hist = mx.array(self.prompt(20), dtype=mx.int32)
        toks = self._tokens(r)
        with verification_patches(t.model, dispatch, attention, r, backend=self.backend):
            logits = t.forward(toks, self.vocab)
        mx.eval(logits, *self._process(logits, toks[1:], hist, configs))
        trim_prompt_cache(t.cache, r)
        self.progress()

    def step(self, t: Any) -> None:
        """One single-row target step, evaluated, then taken back."""
        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache

        mx.eval(t.forward(self._tokens(1), self.vocab))
        trim_prompt_cache(t.cache, 1)

    def draft(self, prompt: list[int], chunk: int, fused: bool) -> None:
        """The draft's prefill and its chained decode steps, greedy and sampled, plain and
        (when asked) compiled, as core.drafting.model runs them."""
        for compiled in dict.fromkeys((False, fused)):
            d = self.draft_cache(prompt, chunk)
            self.draft_steps(d, self.configs, compiled)
            del d

    def draft_cache(self, prompt: list[int], chunk: int) -> Any:
        """A fresh draft cache holding `prompt` (its ids folded into the draft's vocabulary)."""
        from core.decode.cached_model import CachedModel

        d = CachedModel.fresh(self.draft_model)
        d.prefill([x % self.draft_vocab() for x in prompt], chunk)
        self.progress()
        return d

    def draft_vocab(self) -> int:
        from core.decode.introspect import vocab_size

        return min(self.vocab, vocab_size(self.draft_model) or self.vocab)

    def draft_steps(self, d: Any, configs: Sequence[Any], compiled: bool) -> None:
        """Two chained draft decode steps per config on top of `d`, then taken back."""
        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache

        from core.decode.sampling import sample, to_probs

        dvocab = self.draft_vocab()
        for cfg in configs:
            x = mx.array([int(self.rng.integers(0, dvocab))], dtype=mx.int32)
            outs = []
            for _ in range(2):
                logits = d.decode(x, self.vocab, compiled)
                x = (mx.argmax(logits, axis=-1) if cfg.greedy
                     else sample(to_probs(logits, cfg), mx.random.key(1)))  # fmt: skip
                mx.async_eval(x)
                outs.append(x)
            mx.eval(*outs)
            trim_prompt_cache(d.cache, 2)
            self.progress()


def _settle(t: Any, run: _Shapes, tries: int, tolerance: float, lockstep: bool,
            clock: Callable[[], float]) -> tuple[list[float], bool]:  # fmt: skip
    """Single-row target steps until two consecutive timings agree within `tolerance` (all
    `tries` under lockstep); the timings, and whether two did agree."""
    times: list[float] = []
    settled = False
    for _ in range(max(tries, 2)):
        t0 = clock()
        run.step(t)
        times.append(clock() - t0)
        run.progress()
        if len(times) >= 2:
            a, b = times[-2], times[-1]
            if abs(a - b) <= tolerance * max(a, b, 1e-12):
                settled = True
                if not lockstep:
                    break
    return times, settled
