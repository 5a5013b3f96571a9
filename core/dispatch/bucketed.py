"""MLX's fused attention for a multi-row verification at shapes that repeat (CUDA).

On CUDA, MLX runs a multi-row scaled-dot-product attention through cuDNN, whose execution
plan it builds per exact shape of q, k, v and mask and keeps in an LRU
(`MLX_CUDA_SDPA_CACHE_SIZE`, 256 plans): building one costs tens of ms. A verification reads
the KV cache at a new length every round, so every round missed the cache: the H200 timed the
default model's fused verification at 46-80 ms at every R from 2 to 33 (docs/benchmarks/data/h200-2026-12-02-s13),
and the plain attention that replaced it costs about a
second step. The same forward whose plan is cached read about one plain step at 16 and 33
rows (the forward-split probe, docs/benchmarks/h200/forward_split.py); at the bucketed shapes
below (the buffer's whole length, padded rows) a 2-33-row forward reads 1.4-1.7 plain steps
pipelined, the plain attention 1.9-2.6 (docs/benchmarks/data/h200-2026-12-02-s14).

So the verification asks for shapes that repeat: the keys and values are the KV cache's own
buffer (mlx-lm's KVCache allocates in steps of 256 positions; the buffer changes size only
then), the queries are padded to a row bucket (16 or 64), and an additive mask hides what is
not the causal window: keys past the cache's offset (stale or zero) and, for the padded query
rows, nothing they could not see (their rows are dropped). The plan then changes only when
the buffer grows or R crosses 16: a few plans a conversation instead of one a round. The
real rows' attention is the causal attention over the cache, up to the kernel's rounding.
A token tree's verification hands a bool mask of its rows over the cache instead of
"causal" (core/primitives/tree_forward.py); it is padded the same way. Not used where the
cache is not a plain KVCache (quantized, rotating) or the mask is neither: those keep MLX's
own call.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import mlx.core as mx

# MLX throws ("Cache thrashing") once its plan cache has missed twice its capacity in a
# process (256 plans: 512 misses). Each request's prefill and each new buffer size or row
# bucket is a miss, so a long chat would reach it; a larger cache is asked for unless the
# user set one. Read by MLX's CUDA backend at its first attention call, after this import.
os.environ.setdefault("MLX_CUDA_SDPA_CACHE_SIZE", "4096")

ROW_BUCKETS = (16, 64)  # a verification's query rows are padded up to the first that holds them
_tls = threading.local()  # .bias: (key, mx.array), the last forward's mask (its layers share it)
# .new_plan: a call on this thread met a shape no call in the process had (took_new_plan)
# The shapes this process's calls asked MLX's fused attention for: MLX builds a plan at each
# new one (its cache keeps 4,096: MLX_CUDA_SDPA_CACHE_SIZE above), so this set says, on the
# host and exactly, which forward paid a plan's build.
_shapes: set[tuple[Any, ...]] = set()


def took_new_plan() -> bool:
    """Whether this thread's bucketed attention met a shape new to the process since the last
    ask (and forget it). Why: a round whose verification built a cuDNN plan paid tens of ms
    once for its (row bucket, buffer length), not for its source: on the H200 a lookup whose
    first rounds built the 64- and 16-row plans read 0.17x of target steps and was stopped
    for three requests (docs/benchmarks/data/h200-2026-12-03-s17). The guard and the cost
    policy leave such a round's seconds out (core/decode/speculative.py)."""
    new = bool(getattr(_tls, "new_plan", False))
    _tls.new_plan = False
    return new


def row_bucket(rows: int) -> int:
    """The query rows a verification of `rows` rows is padded to (itself past the buckets)."""
    return next((b for b in ROW_BUCKETS if rows <= b), rows)


