"""Which matmul kernel MLX runs for each linear layer of a model, given R rows and a backend.

MLX picks a kernel from the row count M of a linear layer's input (M = k + 1 for a
verification of k drafts): a vector kernel below a per-shape limit, a matrix kernel from it.
No Python API names the kernel that ran, so this module lists a model's linear shapes and
applies MLX's own dispatch rules to them (read from its source, docs/dispatch.md).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from core.dispatch.backend import BackendInfo, current_backend

ROLES = ("attention", "mlp", "lm_head", "other")
# Row counts searched for a shape's first matrix-path R (Metal's largest limit is 33).
MAX_SEARCH_ROWS = 128

# Kernel families that are a matrix (GEMM) path; everything else is a vector path or the CPU.
MATRIX_KERNELS = frozenset(
    {
        "qmm_t", "qmm_t_splitk", "qmm_t_nax", "qmm_sm80", "qmm_sm90", "qmm_naive",
        "steel_gemm", "steel_gemm_splitk", "steel_gemm_nax", "steel_gemm_splitk_nax", "cublasLt",
    }
)


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
                self.dtype, self.bias, self.mode)


_ATTN_PARENTS = ("attn", "attention")
_MLP_PARENTS = ("mlp", "feed_forward", "ffn", "moe", "experts")
_ATTN_NAMES = frozenset(
    {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "wq", "wk", "wv", "wo", "query",
     "key", "value", "c_attn", "out_proj", "query_key_value"}
)
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
                           str(getattr(module, "mode", "affine")), 1, (name,))
    if isinstance(module, nn.Linear | nn.Embedding):
        n, k = module.weight.shape
        return LinearShape(role, k, n, None, None, False, _dtype_name(module.weight.dtype),
                           "bias" in module, "affine", 1, (name,))
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


def linear_modules(model: nn.Module) -> list[tuple[str, nn.Module, str, LinearShape]]:
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
    for _, _, _, s in linear_modules(model):
        key = s.key()
        if key in merged:
            old = merged[key]
            names = old.names if s.names[0] in old.names else (*old.names, *s.names)
            merged[key] = dataclasses.replace(old, count=old.count + 1, names=names)
        else:
            merged[key] = s
    return list(merged.values())


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
            and gs >= k)
    if sm90:
        return vector if qmv_ok and rows == 1 and n <= 16384 and k <= 16384 else "qmm_sm90"
    sm80 = (major >= 8 and n % 128 == 0 and k % max(64, gs) == 0
            and s.dtype in ("float16", "bfloat16") and bits in (4, 8))
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
                                           is_matrix_kernel(kern)))
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



def _unpredicted(rows: int) -> str:
    """The family where the target has no predictor: none named."""
    return ""


class KernelNames:
    """The predicted kernel family per row count, as rounds report it: asked of `predictor`
    (a KernelPredictor; None where the target has none) once per count, so a round reads a
    dict; "" where it fails (a prediction never breaks decoding)."""

    def __init__(self, predictor: Any | None) -> None:
        self._ask = _unpredicted if predictor is None else predictor.family
        self._names: dict[int, str] = {}

    def __call__(self, rows: int) -> str:
        if rows not in self._names:
            try:
                family = str(self._ask(rows))
            except Exception:  # prediction must never break decoding
                family = ""
            self._names[rows] = family
        return self._names[rows]
