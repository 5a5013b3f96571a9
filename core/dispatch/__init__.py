"""Kernel dispatch: which matmul kernel a verification of R rows runs here, and what it costs.

MLX picks a matmul kernel from the row count M of each linear layer's input (for a
verification of k drafts plus the bonus position, M = k + 1): a vector kernel below a
per-shape limit, a matrix kernel from it. No Python API names the kernel that ran, so this
module *predicts* it from MLX's own dispatch rules (read from its source, docs/dispatch.md)
and *measures* the cost of a target forward against rows (`calibrate`), so proposal length
and kernel choice can be told apart. `verification_patches` forces a kernel family
(`dispatch = gemv | gemm`) or a plain attention for the verification pass, so their effect can
be measured without changing the output distribution.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import functools
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from core.dispatch.backend import (  # noqa: F401  (re-exported: the dispatch API)
    BACKENDS,
    METAL_ARCH_ENV,
    METAL_GENERATIONS,
    METAL_SIZE_CLASSES,
    BackendInfo,
    backend_info,
    current_backend,
    mlx_device_query,
)
from core.errors import UserError
from core.settings import DISPATCH, VERIFY_ATTENTION, SettingsError

ROLES = ("attention", "mlp", "lm_head", "other")
# Calibration modes: "auto" is what the engine does with default settings; "gemv"/"gemm"
# force the linear layers' kernel family; "fused"/"plain" force the verification attention.
CALIBRATION_MODES = ("auto", "gemv", "gemm", "fused", "plain")
MODE_SETTINGS = {
    "auto": ("auto", "auto"),
    "gemv": ("gemv", "auto"),
    "gemm": ("gemm", "auto"),
    "fused": ("auto", "fused"),
    "plain": ("auto", "plain"),
}
# A measured boundary is the first R whose verification costs this fraction less than the
# previous measured R: a 10% drop is far above run-to-run noise of a median, and far below
# the ~2x drop at a real dispatch boundary (H200: 33.0 ms at 7 rows, 16.3 ms at 8).
BOUNDARY_DROP = 0.10
# Row counts searched for a shape's first matrix-path R (Metal's largest limit is 33).
MAX_SEARCH_ROWS = 128

# Kernel families that are a matrix (GEMM) path; everything else is a vector path or the CPU.
MATRIX_KERNELS = frozenset(
    {
        "qmm_t", "qmm_t_splitk", "qmm_t_nax", "qmm_sm80", "qmm_sm90", "qmm_naive",
        "steel_gemm", "steel_gemm_splitk", "steel_gemm_nax", "steel_gemm_splitk_nax", "cublasLt",
    }
)  # fmt: skip


class CalibrationError(UserError, ValueError):
    """A calibration request or a stored curve a user gave that cannot be used (one sentence)."""


# --- the backend ---------------------------------------------------------------------------------

# --- the linear layers of a model ------------------------------------------------------------------


@dataclass(frozen=True)
class LinearShape:
    """One distinct linear-layer shape of a model and how many layers share it."""

    role: str  # "attention" | "mlp" | "lm_head" | "other"
    k: int  # input features (the reduction dimension)
    n: int  # output features
    bits: int | None = None  # None for dense
    group_size: int | None = None
    quantized: bool = False
    dtype: str = "bfloat16"  # activation dtype (scales' dtype for quantized layers)
    bias: bool = False  # a Linear bias (routes dense CUDA matmuls to cuBLASLt even at M = 1)
    mode: str = "affine"  # quantization mode
    count: int = 1
    names: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The layer names sharing the shape, e.g. "q_proj/o_proj"."""
        return "/".join(self.names) or self.role

    @property
    def weight_elements(self) -> int:
        return self.k * self.n * self.count

    def key(self) -> tuple[Any, ...]:
        return (self.role, self.k, self.n, self.bits, self.group_size, self.quantized,
                self.dtype, self.bias, self.mode)  # fmt: skip


_ATTN_PARENTS = ("attn", "attention")
_MLP_PARENTS = ("mlp", "feed_forward", "ffn", "moe", "experts")
_ATTN_NAMES = frozenset(
    {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "wq", "wk", "wv", "wo", "query",
     "key", "value", "c_attn", "out_proj", "query_key_value"}
)  # fmt: skip
_MLP_NAMES = frozenset(
    {"gate_proj", "up_proj", "down_proj", "gate_up_proj", "w1", "w2", "w3", "fc1", "fc2", "c_fc"}
)


def layer_role(path: str) -> str:
    """attention / mlp / lm_head / other, from a module path like "model.layers.3.mlp.up_proj"."""
    parts = path.split(".")
    last = parts[-1]
    if last == "lm_head":
        return "lm_head"
    parents = [p.lower() for p in parts[:-1]]
    if any(w in p for p in parents for w in _ATTN_PARENTS):
        return "attention"
    if any(w in p for p in parents for w in _MLP_PARENTS):
        return "mlp"
    if last in _ATTN_NAMES:
        return "attention"
    if last in _MLP_NAMES:
        return "mlp"
    return "other"


def _dtype_name(d: mx.Dtype) -> str:
    return str(d).rsplit(".", 1)[-1]


def _shape_of(module: nn.Module, role: str, name: str) -> LinearShape | None:
    """The shape a Linear / QuantizedLinear (or an embedding used as the head) presents."""
    if isinstance(module, nn.QuantizedLinear | nn.QuantizedEmbedding):
        bits = int(module.bits)
        n, packed = module.weight.shape
        return LinearShape(role, packed * 32 // bits, n, bits, int(module.group_size), True,
                           _dtype_name(module.scales.dtype), "bias" in module,
                           str(getattr(module, "mode", "affine")), 1, (name,))  # fmt: skip
    if isinstance(module, nn.Linear | nn.Embedding):
        n, k = module.weight.shape
        return LinearShape(role, k, n, None, None, False, _dtype_name(module.weight.dtype),
                           "bias" in module, "affine", 1, (name,))  # fmt: skip
    return None


