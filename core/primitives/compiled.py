"""One compiled forward for every row count the engine runs, over mlx-lm's own KV caches.

A small model's step is hundreds of tiny kernels whose cost is mostly host-side graph
building and launching (on the H200 a 0.5B-shape step is ~480 kernels at ~7 µs each:
docs/benchmarks/archive/h200.md). `mx.compile` traces a forward once and replays it, fusing the
element-wise work (residual adds, SiLU-gate, bias adds). One trace stays valid across
positions because everything that moves is an array input, never a Python int: the offset
(positions, the RoPE offset and the cache write, a dynamic `slice_update` into the cache's
preallocated buffer) and the attention mask (each row sees the slots up to its own position).

Row counts are padded to a bucket (`BUCKETS`: 1, 8, 16, 32, 64), so the engine's 1-row step and
every verification of 2..64 rows share five graphs per buffer size. A padded row's query is
discarded and its key/value lands past the new offset, where no real row looks (each real
row's mask stops at its own position) and the next forward overwrites it: the logits of the
real rows are the eager forward's, to float tolerance. Wider forwards (prefill chunks) run
eager: a prefill pays its host work once per chunk of hundreds of tokens, not once a token.
Attention reads the whole buffer, masked (up to twice the context after a doubling): what that
costs at long contexts against the eager forward's exact length is for a GPU to measure
(docs/benchmarks/h200/step-ab.sh).

The buffer is the same `mlx_lm.models.cache.KVCache` the eager path uses, so the two paths can
alternate freely and a rewind stays what it is for that cache: `KVCache.trim` moves the offset
back (no copy). When a forward needs room, the buffer doubles: one new trace per bucket in use
per growth, counted in `graphs` (each trace runs the Python body once; replays do not).

Projections that read the same input are also merged: q/k/v into one matmul and gate/up into
another (their weights stacked along the output rows, which leaves every product exact), so a
llama/qwen2 layer does 4 matmuls instead of 7.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import llama, qwen2
from mlx_lm.models.activations import swiglu
from mlx_lm.models.cache import KVCache, make_prompt_cache

from core.primitives.introspect import layers, tied_embeddings

BUCKETS = (1, 8, 16, 32, 64)  # rows a compiled forward is padded to
MAX_ROWS = BUCKETS[-1]  # wider forwards run eager
MIN_CAPACITY = 256  # the smallest buffer a growth leaves (mlx-lm's own KVCache step)


def bucket(rows: int) -> int | None:
    """The row count a forward of `rows` rows is padded to; None past MAX_ROWS (eager)."""
    for b in BUCKETS:
        if rows <= b:
            return b
    return None


def supports(model: nn.Module) -> str | None:
    """None when the model has the llama/qwen2 layout this forward reproduces; else why not."""
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "embed_tokens") or not hasattr(inner, "norm"):
        return "the model has no model.embed_tokens/model.norm"
    for layer in layers(model):
        if not isinstance(layer, KNOWN_BLOCKS):
            return (f"its {type(layer).__module__.rsplit('.', 1)[-1]} layers are not the "
                    "llama/qwen2 block this step reproduces")
        attn = getattr(layer, "self_attn", None)
        if attn is None or not all(
            hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj", "rope", "scale")
        ):
            return "a layer's attention is not the llama/qwen2 layout"
        if hasattr(attn, "q_norm") or hasattr(attn, "k_norm"):
            return "per-head q/k norms (qwen3-style) are not reproduced by the compiled step"
        if not all(hasattr(layer, n)
                   for n in ("input_layernorm", "post_attention_layernorm", "mlp")):
            return "a layer is not a pre-norm attention + MLP block"
    if not layers(model):
        return "the model has no layers"
    if getattr(getattr(inner, "args", None), "sliding_window", None):
        return "a sliding-window attention is not reproduced by the compiled step"
    if any(type(c) is not KVCache for c in make_prompt_cache(model)):
        return "its prompt cache is not mlx-lm's plain KVCache (rotating or quantized)"
    return None


class CompiledForward:
    """`forward(tokens[R], cache) -> logits[R, V]`: one compiled forward writing into `cache`,
    for any R up to MAX_ROWS (padded to its bucket), the cache advanced by R."""

    def __init__(self, model: nn.Module, merge: bool = True) -> None:
        why = supports(model)
        if why is not None:
            raise ValueError(f"compiled step unavailable: {why}")
        self.model = model
        self.merge = merge
        self.graphs = 0  # traces built (one per bucket per buffer size); replays add none
        blocks = layers(model)
        self._qkv = [
            merge_linears([a.q_proj, a.k_proj, a.v_proj]) if merge else None
            for a in (layer.self_attn for layer in blocks)
        ]
        self._gate_up = [
            merge_linears([layer.mlp.gate_proj, layer.mlp.up_proj])
            if merge and isinstance(layer.mlp, SWIGLU_MLPS) else None
            for layer in blocks
        ]
        self._fn: Callable[..., Any] = mx.compile(self._forward)

    def _forward(self, tokens: mx.array, offset: mx.array, *kv: mx.array) -> list[mx.array]:
        self.graphs += 1  # the body runs only while a new graph is traced
        model = self.model
        inner = model.model
        B = tokens.shape[0]
        h = inner.embed_tokens(tokens[None])  # [1, B, D]
        cap = kv[0].shape[2]
        positions = offset + mx.arange(B)
        mask = (mx.arange(cap)[None, :] <= positions[:, None])[None, None]  # [1, 1, B, cap]
        start = offset.reshape(1)
        out_kv: list[mx.array] = []
        for i, layer in enumerate(inner.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            qkv = self._qkv[i]
            if qkv is not None:
                q, k, v = qkv(x)
            else:
                q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
            q = q.reshape(1, B, attn.n_heads, -1).transpose(0, 2, 1, 3)
            k = k.reshape(1, B, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
            v = v.reshape(1, B, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
            q = attn.rope(q, offset=offset)
            k = attn.rope(k, offset=offset)
            keys = mx.slice_update(kv[2 * i], k.astype(kv[2 * i].dtype), start, axes=(2,))
            values = mx.slice_update(kv[2 * i + 1], v.astype(kv[2 * i + 1].dtype), start, axes=(2,))
            out_kv += [keys, values]
            o = mx.fast.scaled_dot_product_attention(q, keys, values, scale=attn.scale, mask=mask)
            h = h + attn.o_proj(o.transpose(0, 2, 1, 3).reshape(1, B, -1))
            x = layer.post_attention_layernorm(h)
            gate_up = self._gate_up[i]
            if gate_up is not None:
                gate, up = gate_up(x)
                h = h + layer.mlp.down_proj(swiglu(gate, up))
            else:
                h = h + layer.mlp(x)
        h = inner.norm(h)
        if getattr(model, "lm_head", None) is not None and not tied_embeddings(model):
            logits = model.lm_head(h)
        else:
            logits = inner.embed_tokens.as_linear(h)
        return [logits[0], *out_kv]

    def runs(self, rows: int, cache: Sequence[Any]) -> bool:
        """Whether a forward of `rows` rows over `cache` runs compiled: a bucket holds it and
        the cache was prefilled (the buffer exists); otherwise the caller runs eager."""
        return bucket(rows) is not None and bool(cache) and cache[0].keys is not None

    def forward(self, tokens: mx.array, cache: list[KVCache], last: int | None = None) -> mx.array:
        """Feed `tokens` (1-D, at most MAX_ROWS) at the cache's offset; logits [rows, V], or
        of the `last` rows (one slice drops them and the padding together)."""
        rows = tokens.shape[0]
        width = bucket(rows)
        if width is None or cache[0].keys is None:
            raise ValueError(f"a compiled forward takes 1..{MAX_ROWS} rows over a prefilled cache")
        offset = cache[0].offset
        for c in cache:
            _ensure_capacity(c, offset + width)
        if width > rows:
            tokens = mx.concatenate([tokens, mx.zeros((width - rows,), tokens.dtype)])
        kv = [a for c in cache for a in (c.keys, c.values)]
        logits, *new = self._fn(tokens, mx.array(offset, dtype=mx.int32), *kv)
        for j, c in enumerate(cache):
            c.keys, c.values = new[2 * j], new[2 * j + 1]
            c.offset = offset + rows
        keep = rows if last is None or last >= rows else last
        return logits if width == keep else logits[rows - keep : rows]

    def step(self, token: mx.array, cache: list[KVCache]) -> mx.array:
        """Feed one token (shape [1]) at the cache's offset; returns logits [1, V]."""
        return self.forward(token.reshape(1), cache)


