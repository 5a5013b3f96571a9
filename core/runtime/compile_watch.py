"""Compiles seen: a watch that says when a model's first use stalls on GPU kernel compilation.

Why: on a fresh CUDA machine MLX compiles its kernels (NVRTC) at their first use and caches
them on disk (`MLX_PTX_CACHE_DIR`, else <tmp>/mlx/<version>/ptx); on Metal it compiles at first
use in every process, with no disk cache. A first chat then waited a minute with no sign. So
`CompileWatch` wraps first uses (core/runtime/warmup.py, core/runtime/warmer.py): a daemon
timer thread that, when the guarded work made no progress for `threshold_s` (under a second),
says "compiling GPU kernels for <model>: first use on this machine", then the elapsed time
every `interval_s`, then "compiled in N s" with the kernel cache's growth where there is a
disk cache. Fast work says nothing. Notices go to `on_notice` and to the `core.runtime.warmup`
logger as WARNINGs carrying the notice (`record.compile_notice`): the app's bridge forwards
them, the CLIs print them (`notices_to`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The logger the CLIs, the app's bridge and the tests know the notices by (the warm-up's name,
# kept when the watch moved into its own module).
log = logging.getLogger("core.runtime.warmup")

THRESHOLD_S = 0.75  # no progress for this long: a compile is under way (said within a second)
INTERVAL_S = 5.0  # then the elapsed time this often
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
                               "on this machine")
                    next_at = now + self.interval_s
                    continue
            else:
                wait = next_at - now
                if wait <= 0:
                    grew = self._growth()
                    cache = f", kernel cache +{_mb(grew)}" if grew else ""
                    self._emit("progress", f"still compiling GPU kernels for {self.label}: "
                               f"{now - self._t0:.0f} s{cache}", grew)
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