def _bias(rows: int, offset: int, rows_b: int, keys_b: int, dtype: mx.Dtype) -> mx.array:
    """[1, 1, rows_b, keys_b] additive mask: query row i (< rows) sees keys up to
    offset - rows + i, a padded row what the last real row sees, no row a key past offset.
    Built once per forward: every layer's call has the same shapes and reuses it."""
    key = (rows, offset, rows_b, keys_b, dtype)
    kept = getattr(_tls, "bias", None)
    if kept is not None and kept[0] == key:
        return kept[1]
    i = mx.minimum(mx.arange(rows_b), rows - 1)[:, None]
    j = mx.arange(keys_b)[None]
    seen = j <= i + (offset - rows)
    bias = mx.where(seen, mx.array(0.0, dtype), mx.array(mx.finfo(dtype).min, dtype))
    bias = bias[None, None]
    _tls.bias = (key, bias)
    return bias


def _tree_bias(seen: mx.array, rows_b: int, keys_b: int, dtype: mx.Dtype) -> mx.array:
    """[1, 1, rows_b, keys_b] additive mask of a tree's bool mask [rows, offset]: no key past
    the offset, padded rows see nothing (their rows are dropped). Kept per forward as
    `_bias` is: every layer is handed the same mask array."""
    key = (id(seen), rows_b, keys_b, dtype)
    kept = getattr(_tls, "bias", None)
    if kept is not None and kept[0] == key and kept[2] is seen:
        return kept[1]
    rows, offset = seen.shape
    padded = mx.pad(seen, [(0, rows_b - rows), (0, keys_b - offset)])
    bias = mx.where(padded, mx.array(0.0, dtype), mx.array(mx.finfo(dtype).min, dtype))[None, None]
    _tls.bias = (key, bias, seen)
    return bias


def bucketed_attention(
    queries: mx.array, keys: mx.array, values: mx.array, cache: Any, scale: float, mask: Any
) -> mx.array | None:
    """The causal (or a tree's masked) attention of `queries` (the last rows of the cache) over the cache, through
    MLX's fused kernel at bucketed shapes; None where this does not apply (the caller then
    makes MLX's own call)."""
    rows = queries.shape[2]
    offset = getattr(cache, "offset", None)
    buf_k, buf_v = getattr(cache, "keys", None), getattr(cache, "values", None)
    causal = isinstance(mask, str) and mask == "causal"
    # a token tree's verification (core/primitives/tree_forward.py): a bool [rows, offset]
    tree = (isinstance(mask, mx.array) and mask.dtype == mx.bool_
            and tuple(mask.shape) == (rows, offset))
    if (
        rows < 2
        or not (causal or tree)
        or hasattr(cache, "bits")
        or not isinstance(offset, int)
        or buf_k is None
        or buf_v is None
        or keys.shape[2] != offset
        or buf_k.shape[2] < offset
        or buf_v.shape[2] != buf_k.shape[2]
        or offset < rows
    ):
        return None
    rows_b = row_bucket(rows)
    # One layout per bucket: the plan's key holds q's strides, and a padded q is row-major
    # while mlx-lm's own is a transposed view (unpadded at R = 16 the plan missed; made
    # row-major, it read 8.8-9.4 ms, a hit: docs/benchmarks/data/h200-2026-12-02-s14)
    if rows_b > rows:
        q = mx.pad(queries, [(0, 0), (0, 0), (0, rows_b - rows), (0, 0)])
    else:
        q = mx.contiguous(queries)
    if tree:
        bias = _tree_bias(mask, rows_b, buf_k.shape[2], queries.dtype)
    else:
        bias = _bias(rows, offset, rows_b, buf_k.shape[2], queries.dtype)
    shape = (tuple(q.shape), tuple(buf_k.shape), tuple(buf_v.shape), q.dtype, float(scale))
    if shape not in _shapes:
        _shapes.add(shape)
        _tls.new_plan = True
    out = mx.fast.scaled_dot_product_attention(q, buf_k, buf_v, scale=scale, mask=bias)
    return out[:, :, :rows, :] if rows_b > rows else out
