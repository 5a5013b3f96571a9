"""The tree acceptance rules: lossless exact by enumeration (every tree and target law), its
device sampler matching the enumeration (seeded chi-square), greedy equal to a walk."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.primitives import tree_sampling
from core.primitives.token_tree import TokenTree
from core.primitives.tree_sampling import (
    TreeArrays,
    accept_tree_greedy_packed,
    accept_tree_lossless_packed,
    output_distribution,
    target_distribution,
)
from tests.helpers.tiny import assert_matches, assert_rejects

# root -> a(1) -> b(2) -> c(0); root -> d(3); a -> e(0); root -> f(0)
FORK = TokenTree((1, 2, 0, 0, 3, 0), (-1, 0, 1, 0, -1, -1))


def _laws(rng: np.random.Generator, rows: int, vocab: int, peaky: float = 2.0) -> np.ndarray:
    p = rng.dirichlet(np.full(vocab, 1.0 / peaky), size=rows)
    return p / p.sum(axis=1, keepdims=True)


def _same(a: dict, b: dict) -> None:
    for key in set(a) | set(b):  # a cell one side lacks has mass 0 there (rounding aside)
        assert a.get(key, 0.0) == pytest.approx(b.get(key, 0.0), abs=1e-12), key


def test_lossless_on_a_fork_is_the_target_by_enumeration() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = _laws(rng, FORK.size + 1, 4)
        _same(output_distribution(p, FORK), target_distribution(p, FORK))


def test_the_enumeration_sees_a_wrong_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: trying each child with p(x) itself, not against the residual the rejected
    siblings left, changes the law (so the equality above is a real check)."""
    monkeypatch.setattr(tree_sampling, "child_acceptance",
                        lambda p_row, toks: [float(p_row[x]) for x in toks])
    p = _laws(np.random.default_rng(1), FORK.size + 1, 4)
    got, want = output_distribution(p, FORK), target_distribution(p, FORK)
    assert max(abs(got[k] - want[k]) for k in want) > 1e-3


@st.composite
def _trees(draw: st.DrawFn) -> tuple[TokenTree, int]:
    vocab = draw(st.integers(2, 5))
    n = draw(st.integers(0, 7))
    tokens: list[int] = []
    parents: list[int] = []
    for i in range(n):
        p = draw(st.integers(-1, i - 1))
        used = {tokens[j] for j in range(i) if parents[j] == p}
        free = [t for t in range(vocab) if t not in used]
        if not free:
            break
        parents.append(p)
        tokens.append(draw(st.sampled_from(free)))
    # preorder is what the drafter builds; any parent-first order is verified the same way
    return TokenTree(tuple(tokens), tuple(parents)), vocab


@settings(max_examples=150, deadline=None)
@given(_trees(), st.integers(0, 2**32 - 1))
def test_lossless_is_the_target_on_any_tree(case: tuple[TokenTree, int], seed: int) -> None:
    tree, vocab = case
    rng = np.random.default_rng(seed)
    p = _laws(rng, tree.size + 1, vocab, peaky=float(rng.uniform(0.5, 8)))
    if rng.random() < 0.3:  # a row with zeros: top-p cut, or all mass on drafted tokens
        p[0, rng.integers(vocab)] = 0.0
        p[0] /= p[0].sum()
    _same(output_distribution(p, tree), target_distribution(p, tree))


def _greedy_walk(p: np.ndarray, tree: TokenTree) -> tuple[list[int], int]:
    row, out = 0, []
    while True:
        top = int(np.argmax(p[row]))
        nxt = [c for c in tree.children(row - 1) if tree.tokens[c] == top]
        if not nxt:
            return out, top
        out.append(top)
        row = nxt[0] + 1


@settings(max_examples=80, deadline=None)
@given(_trees(), st.integers(0, 2**32 - 1))
def test_greedy_is_the_argmax_walk(case: tuple[TokenTree, int], seed: int) -> None:
    tree, vocab = case
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(tree.size + 1, vocab)).astype(np.float32)
    # steer some rows onto a child so long paths are exercised
    for i, par in enumerate(tree.parents):
        if rng.random() < 0.6:
            logits[par + 1, tree.tokens[i]] = 10.0 + rng.random()
    packed = accept_tree_greedy_packed(mx.array(logits), TreeArrays.of(tree)).tolist()
    best = packed[-1]
    path = [tree.tokens[i] for i in tree.path(best - 1)]
    want_path, want_next = _greedy_walk(logits, tree)
    assert (path, packed[best]) == (want_path, want_next)


def _outcome_counts(p: np.ndarray, tree: TokenTree, trials: int, seed: int) -> dict:
    arrays, pm = TreeArrays.of(tree), mx.array(p.astype(np.float32))
    counts: dict[tuple[int, ...], int] = {}
    for key in mx.random.split(mx.random.key(seed), trials):
        best, nxt = accept_tree_lossless_packed(pm, arrays, key).tolist()
        seq = (*[tree.tokens[i] for i in tree.path(best - 1)], nxt)
        counts[seq] = counts.get(seq, 0) + 1
    return counts


def test_the_device_sampler_follows_the_enumeration() -> None:
    """Seeded: the MLX rule's emitted sequences against the exact law (chi-square, 1e-3), and
    the same counts reject a law that differs (the test has power)."""
    p = _laws(np.random.default_rng(7), FORK.size + 1, 4, peaky=1.0)
    want = target_distribution(p, FORK)
    counts = _outcome_counts(p, FORK, 4000, seed=3)
    keys = sorted(want)
    assert set(counts) <= set(want)
    observed = np.array([counts.get(k, 0) for k in keys])
    assert_matches(observed, np.array([want[k] for k in keys]), "lossless tree")
    wrong = target_distribution(_laws(np.random.default_rng(8), FORK.size + 1, 4), FORK)
    assert_rejects(observed, np.array([wrong[k] for k in keys]), "another law")


def test_a_row_whose_mass_is_all_on_rejected_children_falls_back_to_the_row() -> None:
    tree = TokenTree((0, 1), (-1, -1))
    p = np.array([[0.5, 0.5, 0.0], [1, 0, 0], [1, 0, 0]], dtype=np.float32)
    for key in mx.random.split(mx.random.key(0), 50):
        best, nxt = accept_tree_lossless_packed(mx.array(p), TreeArrays.of(tree), key).tolist()
        assert best in (1, 2) and nxt == 0  # a child is always taken: its mass is all of p


def test_the_earlier_siblings_on_the_device() -> None:
    """E[i, j]: j is a sibling tried before i (root -> 5 -> {6 -> 7, 8}; root -> 9)."""
    tree = TokenTree((5, 6, 7, 8, 9), (-1, 0, 1, 0, -1), (3, 2, 2, 1, 1))
    e = np.array(TreeArrays.of(tree).earlier)
    assert np.argwhere(e).tolist() == [[3, 1], [4, 0]]
    assert TreeArrays.of(tree, sampled=False).earlier is None
