"""One forward over a tree equals each path fed alone, and keeping a path leaves the cache the
path's nodes that are in place (the tree's first rows) for the next forward to feed the rest."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from core.primitives.cached_model import CachedModel
from core.primitives.token_tree import TokenTree
from core.primitives.tree_forward import _TREE_TYPES, forward_tree, supports_tree
from tests.helpers.tiny import VOCAB, tiny_llama

PROMPT = [5, 6, 7, 8, 9, 10, 11]
# root -> 3 -> 4 -> 2 ; root -> 3 -> 9 ; root -> 12 -> 13
TREE = TokenTree((3, 4, 2, 9, 12, 13), (-1, 0, 1, 0, -1, 4))


@pytest.fixture(scope="module")
def model():
    return tiny_llama(2, seed=3)


def _prefilled(model, upto: int) -> CachedModel:
    cm = CachedModel.fresh(model)
    cm.prefill(PROMPT[:upto])
    return cm


def _path_logits(model, tokens: list[int]) -> np.ndarray:
    cm = _prefilled(model, len(PROMPT) - 1)
    ids = mx.array([PROMPT[-1], *tokens], dtype=mx.uint32)
    return np.array(cm.forward(ids, VOCAB))


@pytest.mark.parametrize("pending", [1, 3])
def test_every_row_is_its_path_fed_alone(model, pending: int) -> None:
    cm = _prefilled(model, len(PROMPT) - pending)
    assert supports_tree(cm) is None
    got = np.array(forward_tree(cm, PROMPT[-pending:], TREE, VOCAB))
    assert got.shape == (TREE.size + 1, VOCAB)
    assert cm.offset() == len(PROMPT) + TREE.size  # every row fed
    for node in [-1, *range(TREE.size)]:
        toks = [TREE.tokens[i] for i in TREE.path(node)]
        want = _path_logits(model, toks)[-1]
        np.testing.assert_allclose(got[node + 1], want, atol=2e-4, err_msg=str(node))


def test_with_nothing_pending_the_rows_are_the_nodes(model) -> None:
    """A handed-off step already fed the root: the forward gives the nodes' rows alone."""
    cm = _prefilled(model, len(PROMPT))
    got = np.array(forward_tree(cm, [], TREE, VOCAB))
    assert got.shape == (TREE.size, VOCAB)
    for node in range(TREE.size):
        want = _path_logits(model, [TREE.tokens[i] for i in TREE.path(node)])[-1]
        np.testing.assert_allclose(got[node], want, atol=2e-4, err_msg=str(node))


def test_a_causal_mask_would_differ(model) -> None:
    """Control: a chain over the same rows (each node seeing every earlier row) gives node
    3's row another value, so the equality above needs the tree's mask."""
    cm = _prefilled(model, len(PROMPT) - 1)
    chain = np.array(cm.forward(mx.array([PROMPT[-1], *TREE.tokens], dtype=mx.uint32), VOCAB))
    want = _path_logits(model, [3, 9])[-1]
    assert np.abs(chain[4] - want).max() > 1e-2


@pytest.mark.parametrize("node", [2, 3, 5, -1])
def test_keeping_a_path_keeps_its_nodes_in_place_and_the_next_forward_feeds_the_rest(
    model, node: int
) -> None:
    """The cache keeps the path's leading nodes that are the first chain (node 2's path 0 1 2
    all of it; node 3's, 0 3, node 0; node 5's, 4 5, none; -1 none), and the next forward,
    fed the rest of the path before its own row, agrees with the path fed alone."""
    cm = _prefilled(model, len(PROMPT) - 1)
    forward_tree(cm, PROMPT[-1:], TREE, VOCAB)
    path = TREE.path(node)
    toks = [TREE.tokens[i] for i in path]
    cm.keep_tree_path(PROMPT[-1:], TREE.size, path, toks)
    in_place = {2: 3, 3: 1, 5: 0, -1: 0}[node]
    assert cm.seq == [*PROMPT, *toks[:in_place]] and cm.offset() == len(cm.seq)
    ref = _prefilled(model, len(PROMPT) - 1)
    ref.prefill([PROMPT[-1], *toks])
    nxt = mx.array([*toks[in_place:], 1], dtype=mx.uint32)
    np.testing.assert_allclose(np.array(cm.forward(nxt, VOCAB))[-1],
                               np.array(ref.forward(mx.array([1], dtype=mx.uint32), VOCAB))[-1],
                               atol=2e-4)


def test_layouts_without_a_tree_forward_are_named(model) -> None:
    cm = CachedModel.fresh(model)
    assert "llama" in _TREE_TYPES and supports_tree(cm) is None
    cm.model.args.model_type = "gemma"
    try:
        assert "no tree forward" in (supports_tree(cm) or "")
    finally:
        cm.model.args.model_type = "llama"


def test_under_the_cuda_rules_the_tree_goes_through_the_bucketed_call(model, monkeypatch) -> None:
    """On (a fake) CUDA with fused attention, the tree's mask reaches MLX padded to the row
    bucket over the cache's buffer (no shape of its own each round), with the same logits."""
    import core.dispatch.bucketed as bucketed
    from core.dispatch import BackendInfo, verification_patches

    ref = np.array(forward_tree(_prefilled(model, len(PROMPT) - 1), PROMPT[-1:], TREE, VOCAB))
    seen: list[tuple] = []
    real = mx.fast.scaled_dot_product_attention

    def spy(q, k, v, *, scale, mask=None, **kw):
        seen.append((q.shape[2], k.shape[2]))
        return real(q, k, v, scale=scale, mask=mask, **kw)

    cm = _prefilled(model, len(PROMPT) - 1)
    monkeypatch.setattr(bucketed.mx.fast, "scaled_dot_product_attention", spy)
    h200 = BackendInfo.cuda((9, 0), "NVIDIA H200")
    with verification_patches(cm.model, "auto", "fused", TREE.size + 1, backend=h200):
        got = np.array(forward_tree(cm, PROMPT[-1:], TREE, VOCAB))
    np.testing.assert_allclose(got, ref, atol=2e-4)
    assert seen and all(rows == 16 and keys == 256 for rows, keys in seen)
