"""One forward over a token tree: every node a row, at its depth's position, seeing only the
committed context and its own ancestors.

mlx-lm's models build a causal mask and rotate each row at `cache.offset + row`; a tree
needs neither. So the forward runs the model's own blocks with a boolean mask of the tree
(core.primitives.token_tree.visible) and, for as long as it runs, each attention's RoPE
module wrapped to rotate row r at its own position: mx.fast.rope takes one offset per batch
entry, so the rows become the batch for the rotation and go back after it. Only layouts
whose blocks are plain KV-cached attention with one RoPE are taken (`supports_tree`);
another model's tree round is verified as its heaviest chain.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm.models.cache import KVCache

from core.primitives import introspect
from core.primitives.cached_model import CachedModel
from core.primitives.token_tree import TokenTree, row_positions, visible

_TREE_TYPES = ("llama", "qwen2", "qwen3", "mistral")


def supports_tree(cm: CachedModel) -> str | None:
    """None when a tree can be verified on this model and cache, else why not."""
    kind = getattr(getattr(cm.model, "args", None), "model_type", None)
    if kind not in _TREE_TYPES:
        return f"model type {kind!r} has no tree forward"
    blocks = introspect.layers(cm.model)
    if not blocks or any(getattr(b, "use_sliding", False) for b in blocks):
        return "sliding-window layers"
    if not all(type(c) is KVCache for c in cm.cache):
        return "a cache other than mlx-lm's KVCache"
    if not all(hasattr(getattr(b, "self_attn", None), "rope") for b in blocks):
        return "an attention without a RoPE module"
    return None


class _RowRope(nn.Module):
    """A RoPE module rotating each row at its own position (`positions`, one per row)."""

    def __init__(self, rope: Any, positions: mx.array) -> None:
        super().__init__()
        self.inner = rope
        self.positions = positions

    def __call__(self, x: mx.array, offset: Any = 0) -> mx.array:
        # [B, H, L, D] -> [L, H, B, D]: one batch entry per row, each at its own offset
        return self.inner(x.transpose(2, 1, 0, 3), offset=self.positions).transpose(2, 1, 0, 3)


@contextmanager
def _rows_at(blocks: list[Any], positions: mx.array) -> Iterator[None]:
    ropes = [b.self_attn.rope for b in blocks]
    try:
        for b, r in zip(blocks, ropes, strict=True):
            b.self_attn.rope = _RowRope(r, positions)
        yield
    finally:
        for b, r in zip(blocks, ropes, strict=True):
            b.self_attn.rope = r


def forward_tree(cm: CachedModel, pending: list[int], tree: TokenTree, vocab: int) -> mx.array:
    """Logits [N + 1, vocab]: the root's row (the last of `pending`, the committed tokens the
    cache does not hold yet) then one row per node; [N, vocab], the nodes' rows only, where
    nothing is pending (a handed-off step fed the root and holds its row). The cache
    advances by every row fed (len(pending) + N); `keep_tree_path` keeps the accepted path's."""
    offset = cm.offset()
    p = len(pending)
    ids = mx.array([*pending, *tree.tokens], dtype=mx.uint32)
    positions = mx.array(row_positions(tree, offset, p))
    own = mx.array(visible(tree, p))
    mask = mx.concatenate([mx.ones((own.shape[0], offset), dtype=mx.bool_), own], axis=1)
    inner = introspect.body(cm.model)
    assert inner is not None
    blocks = introspect.layers(cm.model)
    h = inner.embed_tokens(ids[None])
    with _rows_at(blocks, positions):
        for block, c in zip(blocks, cm.cache, strict=True):
            h = block(h, mask, cache=c)
    h = inner.norm(h[:, max(p - 1, 0) :])
    if introspect.tied_embeddings(cm.model):
        out = inner.embed_tokens.as_linear(h)
    else:
        out = cm.model.lm_head(h)
    return out[0, :, :vocab]


def path_rows(tree: TokenTree, node: int) -> np.ndarray:
    """The node rows (0-based among the nodes) of the path ending at `node` (-1: none)."""
    return np.asarray(tree.path(node), dtype=np.int64)