def _tied_head(model: nn.Module, paths: Iterable[str]) -> tuple[str, nn.Module] | None:
    """The embedding a tied-embedding model multiplies by (model.model.embed_tokens.as_linear)."""
    if any(p.split(".")[-1] == "lm_head" for p in paths):
        return None
    args = getattr(model, "args", None)
    if getattr(args, "tie_word_embeddings", True) is False:
        return None
    inner = getattr(model, "model", None)
    embed = getattr(inner, "embed_tokens", None) if inner is not None else None
    if embed is not None and hasattr(embed, "as_linear"):
        return "model.embed_tokens", embed
    return None


def _linear_modules(model: nn.Module) -> list[tuple[str, nn.Module, str, LinearShape]]:
    """(path, module, how it is called ("__call__" | "as_linear"), its one-layer shape)."""
    out = []
    named = list(model.named_modules())
    for path, m in named:
        if isinstance(m, nn.QuantizedLinear | nn.Linear):
            role = layer_role(path)
            shape = _shape_of(m, role, path.split(".")[-1])
            if shape is not None:
                out.append((path, m, "__call__", shape))
    tied = _tied_head(model, (p for p, _ in named))
    if tied is not None:
        shape = _shape_of(tied[1], "lm_head", "embed_tokens.as_linear")
        if shape is not None:
            out.append((tied[0], tied[1], "as_linear", shape))
    return out


def linear_shapes(model: nn.Module) -> list[LinearShape]:
    """The distinct linear shapes of a model with their layer counts, in first-seen order."""
    merged: dict[tuple[Any, ...], LinearShape] = {}
    for _, _, _, s in _linear_modules(model):
        key = s.key()
        if key in merged:
            old = merged[key]
            names = old.names if s.names[0] in old.names else (*old.names, *s.names)
            merged[key] = _replace(old, count=old.count + 1, names=names)
        else:
            merged[key] = s
    return list(merged.values())


def _replace(shape: LinearShape, **kw: Any) -> LinearShape:
    import dataclasses

    return dataclasses.replace(shape, **kw)


# --- the dispatch rules ----------------------------------------------------------------------------


def qmv_batch_limit(k: int, n: int, backend: BackendInfo) -> int:
    """Metal get_qmv_batch_limit(K, N): from this many rows a quantized matmul is a GEMM."""
    gen = backend.metal_generation or 0
    size = backend.metal_size or ""
    small = k <= 2048 and n <= 2048
    medium = k <= 4096 and n <= 4096
    if gen >= 17 and size != "d":
        table = (33, 25, 13)
    elif gen >= 15 and size != "d":
        table = (13, 15, 13)
    elif size == "d":
        table = (32, 18, 12)
    elif gen >= 13:
        table = (14, 10, 6)
    else:
        table = (18, 12, 10)
    return table[0] if small else table[1] if medium else table[2]


def _pack_factor(bits: int) -> int:
    return 8 if bits in (3, 5) else 4 if bits == 6 else 32 // bits


def qmv_fast_k_alignment(bits: int) -> int:
    """K step of Metal's qmv_fast (0.32.4: one pack per thread for 1- and 2-bit weights)."""
    return _pack_factor(bits) * (1 if bits <= 2 else 2) * 32


