"""A compiled single-token decode step over mlx-lm's own KV caches, for cheap draft steps.

A small model's decode step is hundreds of tiny kernels whose cost is mostly host-side
graph building and launching (measured on the H200: a 0.5B-shape step costs 3.6 ms however
it is scheduled). `mx.compile` traces the step once and replays it, fusing the element-wise
work (residual adds, SiLU-gate, bias adds). To keep one trace valid across positions, the
position is an array input, not a Python int: keys/values are written with a dynamic
`slice_update` into the cache's preallocated buffer and attention runs over the whole
buffer with a mask for the slots past the position. The buffer is the same
`mlx_lm.models.cache.KVCache` the unfused path uses, so trimming and prefill still work and
the two paths can alternate freely. A new trace is built only when the buffer grows.

Projections that read the same input are also merged: q/k/v into one matmul and gate/up into
another (their weights stacked along the output rows, which leaves every product exact), so a
llama/qwen2 layer runs 4 matmuls instead of 7. On the H200 a 0.5B step is ~480 kernels at
~7 µs each (docs/benchmarks/archive/h200.md), so fewer launches is where its time can come from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import llama, qwen2
from mlx_lm.models.activations import swiglu
from mlx_lm.models.cache import KVCache

from core.primitives.introspect import layers, tied_embeddings

GROW = 1024  # buffer growth in slots: every growth costs one re-trace


def supports(model: nn.Module) -> str | None:
    """None when the model has the llama/qwen2 layout this step reproduces; else why not."""
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "embed_tokens") or not hasattr(inner, "norm"):
        return "the model has no model.embed_tokens/model.norm"
    for layer in layers(model):
        attn = getattr(layer, "self_attn", None)
        if attn is None or not all(
            hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj", "rope", "scale")
        ):
            return "a layer's attention is not the llama/qwen2 layout"
        if hasattr(attn, "q_norm") or hasattr(attn, "k_norm"):
            return "per-head q/k norms (qwen3-style) are not reproduced by the fused step"
        if not all(hasattr(layer, n) for n in ("input_layernorm", "post_attention_layernorm", "mlp")):
            return "a layer is not a pre-norm attention + MLP block"
    if not layers(model):
        return "the model has no layers"
    return None


class CompiledDecodeStep:
    """`step(token[1], cache) -> logits[1, V]`: one compiled decode step writing into `cache`."""

    def __init__(self, model: nn.Module, merge: bool = True) -> None:
        why = supports(model)
        if why is not None:
            raise ValueError(f"fused decode step unavailable: {why}")
        self.model = model
        self.merge = merge
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

    def _forward(self, token: mx.array, offset: mx.array, *kv: mx.array) -> list[mx.array]:
        model = self.model
        inner = model.model
        h = inner.embed_tokens(token[None])  # [1, 1, D]
        cap = kv[0].shape[2]
        mask = (mx.arange(cap) <= offset)[None, None, None, :]
        start = offset.reshape(1)
        out_kv: list[mx.array] = []
        for i, layer in enumerate(inner.layers):
            attn = layer.self_attn
            x = layer.input_layernorm(h)
            qkv = self._qkv[i]
            q, k, v = qkv(x) if qkv is not None else (attn.q_proj(x), attn.k_proj(x), attn.v_proj(x))
            q = q.reshape(1, 1, attn.n_heads, -1).transpose(0, 2, 1, 3)
            k = k.reshape(1, 1, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
            v = v.reshape(1, 1, attn.n_kv_heads, -1).transpose(0, 2, 1, 3)
            q = attn.rope(q, offset=offset)
            k = attn.rope(k, offset=offset)
            keys = mx.slice_update(kv[2 * i], k.astype(kv[2 * i].dtype), start, axes=(2,))
            values = mx.slice_update(kv[2 * i + 1], v.astype(kv[2 * i + 1].dtype), start, axes=(2,))
            out_kv += [keys, values]
            o = mx.fast.scaled_dot_product_attention(q, keys, values, scale=attn.scale, mask=mask)
            h = h + attn.o_proj(o.transpose(0, 2, 1, 3).reshape(1, 1, -1))
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

    def step(self, token: mx.array, cache: list[KVCache]) -> mx.array:
        """Feed one token (shape [1]) at the cache's offset; returns logits [1, V]."""
        offset = cache[0].offset
        if cache[0].keys is None:
            raise ValueError("the fused step needs a prefilled cache")
        for c in cache:
            _ensure_capacity(c, offset + 1)
        kv = [a for c in cache for a in (c.keys, c.values)]
        logits, *new = self._fn(token.reshape(1), mx.array(offset, dtype=mx.int32), *kv)
        for j, c in enumerate(cache):
            c.keys, c.values = new[2 * j], new[2 * j + 1]
            c.offset = offset + 1
        return logits


SWIGLU_MLPS = (llama.MLP, qwen2.MLP)  # down(silu(gate(x)) * up(x)), known exactly


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
    """Grow the buffer in GROW-slot steps (zeros past the offset are masked anyway)."""
    cap = c.keys.shape[2]
    if need <= cap:
        return
    extra = ((need - cap + GROW - 1) // GROW) * GROW
    B, H, _, Dk = c.keys.shape
    Dv = c.values.shape[3]
    c.keys = mx.concatenate([c.keys, mx.zeros((B, H, extra, Dk), c.keys.dtype)], axis=2)
    c.values = mx.concatenate([c.values, mx.zeros((B, H, extra, Dv), c.values.dtype)], axis=2)
