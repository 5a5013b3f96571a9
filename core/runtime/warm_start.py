"""A narrow first start: on a GPU whose matrix kernels are not compiled yet, keep every
forward below the rows where a quantized matmul becomes a JIT-compiled GEMM.

Why (docs/benchmarks/data/h200-2026-12-01-first-probe/FINDINGS.md): on a fresh H200, MLX's CUDA
backend compiles each quantized-GEMM kernel (qmm, one per tile class and bits/group, ~3 MB
of PTX) with NVRTC at its first use, about 30 s each; the default model's 16-token prefill
alone compiled three of them (87 s) before its first token. Below 8 rows the same matmuls
run MLX's quantized GEMV (qmv), which ships precompiled: a 1..7-row forward compiled nothing
but a few small elementwise kernels (7 s). Dequantizing the target to dense weights (cuBLAS,
no JIT) did not help: its 4-bit self-draft compiled the same GEMM (48 s).

So, on a backend that compiles its matrix kernels at first use, whose kernel cache holds none
for the pair's quantization yet: the prompt is prefilled in chunks of at most `rows`, the
draft proposes at most `rows - 1` tokens (a verification is k + 1 rows), and a calibration
measures at most `rows` rows. The weights, the rules and the text are unchanged; only the
chunking and the largest k are. Benchmarks never start narrow: they warm every size before
anything is timed. Metal compiles its kernels in every process in milliseconds, and the CPU
compiles none, so neither ever starts narrow.

The rule reads facts only (the backend, the dispatch rules of core/dispatch/kernels.py, the
kernel cache's file names), each injectable, so tests give a fake machine and real models.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Backends whose matrix kernels MLX compiles at first use and keeps on disk (NVRTC into
# $MLX_PTX_CACHE_DIR): a cold cache pays ~30 s a kernel.
JIT_MATRIX_BACKENDS = ("cuda",)
# MLX 0.32.4 names its quantized GEMM kernels qmm_<variant>_..._b<bits>_g<group>_<mode>.ptx
# (qmm_sm80_tn_bfloat16_m16_b4_g32_affine.ptx). Were the names to change, no file would
# match and every start would be narrow: slower long prefills, never a compile stall.
KERNEL_PREFIX = "qmm_"


@dataclass(frozen=True)
class NarrowStart:
    """Why and how far a start is narrowed: forwards of at most `rows` rows."""

    rows: int
    quantization: tuple[tuple[int, int], ...]  # the (bits, group size) kernels it waits for

    @property
    def k_max(self) -> int:
        return self.rows - 1  # rows >= 2: narrow_start starts no narrower

    def text(self) -> str:
        q = ", ".join(f"{b}-bit g{g}" for b, g in self.quantization)
        return (f"first use of this GPU's matrix kernels ({q}): forwards kept to {self.rows} "
                f"rows (prefill chunks of {self.rows}, k at most {self.k_max}), which run "
                "precompiled kernels; larger ones compile at ~30 s each, once for later "
                "starts with `specdec-tui calibrate`")

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "k_max": self.k_max,
                "quantization": [list(q) for q in self.quantization]}


def quantized_shapes(models: Iterable[Any], backend: Any) -> list[Any]:
    """The quantized linear shapes of the models (core.dispatch.kernels.linear_shapes)."""
    from core.dispatch.kernels import KernelPredictor

    out = []
    for m in models:
        if m is not None:
            out += [s for s in KernelPredictor(m, backend).shapes if s.quantized]
    return out


def jit_free_rows(shapes: Iterable[Any], backend: Any) -> int | None:
    """The most rows every shape runs without a matrix kernel (None: some never switch)."""
    from core.dispatch.kernels import shape_boundary

    bounds = [b for s in shapes if (b := shape_boundary(s, backend)) is not None]
    return min(bounds) - 1 if bounds else None


def cached_kinds(cache_dir: Path | None) -> set[tuple[int, int]]:
    """(bits, group size) of the quantized-GEMM kernels in MLX's kernel cache folder."""
    import re

    found: set[tuple[int, int]] = set()
    if cache_dir is None or not cache_dir.is_dir():
        return found
    pattern = re.compile(r"_b(\d+)_g(\d+)_")
    for p in cache_dir.rglob(f"{KERNEL_PREFIX}*"):
        m = pattern.search(p.name)
        if m:
            found.add((int(m[1]), int(m[2])))
    return found