def metal_split_k(rows: int, n: int, k: int, group_size: int) -> int:
    """Metal qmm_splitk's partition count (1 means it falls back to qmm)."""
    tiles = math.ceil(n / 32) * math.ceil(rows / 32)
    split = max(1, 512 // tiles)
    k_align = max(group_size, 32)
    split = min(split, k // k_align)
    while split > 1 and k % (split * k_align) != 0:
        split -= 1
    return max(split, 1)


def _metal_quantized(s: LinearShape, rows: int, b: BackendInfo) -> str:
    bits, gs = s.bits or 4, s.group_size or 64
    if rows >= qmv_batch_limit(s.k, s.n, b):
        if metal_split_k(rows, s.n, s.k, gs) > 1:
            return "qmm_t_splitk"
        if b.nax_available and s.k % 64 == 0 and s.dtype != "float32":
            return "qmm_t_nax"
        return "qmm_t"
    if s.k in (64, 128) and bits & (bits - 1) == 0:
        return "qmv_quad"
    if rows >= 2 and (s.mode != "affine" or (b.metal_generation or 0) >= 15):
        return "qmv_wide"
    if s.n % 8 == 0 and s.k % qmv_fast_k_alignment(bits) == 0:
        return "qmv_fast"
    return "qmv"


def _metal_dense(s: LinearShape, rows: int, b: BackendInfo) -> str:
    gen = b.metal_generation or 0
    if rows == 1:
        return "gemv"
    if gen >= 15 and s.dtype in ("float16", "bfloat16") and s.k % 4 == 0 and rows <= 15:
        return "gemv_wide"
    nax = b.nax_available and s.dtype != "float32"
    m, n, k = rows, s.n, s.k
    if nax:
        if k >= 3 * max(m, n) or (max(m, n) <= 1024 and k > 2 * max(m, n)):
            return "steel_gemm_splitk_nax"
        return "steel_gemm_nax"
    threshold = 2048 if b.metal_size in ("s", "d") else 1024
    if math.ceil(m / 16) * math.ceil(n / 16) <= threshold and k // 16 >= 8 and k >= max(m, n):
        return "steel_gemm_splitk"
    return "steel_gemm"


def _cuda_quantized(s: LinearShape, rows: int, b: BackendInfo) -> str:
    major = (b.cuda_capability or (0, 0))[0]
    bits, gs, k, n = s.bits or 4, s.group_size or 64, s.k, s.n
    affine = s.mode == "affine"
    qmv_ok = k % 8 == 0
    fp_qmv = major > 9 and rows <= 8 and not affine
    vector = "fp_qmv" if fp_qmv else "qmv"
    qmv_ok = qmv_ok or fp_qmv
    sm90 = (major == 9 and n % 4 == 0 and k % 64 == 0 and affine and bits in (4, 8)
            and gs >= k)  # fmt: skip
    if sm90:
        return vector if qmv_ok and rows == 1 and n <= 16384 and k <= 16384 else "qmm_sm90"
    sm80 = (major >= 8 and n % 128 == 0 and k % max(64, gs) == 0
            and s.dtype in ("float16", "bfloat16") and bits in (4, 8))  # fmt: skip
    if sm80:
        return vector if qmv_ok and rows < 8 else "qmm_sm80"
    if k % max(64, gs) == 0:
        return vector if qmv_ok and rows < 8 else "qmm_naive"
    return vector if qmv_ok else "unsupported"


def predict_kernel(shape: LinearShape, rows: int, backend: BackendInfo) -> str:
    """The kernel family MLX dispatches a [rows, K] x [K, N] linear layer to (docs/dispatch.md)."""
    if rows < 1:
        raise ValueError(f"rows must be at least 1, got {rows}")
    if backend.backend == "metal":
        return (
            _metal_quantized(shape, rows, backend)
            if shape.quantized
            else _metal_dense(shape, rows, backend)
        )
    if backend.backend == "cuda":
        if shape.quantized:
            return _cuda_quantized(shape, rows, backend)
        return "gemv" if rows == 1 and not shape.bias else "cublasLt"
    # CPU: one loop over rows, no decision by M (scalar _qmm_t / the bundled BLAS).
    return "cpu_qmm_t" if shape.quantized else "cpu_gemm"


def is_matrix_kernel(kernel: str) -> bool:
    return kernel in MATRIX_KERNELS


@functools.lru_cache(maxsize=4096)
def shape_boundary(shape: LinearShape, backend: BackendInfo) -> int | None:
    """The smallest R at which this shape takes the matrix path (None: it never does)."""
    for rows in range(1, MAX_SEARCH_ROWS + 1):
        if is_matrix_kernel(predict_kernel(shape, rows, backend)):
            return rows
    return None


@dataclass(frozen=True)
class ShapePrediction:
    """The kernel one distinct shape dispatches to for `rows` rows."""

    role: str
    name: str
    k: int
    n: int
    bits: int | None
    group_size: int | None
    quantized: bool
    count: int
    rows: int
    kernel: str
    matrix: bool


class KernelPredictor:
    """Predicts, per row count, the kernels of a target's linear layers on one backend.

    Built once per target; `family(rows)` is called by the engine every round and costs a
    dict lookup after the first call for a row count.
    """

    def __init__(
        self,
        model: nn.Module | Sequence[LinearShape],
        backend: BackendInfo | None = None,
    ) -> None:
        self.backend = backend or current_backend()
        if isinstance(model, list | tuple):
            self.shapes: tuple[LinearShape, ...] = tuple(model)
        else:
            self.shapes = tuple(linear_shapes(model))
        self._per_shape: dict[int, tuple[ShapePrediction, ...]] = {}
        self._family: dict[int, str] = {}
        self._roles: dict[int, dict[str, str]] = {}

    def per_shape(self, rows: int) -> list[ShapePrediction]:
        """One prediction per distinct shape (attention, MLP, head...) for `rows` rows."""
        cached = self._per_shape.get(rows)
        if cached is None:
            out = []
            for s in self.shapes:
                kern = predict_kernel(s, rows, self.backend)
                out.append(ShapePrediction(s.role, s.name, s.k, s.n, s.bits, s.group_size,
                                           s.quantized, s.count, rows, kern,
                                           is_matrix_kernel(kern)))  # fmt: skip
            cached = self._per_shape[rows] = tuple(out)
        return list(cached)

    def role_kernels(self, rows: int) -> dict[str, str]:
        """Per role, the kernel that carries most of its weights (K x N x layers)."""
        cached = self._roles.get(rows)
        if cached is None:
            weight: dict[str, dict[str, int]] = {}
            for s, p in zip(self.shapes, self.per_shape(rows), strict=True):
                per = weight.setdefault(s.role, {})
                per[p.kernel] = per.get(p.kernel, 0) + s.weight_elements
            cached = {role: max(ks, key=lambda kern: ks[kern]) for role, ks in weight.items()}
            self._roles[rows] = cached
        return dict(cached)

    def family(self, rows: int) -> str:
        """Short summary for a RoundEvent: the attention projections' kernel, and
        "attn:X mlp:Y" when the MLP dispatches differently (Metal switches them at different R)."""
        cached = self._family.get(rows)
        if cached is not None:
            return cached
        if rows < 1:
            return ""
        roles = self.role_kernels(rows)
        attn, mlp = roles.get("attention"), roles.get("mlp")
        if attn and mlp and attn != mlp:
            fam = f"attn:{attn} mlp:{mlp}"
        else:
            fam = attn or mlp or next(iter(roles.values()), "")
        self._family[rows] = fam
        return fam

    def boundary(self) -> dict[str, int | None]:
        """Per role, the smallest R at which any of its shapes switches to the matrix path."""
        out: dict[str, int | None] = {}
        for s in self.shapes:
            b = shape_boundary(s, self.backend)
            old = out.get(s.role)
            out[s.role] = b if old is None else (old if b is None else min(old, b))
        return out

    def forward_boundary(self) -> int | None:
        """The R where the whole forward's cost per row should drop: the smallest R at which
        shapes holding most of the weights (K x N x layers, the head included) run a GEMM."""
        total = sum(s.weight_elements for s in self.shapes)
        if not total:
            return None
        bounds = sorted({b for s in self.shapes if (b := shape_boundary(s, self.backend))})
        for r in bounds:
            on = sum(
                s.weight_elements
                for s in self.shapes
                if (b := shape_boundary(s, self.backend)) is not None and b <= r
            )
            if 2 * on > total:
                return r
        return None


# --- the measured curve ----------------------------------------------------------------------------


@dataclass
class VerifyCostCurve:
    """Seconds of one target forward over R rows (median, KV length advancing), per mode.

    The cost-aware policy reads `t_verify(rows)` and `draft_step_s`; the Kernels panel and
    `specdec-tui calibrate` show the curve, its boundary and the predicted kernels.
    """

    backend: str
    device_name: str
    context_len: int
    times: dict[str, dict[int, float]]  # mode -> {rows: median seconds}
    draft_step_s: float | None = None  # one draft single-token step (None: no draft measured)
    kernels: dict[int, str] = field(default_factory=dict)  # rows -> predicted family
    role_kernels: dict[int, dict[str, str]] = field(default_factory=dict)
    predicted_boundary: int | None = None  # KernelPredictor.forward_boundary()
    created: float = field(default_factory=time.time)
    architecture: str = ""
    repeats: int = 0
    context_end: int = 0  # KV length after the last timed call
    calls: int = 0  # target forwards run (each advanced the KV length by one)

    @property
    def modes(self) -> list[str]:
        return list(self.times)

    @property
    def rows(self) -> list[int]:
        """Row counts measured for the default mode."""
        return sorted(self._table(self._mode(None)))

    def _mode(self, mode: str | None) -> str:
        if mode is None or (mode == "auto" and "auto" not in self.times):
            if not self.times:
                raise CalibrationError("The calibration holds no measurements.")
            return "auto" if "auto" in self.times else next(iter(self.times))
        if mode not in self.times:
            raise KeyError(f"mode {mode!r} was not calibrated (have: {', '.join(self.times)})")
        return mode

    def _table(self, mode: str) -> dict[int, float]:
        return self.times[mode]

    def t_verify(self, rows: int, mode: str = "auto") -> float:
        """Seconds for a verification of `rows` rows: the measured median where measured,
        else linear interpolation between (or extrapolation from) the two nearest measured
        row counts, floored at 0. "auto" falls back to the first mode when it was not measured."""
        table = self._table(self._mode(mode))
        if rows in table:
            return table[rows]
        rs = sorted(table)
        if not rs:
            raise CalibrationError("The calibration holds no measurements.")
        if len(rs) == 1:
            return table[rs[0]]
        if rows < rs[0]:
            r0, r1 = rs[0], rs[1]
        elif rows > rs[-1]:
            r0, r1 = rs[-2], rs[-1]
        else:
            i = bisect.bisect_left(rs, rows)
            r0, r1 = rs[i - 1], rs[i]
        t0, t1 = table[r0], table[r1]
        return max(t0 + (t1 - t0) * (rows - r0) / (r1 - r0), 0.0)

    def cost_per_row(self, mode: str = "auto") -> dict[int, float]:
        table = self._table(self._mode(mode))
        return {r: table[r] / r for r in sorted(table)}

    def boundary(self, mode: str = "auto") -> int | None:
        """The first measured R whose cost is BOUNDARY_DROP (10%) below the previous measured R's:
        where verifying more rows got cheaper, i.e. a matrix kernel took over. None if never."""
        try:
            table = self._table(self._mode(mode))
        except (KeyError, CalibrationError):
            return None
        rs = sorted(table)
        for prev, r in zip(rs, rs[1:], strict=False):
            if table[r] < (1.0 - BOUNDARY_DROP) * table[prev]:
                return r
        return None

    @property
    def prediction_agrees(self) -> bool:
        """Whether the measured boundary of the default mode is the predicted one.

        A predicted boundary beyond the measured rows cannot be seen, so it agrees with none.
        """
        measured = self.boundary()
        predicted = self.predicted_boundary
        if predicted is not None and self.rows and predicted > max(self.rows):
            predicted = None
        return measured == predicted

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: row counts become strings; the derived boundary is included for readers."""
        return {
            "version": 1,
            "backend": self.backend,
            "device_name": self.device_name,
            "architecture": self.architecture,
            "context_len": self.context_len,
            "context_end": self.context_end,
            "calls": self.calls,
            "repeats": self.repeats,
            "created": self.created,
            "draft_step_s": self.draft_step_s,
            "times": {
                m: {str(r): t for r, t in sorted(tab.items())} for m, tab in self.times.items()
            },
            "kernels": {str(r): k for r, k in sorted(self.kernels.items())},
            "role_kernels": {str(r): dict(v) for r, v in sorted(self.role_kernels.items())},
            "predicted_boundary": self.predicted_boundary,
            "boundary": self.boundary(),
            "prediction_agrees": self.prediction_agrees,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VerifyCostCurve:
        """Inverse of to_dict; a malformed document raises CalibrationError (one sentence)."""
        try:
            times = {
                str(m): {int(r): float(t) for r, t in tab.items()} for m, tab in d["times"].items()
            }
            draft = d.get("draft_step_s")
            pb = d.get("predicted_boundary")
            return cls(
                backend=str(d["backend"]),
                device_name=str(d.get("device_name", "")),
                context_len=int(d["context_len"]),
                times=times,
                draft_step_s=None if draft is None else float(draft),
                kernels={int(r): str(k) for r, k in d.get("kernels", {}).items()},
                role_kernels={
                    int(r): {str(a): str(b) for a, b in v.items()}
                    for r, v in d.get("role_kernels", {}).items()
                },
                predicted_boundary=None if pb is None else int(pb),
                created=float(d.get("created", 0.0)),
                architecture=str(d.get("architecture", "")),
                repeats=int(d.get("repeats", 0)),
                context_end=int(d.get("context_end", 0)),
                calls=int(d.get("calls", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CalibrationError(f"The stored calibration is malformed ({exc!r}).") from exc


# --- patching the verification pass ----------------------------------------------------------------

_GEMV = -1  # linear-plan action: run the rows one at a time
_tls = threading.local()  # .linear: {id(module): action} | None, .plain: bool
_install_lock = threading.Lock()
_installed: dict[tuple[int, str], list[Any]] = {}


def plain_attention(
    queries: mx.array,
    keys: mx.array,
    values: mx.array,
    *,
    scale: float,
    mask: mx.array | str | None = None,
) -> mx.array:
    """softmax(q k^T * scale + mask) v with the softmax in float32: no fused kernel, so nothing
    is set up anew per shape (MLX CUDA's fused multi-row attention is, ~50 ms each time).

    Shapes as mx.fast.scaled_dot_product_attention: q [B, Hq, L, D], k/v [B, Hkv, S, D];
    "causal" aligns the L queries to the last L keys (offset S - L into the cache).
    """
    b, hq, lq, d = queries.shape
    hkv, s = keys.shape[1], keys.shape[2]
    rep = hq // hkv
    q = queries * scale
    if rep > 1:
        q = q.reshape(b, hkv, rep, lq, d)
        keys = mx.expand_dims(keys, 2)
        values = mx.expand_dims(values, 2)
    scores = (q @ mx.swapaxes(keys, -1, -2)).astype(mx.float32)
    if mask is not None:
        if isinstance(mask, str):
            if mask != "causal":
                raise ValueError(f"unsupported attention mask {mask!r}")
            mask = mx.arange(s - lq, s)[:, None] >= mx.arange(s)[None]
        elif rep > 1 and mask.ndim == 4:
            if mask.shape[1] == hq and hq > 1:
                mask = mask.reshape(mask.shape[0], hkv, rep, *mask.shape[2:])
            else:
                mask = mx.expand_dims(mask, 2)
        if mask.dtype == mx.bool_:
            scores = mx.where(mask, scores, mx.finfo(mx.float32).min)
        else:
            scores = scores + mask.astype(mx.float32)
    probs = mx.softmax(scores, axis=-1).astype(values.dtype)
    out = probs @ values
    if rep > 1:
        out = out.reshape(b, hq, lq, d)
    return out


def _rows_apply(call: Callable[[mx.array], mx.array], x: mx.array, action: int) -> mx.array:
    """Run a linear layer over x's rows one by one (action _GEMV) or padded to `action` rows."""
    lead = x.shape[:-1]
    m = 1
    for dim in lead:
        m *= dim
    if action == _GEMV:
        if m <= 1:
            return call(x)
        flat = x.reshape(m, x.shape[-1])
        y = mx.concatenate([call(flat[i : i + 1]) for i in range(m)], axis=0)
    else:
        if m >= action:
            return call(x)
        flat = x.reshape(m, x.shape[-1])
        pad = mx.zeros((action - m, x.shape[-1]), dtype=x.dtype)
        y = call(mx.concatenate([flat, pad], axis=0))[:m]
    return y.reshape(*lead, y.shape[-1])


def _wrap_method(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    """A Linear.__call__ / Embedding.as_linear that obeys this thread's plan for its instance."""

    def patched(self: nn.Module, x: mx.array) -> mx.array:
        plan = getattr(_tls, "linear", None)
        if plan is not None:
            action = plan.get(id(self))
            if action is not None:
                return _rows_apply(lambda v: original(self, v), x, action)
        return original(self, x)

    patched.__wrapped__ = original  # type: ignore[attr-defined]
    return patched


def _wrap_sdpa(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    """mlx-lm's scaled_dot_product_attention, plain for multi-row queries when this thread asks."""

    def scaled_dot_product_attention(
        queries: mx.array, keys: Any, values: Any, cache: Any = None, scale: float = 1.0,
        mask: Any = None, sinks: Any = None, **kw: Any,
    ) -> mx.array:  # fmt: skip
        if (
            getattr(_tls, "plain", False)
            and queries.shape[-2] > 1
            and sinks is None
            and not kw
            and not hasattr(cache, "bits")
        ):
            return plain_attention(queries, keys, values, scale=scale, mask=mask)
        if sinks is not None:
            kw["sinks"] = sinks
        return original(queries, keys, values, cache, scale=scale, mask=mask, **kw)

    scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
    return scaled_dot_product_attention


def _install(owner: Any, attr: str, wrap: Callable[[Any], Any]) -> None:
    """Replace owner.attr (a class attribute or a module-globals entry) by wrap(original);
    reference-counted so nested or concurrent users share one wrapper."""
    key = (id(owner), attr)
    with _install_lock:
        entry = _installed.get(key)
        if entry is not None:
            entry[4] += 1
            return
        if isinstance(owner, dict):
            had, raw = True, owner[attr]
            owner[attr] = wrap(raw)
        else:
            had = attr in owner.__dict__
            raw = owner.__dict__[attr] if had else getattr(owner, attr)
            setattr(owner, attr, wrap(raw))
        _installed[key] = [owner, attr, had, raw, 1]


def _uninstall(owner: Any, attr: str) -> None:
    key = (id(owner), attr)
    with _install_lock:
        entry = _installed.get(key)
        if entry is None:
            return
        entry[4] -= 1
        if entry[4] > 0:
            return
        del _installed[key]
        _, _, had, raw, _ = entry
        if isinstance(owner, dict):
            owner[attr] = raw
        elif had:
            setattr(owner, attr, raw)
        else:
            delattr(owner, attr)


class _ModelPlan:
    """What patching one model needs, found once: classes, module globals, layer ids, shapes."""

    def __init__(self, model: nn.Module) -> None:
        from mlx_lm.models import base

        mods = _linear_modules(model)
        self.methods = tuple(dict.fromkeys((type(m), how) for _, m, how, _ in mods))
        self.ids = {id(m): s for _, m, _, s in mods}
        self.gemv: dict[int, int] = dict.fromkeys(self.ids, _GEMV)
        self._gemm: dict[BackendInfo, dict[int, int] | None] = {}
        globs = []
        for _, m in model.named_modules():
            g = getattr(sys.modules.get(type(m).__module__), "__dict__", None)
            if (
                g is not None
                and g.get("scaled_dot_product_attention") is base.scaled_dot_product_attention
            ):
                globs.append(g)
        self.sdpa_globals = tuple({id(g): g for g in globs}.values())

    def gemm(self, backend: BackendInfo) -> dict[int, int] | None:
        """Per layer id, the row count to pad to so its matrix kernel runs (None: nothing to pad)."""
        if backend not in self._gemm:
            plan = {}
            for i, s in self.ids.items():
                b = shape_boundary(_replace(s, count=1, names=()), backend)
                if b is not None and b > 1:
                    plan[i] = b
            self._gemm[backend] = plan or None
        return self._gemm[backend]


_plans: dict[int, tuple[weakref.ref[nn.Module], _ModelPlan]] = {}


def _plan_for(model: nn.Module) -> _ModelPlan:
    entry = _plans.get(id(model))
    if entry is not None and entry[0]() is model:
        return entry[1]
    plan = _ModelPlan(model)
    key = id(model)
    _plans[key] = (weakref.ref(model, lambda _r, k=key: _plans.pop(k, None)), plan)
    return plan


class _VerificationPatches:
    """The context manager verification_patches returns when something is to be patched."""

    __slots__ = ("plan", "linear", "plain", "_saved", "_done")

    def __init__(self, plan: _ModelPlan, linear: dict[int, int] | None, plain: bool) -> None:
        self.plan, self.linear, self.plain = plan, linear, plain
        self._saved: tuple[Any, Any] = (None, False)
        self._done: list[tuple[Any, str]] = []

    def __enter__(self) -> None:
        done = self._done = []
        try:
            if self.linear is not None:
                for cls, how in self.plan.methods:
                    _install(cls, how, _wrap_method)
                    done.append((cls, how))
            if self.plain:
                for g in self.plan.sdpa_globals:
                    _install(g, "scaled_dot_product_attention", _wrap_sdpa)
                    done.append((g, "scaled_dot_product_attention"))
        except BaseException:
            self._undo()
            raise
        self._saved = (getattr(_tls, "linear", None), getattr(_tls, "plain", False))
        _tls.linear, _tls.plain = self.linear, self.plain

    def _undo(self) -> None:
        for owner, attr in reversed(self._done):
            _uninstall(owner, attr)
        self._done = []

    def __exit__(self, *exc: object) -> None:
        _tls.linear, _tls.plain = self._saved
        self._undo()


_NULL = contextlib.nullcontext()


def default_verify_attention(backend: BackendInfo) -> str:
    """Without a calibration: fused on Metal and CPU, plain on CUDA (measured on the H200:
    MLX CUDA's fused multi-row attention costs ~50 ms per new KV length, plain ~2-3 ms)."""
    return "plain" if backend.backend == "cuda" else "fused"


def resolve_verify_attention(
    verify_attention: str,
    rows: int,
    backend: BackendInfo | None = None,
    curve: VerifyCostCurve | None = None,
) -> str:
    """Which attention ("fused" or "plain") a verification of `rows` rows uses; "auto"
    prefers a calibration that measured both, else the backend's default."""
    if verify_attention != "auto":
        return verify_attention
    if curve is not None and "plain" in curve.times and "fused" in curve.times:
        return "plain" if curve.t_verify(rows, "plain") < curve.t_verify(rows, "fused") else "fused"
    return default_verify_attention(backend or current_backend())


def verification_patches(
    model: nn.Module,
    dispatch: str = "auto",
    verify_attention: str = "auto",
    rows: int = 2,
    *,
    backend: BackendInfo | None = None,
    curve: VerifyCostCurve | None = None,
) -> contextlib.AbstractContextManager[None]:
    """Enter around the target's multi-row verification forward (never a single-row decode).

    dispatch "gemv": every linear layer of `model` runs its rows one at a time (vector kernel);
    "gemm": each layer pads its activation rows (not the token sequence: caches and attention
    are untouched) to the row count where its matrix kernel starts on `backend`, and drops the
    padding; "auto": MLX decides. verify_attention "plain" swaps mlx-lm's fused attention for
    `plain_attention` on multi-row queries; "auto" resolves per `resolve_verify_attention`.
    Everything is restored on exit, exceptions included; entering costs a few attribute sets.
    """
    if dispatch not in DISPATCH:
        raise SettingsError(f"dispatch must be one of {', '.join(DISPATCH)}; got {dispatch!r}.")
    if verify_attention not in VERIFY_ATTENTION:
        raise SettingsError(
            f"verify_attention must be one of {', '.join(VERIFY_ATTENTION)}; got {verify_attention!r}."
        )
    if rows <= 1:
        return _NULL
    if dispatch == "fastest":
        from core.policy import fastest_dispatch

        dispatch = fastest_dispatch(curve, rows)
    b = backend or current_backend()
    plain = resolve_verify_attention(verify_attention, rows, b, curve) == "plain"
    if dispatch == "auto" and not plain:
        return _NULL
    plan = _plan_for(model)
    linear = plan.gemv if dispatch == "gemv" else plan.gemm(b) if dispatch == "gemm" else None
    if linear is None and not (plain and plan.sdpa_globals):
        return _NULL
    return _VerificationPatches(plan, linear, plain)


# --- calibration -----------------------------------------------------------------------------------

Progress = Callable[[int, int, str], None]


def _row_list(rows: int | Sequence[int]) -> list[int]:
    if isinstance(rows, int):
        if rows < 1:
            raise CalibrationError(f"Calibration needs at least 1 row, got {rows}.")
        return list(range(1, rows + 1))
    out = sorted({int(r) for r in rows})
    if not out or out[0] < 1:
        raise CalibrationError("Calibration rows must be positive integers.")
    return out


def _vocab_size(model: nn.Module) -> int:
    args = getattr(model, "args", None)
    v = getattr(args, "vocab_size", None)
    if v:
        return int(v)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if embed is not None:
        return int(embed.weight.shape[0])
    raise CalibrationError("Cannot tell the model's vocabulary size, so no tokens can be drawn.")


def _prefill(model: nn.Module, cache: list[Any], tokens: mx.array, chunk: int = 512) -> None:
    for i in range(0, tokens.shape[0], chunk):
        mx.eval(model(tokens[None, i : i + chunk], cache=cache))


def _offset(cache: list[Any]) -> int:
    return int(getattr(cache[0], "offset", 0)) if cache else 0


DRAFT_CHAIN = 8  # draft steps per timed chain in calibration


def _draft_stepper(model: nn.Module, cache: list[Any], fused: bool) -> Callable[[mx.array], mx.array]:
    """step(token[1]) -> logits[1, V] for the draft, compiled when `fused` and supported."""
    if fused:
        from core.drafting.compiled import CompiledDecodeStep, supports

        if supports(model) is None:
            fused_step = CompiledDecodeStep(model)
            return lambda y: fused_step.step(y, cache)
    return lambda y: model(y[None], cache=cache)[0, -1:]


def calibrate(
    target_model: nn.Module,
    draft_model: nn.Module | None = None,
    *,
    rows: int | Sequence[int] = 16,
    repeats: int = 5,
    context: int = 128,
    modes: Sequence[str] = ("auto",),
    progress: Progress | None = None,
    backend: BackendInfo | None = None,
    seed: int = 0,
    warmup: int = 1,
    fused_draft: bool = False,
) -> VerifyCostCurve:
    """Measure one target forward over R rows for R in `rows` (1..rows), per mode.

    A fresh prompt cache is prefilled with `context` random tokens; each call then trims the
    cache back by R - 1 only, so the KV length advances by one per call as in a real loop
    (MLX CUDA sets its fused multi-row attention up anew for each shape, and repeating one
    length hides that). Passes sweep all R in turn (`warmup` untimed, then `repeats` timed) so
    every R sees the same spread of lengths; each timed call is one forward and one mx.eval.
    The draft's single-token step is timed as the engine runs it: a chain of steps with no
    host sync inside (compiled with `fused_draft`, core/drafting/compiled.py). Medians are stored.
    """
    from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

    row_list = _row_list(rows)
    if repeats < 1:
        raise CalibrationError(f"Calibration needs at least 1 repeat, got {repeats}.")
    if context < 1:
        raise CalibrationError(f"Calibration needs a context of at least 1 token, got {context}.")
    bad = [m for m in modes if m not in CALIBRATION_MODES]
    if bad or not modes:
        raise CalibrationError(
            f"Calibration modes must be among {', '.join(CALIBRATION_MODES)}; got {', '.join(bad) or 'none'}."
        )
    modes = list(dict.fromkeys(modes))
    b = backend or current_backend()
    predictor = KernelPredictor(target_model, b)
    vocab = _vocab_size(target_model)
    import numpy as np

    rng = np.random.default_rng(seed)
    cache = make_prompt_cache(target_model)
    if not can_trim_prompt_cache(cache):
        raise CalibrationError(
            "The target's cache cannot be rewound, so verification cannot be calibrated."
        )
    prompt = mx.array(rng.integers(0, vocab, context), dtype=mx.int32)
    _prefill(target_model, cache, prompt)

    passes = warmup + repeats
    total = len(modes) * passes * len(row_list) + (passes if draft_model is not None else 0)
    done = 0
    times: dict[str, dict[int, float]] = {}
    calls = 0
    for mode in modes:
        dispatch, attention = MODE_SETTINGS[mode]
        samples: dict[int, list[float]] = {r: [] for r in row_list}
        for p in range(passes):
            for r in row_list:
                toks = mx.array(rng.integers(0, vocab, (1, r)), dtype=mx.int32)
                mx.eval(toks)
                t0 = time.perf_counter()
                with verification_patches(target_model, dispatch, attention, r, backend=b):
                    logits = target_model(toks, cache=cache)
                mx.eval(logits)
                dt = time.perf_counter() - t0
                if r > 1:
                    trim_prompt_cache(cache, r - 1)
                calls += 1
                if p >= warmup:
                    samples[r].append(dt)
                done += 1
                if progress is not None:
                    progress(done, total, f"{mode}: {r} rows")
        times[mode] = {r: statistics.median(v) for r, v in samples.items()}
    context_end = _offset(cache)
    del cache

    draft_s = None
    if draft_model is not None:
        dcache = make_prompt_cache(draft_model)
        dvocab = min(vocab, _vocab_size(draft_model))
        _prefill(draft_model, dcache, prompt % dvocab)
        step = _draft_stepper(draft_model, dcache, fused_draft)
        steps = []
        for p in range(passes):
            # The engine's draft loop: DRAFT_CHAIN greedy steps chained on the device with
            # async_eval and one wait at the end; the per-step cost is the chain's share.
            y = mx.array(rng.integers(0, dvocab, (1,)), dtype=mx.int32)
            mx.eval(y)
            t0 = time.perf_counter()
            for _ in range(DRAFT_CHAIN):
                y = mx.argmax(step(y)[:, :dvocab], axis=-1)
                mx.async_eval(y)
            mx.eval(y)
            dt = (time.perf_counter() - t0) / DRAFT_CHAIN
            if p >= warmup:
                steps.append(dt)
            done += 1
            if progress is not None:
                progress(done, total, "draft step")
        draft_s = statistics.median(steps)
        del dcache

    return VerifyCostCurve(
        backend=b.backend,
        device_name=b.device_name,
        architecture=b.architecture,
        context_len=context,
        times=times,
        draft_step_s=draft_s,
        kernels={r: predictor.family(r) for r in row_list},
        role_kernels={r: predictor.role_kernels(r) for r in row_list},
        predicted_boundary=predictor.forward_boundary(),
        repeats=repeats,
        context_end=context_end,
        calls=calls,
    )


# --- the CLI ---------------------------------------------------------------------------------------


def add_calibrate_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `specdec-tui calibrate` (core.cli adds --target/--draft)."""
    p.add_argument("--rows", type=int, default=16, help="measure verification of R = 1..ROWS rows")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per row count (median kept)")
    p.add_argument("--context", type=int, default=128, help="tokens in the cache before timing")
    p.add_argument(
        "--modes",
        default="auto",
        help="comma-separated: auto (default settings), gemv, gemm (forced linear kernels), "
        "fused, plain (forced verification attention)",
    )
    p.add_argument("--json", default=None, metavar="PATH", help="also write the curve as JSON here")


def parse_modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in CALIBRATION_MODES]
    if bad or not modes:
        raise CalibrationError(
            f"--modes takes a comma-separated list of {', '.join(CALIBRATION_MODES)}; got {text!r}."
        )
    return list(dict.fromkeys(modes))


def curve_table(curve: VerifyCostCurve) -> Any:
    """The curve as a rich Table: R, ms and ms/row per mode, predicted kernel per role, marks."""
    from rich.table import Table

    measured = curve.boundary()
    predicted = curve.predicted_boundary
    title = f"verify cost: {curve.backend} {curve.device_name} {curve.architecture}".strip()
    table = Table(title=f"{title}, context {curve.context_len}", title_justify="left")
    table.add_column("R", justify="right")
    for m in curve.modes:
        table.add_column(f"{m} ms", justify="right")
        table.add_column(f"{m} ms/row", justify="right")
    roles = [r for r in ROLES if any(r in v for v in curve.role_kernels.values())]
    for role in roles:
        table.add_column(f"{role} kernel")
    table.add_column("boundary")
    all_rows = sorted({r for tab in curve.times.values() for r in tab})
    for r in all_rows:
        cells = [str(r)]
        for m in curve.modes:
            t = curve.times[m].get(r)
            cells += ["-", "-"] if t is None else [f"{t * 1e3:.2f}", f"{t * 1e3 / r:.2f}"]
        for role in roles:
            cells.append(curve.role_kernels.get(r, {}).get(role, ""))
        marks = []
        if measured == r:
            marks.append("[bold]< measured boundary[/bold]")
        if predicted == r:
            marks.append("< predicted")
        cells.append(" ".join(marks))
        table.add_row(*cells, style="bold" if measured == r else None)
    return table


def curve_summary(curve: VerifyCostCurve) -> str:
    """The lines under the table: draft step, boundary measured vs predicted."""
    lines = []
    if curve.draft_step_s is not None:
        lines.append(f"draft step: {curve.draft_step_s * 1e3:.2f} ms")
    measured, predicted = curve.boundary(), curve.predicted_boundary
    m = "none" if measured is None else f"R = {measured}"
    pr = "none" if predicted is None else f"R = {predicted}"
    verdict = "agrees" if curve.prediction_agrees else "[bold red]DISAGREES[/bold red]"
    lines.append(f"boundary: measured {m}, predicted {pr}: {verdict}")
    lines.append(
        f"KV length advanced {curve.context_len} -> {curve.context_end} over {curve.calls} calls"
    )
    return "\n".join(lines)


def write_curve_json(curve: VerifyCostCurve, path: str | Path) -> Path:
    """Write atomically (temp file + rename), so an interrupted write leaves no half file."""
    target = Path(path).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".calibrate-", suffix=".json", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(curve.to_dict(), f, indent=2)
                f.write("\n")
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise CalibrationError(
            f"Could not write the calibration to {target}: {exc.strerror or exc}."
        ) from exc
    return target


def run_calibrate_cli(args: argparse.Namespace) -> int:
    """`specdec-tui calibrate`: load the pair, measure, print the table, optionally write JSON."""
    from rich.console import Console
    from rich.progress import Progress as RichProgress

    from core.models import load_pair

    modes = parse_modes(getattr(args, "modes", "auto") or "auto")
    for name in ("rows", "repeats", "context"):
        if getattr(args, name) < 1:
            raise CalibrationError(f"--{name} must be at least 1, got {getattr(args, name)}.")
    pair = load_pair(getattr(args, "target", None) or "default", getattr(args, "draft", None))
    console = Console()
    err = Console(stderr=True)
    with RichProgress(console=err, transient=True) as bar:
        task = bar.add_task("calibrating", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        curve = calibrate(
            pair.target.model,
            pair.draft.model if pair.draft is not None else None,
            rows=args.rows,
            repeats=args.repeats,
            context=args.context,
            modes=modes,
            progress=progress,
        )
    console.print(curve_table(curve))
    console.print(curve_summary(curve))
    if getattr(args, "json", None):
        path = write_curve_json(curve, args.json)
        console.print(f"wrote {path}")
    return 0