SWIGLU_MLPS = (llama.MLP, qwen2.MLP)  # down(silu(gate(x)) * up(x)), known exactly
# The blocks whose forward `_forward` reproduces (pre-norm, rope, plain SDPA, residuals): a
# block of another family (gemma's extra norms and soft-capping, phi's parallel MLP) may
# look the same by its attribute names and compute something else.
KNOWN_BLOCKS = (llama.TransformerBlock, qwen2.TransformerBlock)


def merge_linears(mods: Sequence[nn.Module]) -> Callable[[mx.array], list[mx.array]] | None:
    """One matmul for several projections of the same input, split back per projection.

    Quantized weights (same bits, group size and mode) or dense weights are stacked along the
    output rows; each output row is computed exactly as before. None when they cannot be.
    """
    if len({tuple(m.weight.shape[1:]) for m in mods}) != 1:
        return None  # different inputs (or packings): nothing to stack
    sizes = [int(m.weight.shape[0]) for m in mods]
    cuts = list(accumulate(sizes))[:-1]
    has_bias = ["bias" in m for m in mods]
    bias = (
        mx.concatenate([m["bias"] if b else mx.zeros((n,), m.weight.dtype)
                        for m, b, n in zip(mods, has_bias, sizes, strict=True)])
        if any(has_bias) else None
    )
    if all(isinstance(m, nn.QuantizedLinear) for m in mods):
        first = mods[0]
        spec = (first.bits, first.group_size, first.mode)
        if any((m.bits, m.group_size, m.mode) != spec for m in mods):
            return None
        w = mx.concatenate([m["weight"] for m in mods])
        scales = mx.concatenate([m["scales"] for m in mods])
        biases = (mx.concatenate([m["biases"] for m in mods])
                  if all("biases" in m for m in mods) else None)
        mx.eval(w, scales, *(a for a in (biases, bias) if a is not None))

        def qmm(x: mx.array) -> list[mx.array]:
            y = mx.quantized_matmul(x, w, scales=scales, biases=biases, transpose=True,
                                    group_size=first.group_size, bits=first.bits, mode=first.mode)
            return mx.split(y if bias is None else y + bias, cuts, axis=-1)

        return qmm
    if all(type(m) is nn.Linear for m in mods):
        w = mx.concatenate([m["weight"] for m in mods])
        mx.eval(w, *(a for a in (bias,) if a is not None))

        def mm(x: mx.array) -> list[mx.array]:
            y = x @ w.T
            return mx.split(y if bias is None else y + bias, cuts, axis=-1)

        return mm
    return None


def _ensure_capacity(c: KVCache, need: int) -> None:
    """Double the buffer until `need` slots fit (at least MIN_CAPACITY): one new trace per
    bucket per growth. Slots past the offset are masked, so their contents never matter."""
    cap = c.keys.shape[2]
    if need <= cap:
        return
    new = max(cap, MIN_CAPACITY)
    while new < need:
        new *= 2
    extra = new - cap
    B, H, _, Dk = c.keys.shape
    Dv = c.values.shape[3]
    c.keys = mx.concatenate([c.keys, mx.zeros((B, H, extra, Dk), c.keys.dtype)], axis=2)
    c.values = mx.concatenate([c.values, mx.zeros((B, H, extra, Dv), c.values.dtype)], axis=2)