def narrow_start(models: Iterable[Any], *, backend: Any = None,
                 cache_dir: Path | None | str = "auto") -> NarrowStart | None:
    """The narrow start the models need on this machine, or None (a full start).

    None on a backend that compiles no matrix kernel at first use, for models with no
    quantized matrix, where a shape takes a GEMM from 2 rows (Hopper's qmm_sm90, for a group
    as large as the row: a verification cannot stay below it), and when the kernel cache
    already holds a GEMM kernel for every (bits, group size) the models use. `backend` (core.dispatch.backend.BackendInfo) and
    `cache_dir` (MLX's kernel cache; "auto": core.runtime.compile_watch.kernel_cache_dir)
    fake the machine in tests."""
    from core.dispatch.backend import current_backend

    b = backend or current_backend()
    if b.backend not in JIT_MATRIX_BACKENDS:
        return None
    shapes = quantized_shapes(models, b)
    rows = jit_free_rows(shapes, b)
    if rows is None or rows < 2:  # a verification is 2 rows or more: nothing to keep below
        return None
    kinds = tuple(sorted({(int(s.bits), int(s.group_size)) for s in shapes}))
    if cache_dir == "auto":
        from core.runtime.compile_watch import kernel_cache_dir

        cache_dir = kernel_cache_dir(b.backend)
    if set(kinds) <= cached_kinds(Path(cache_dir) if cache_dir else None):
        return None
    return NarrowStart(rows, kinds)


def narrowed(settings: Any, narrow: NarrowStart | None) -> Any:
    """`settings` with the narrow start's limits (unchanged when `narrow` is None): prefill
    chunks of at most `rows`, k, k_min and k_max at most `rows - 1`. A forced GEMM
    (`dispatch = gemm | fastest`) is an experiment and still compiles what it forces."""
    if narrow is None:
        return settings
    k_max = min(settings.k_max, narrow.k_max)
    return settings.replace(prefill_chunk=min(settings.prefill_chunk, narrow.rows),
                            k_max=k_max, k=min(settings.k, k_max),
                            k_min=min(settings.k_min, k_max))


class NarrowGate:
    """The app's narrow start: while its idle warm-up (core.runtime.warmer.Warmer) still has
    sizes to compile, every turn and calibration runs narrowed; once every size is warm (the
    GEMM kernels compiled, on the idle engine thread) it lifts, and a curve measured narrow,
    too short for the full settings, is dropped so the next cost-aware turn measures again.

    `narrow` None (Metal, the CPU, a warm kernel cache) makes every method the identity."""

    def __init__(self, narrow: NarrowStart | None, warmer: Any) -> None:
        self.narrow = narrow
        self.warmer = warmer
        self.said = False

    @property
    def active(self) -> NarrowStart | None:
        if self.narrow is not None and not getattr(self.warmer, "idle_pending", False):
            self.narrow = None  # every size warmed: the kernels are compiled now
        return self.narrow

    @property
    def rows(self) -> int | None:
        n = self.active
        return n.rows if n is not None else None

    def settings(self, settings: Any) -> Any:
        return narrowed(settings, self.active)

    def source(self, source: Any) -> Any:
        """A settings source (read once per round) whose settings come narrowed; its
        `taken(settings)` (tui.settings_watch.SettingsWatch) records what ran."""
        return _NarrowedSource(source, self) if self.active is not None else source

    def announce(self) -> str | None:
        """The narrow start's sentence, the first time it applies (None after, or when full)."""
        n = self.active
        if n is None or self.said:
            return None
        self.said = True
        return n.text() + "; the app compiles them while idle, then starts full"

    def drop_short_curve(self, engine: Any, settings: Any) -> None:
        """Once lifted, forget a kept or measured curve that does not cover `settings`."""
        if self.active is not None:
            return
        curve = getattr(engine, "cost_curve", None)
        if curve is None:
            return
        from core.dispatch.curve_cache import covers

        if not covers(curve, settings):
            engine.set_cost_curve(None)


class _NarrowedSource:
    def __init__(self, source: Any, gate: NarrowGate) -> None:
        self._source, self._gate = source, gate

    def __call__(self) -> Any:
        return self._gate.settings(self._source())

    def taken(self, settings: Any) -> None:
        taken = getattr(self._source, "taken", None)
        if taken is not None:
            taken(settings)
