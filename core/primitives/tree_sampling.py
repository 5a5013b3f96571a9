"""The acceptance rules on a token tree, on the device, with one host read per round.

Rows are the verification's (core.primitives.token_tree): row 0 the root (the last committed
token), row i + 1 node i, so node i's target distribution is the row of its parent.

  greedy    the longest path on which every node is the target's argmax at its parent's row;
            the next token is the argmax at the path's last row. Siblings carry distinct
            tokens, so at most one child of a row matches: the path is unique.
  lossless  recursive rejection over a row's children with deterministic drafts (q one-hot):
            child c_1 is accepted with probability p(x_1); if rejected the distribution left is
            p without x_1, renormalised, and c_2 is tried against it (p(x_2) / (1 - p(x_1))),
            and so on. The first accepted child is descended into; when all are rejected the
            token is drawn from p without the children's tokens. Each emitted token therefore
            follows the target's p exactly (multi-draft speculative sampling, SpecTr/SpecInfer
            with deterministic drafts), which `output_distribution` enumerates for the tests.
  mentored  chains only: a tree under the mentored rule is verified as its heaviest chain
            (core.decode.speculative), whose rule is core.primitives.sampling's.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from core.primitives.sampling import sample
from core.primitives.token_tree import TokenTree, ancestors


@dataclass(frozen=True)
class TreeArrays:
    """A tree's structure on the device, built once per round from the tree's tuples and
    its ancestors' matrix (the rest is device ops, evaluated with the verification)."""

    tokens: mx.array  # [N] node tokens
    parent_rows: mx.array  # [N] the row of each node's parent (0: the root)
    path_of: mx.array  # [N, N] float: path_of[i, j] = 1 where j is i or an ancestor of i
    depths: mx.array  # [N] depth of each node
    earlier: mx.array | None  # [N, N] float: earlier siblings (the lossless rule's only)

    @classmethod
    def of(cls, tree: TokenTree, sampled: bool = True) -> TreeArrays:
        """The arrays; `sampled` False (greedy) leaves out what only the lossless rule reads."""
        parents = mx.array(tree.parents, dtype=mx.int32)
        return cls(  # from the tuples directly: a NumPy copy first costs a few µs each
            mx.array(tree.tokens, dtype=mx.int32),
            parents + 1,
            mx.array(ancestors(tree)[1:, 1:]).astype(mx.float32),
            mx.array(tree.depths, dtype=mx.int32),
            _earlier(parents) if sampled else None,
        )


def _earlier(parents: mx.array) -> mx.array:
    """[N, N] float: E[i, j] = 1 where j is a sibling tried before i (same parent, j < i).
    Device ops, evaluated with the verification: the same on the host over [N, N] costs
    ~10 µs a round at 64 nodes."""
    idx = mx.arange(parents.size)
    same = parents[:, None] == parents[None, :]
    return (same & (idx[None, :] < idx[:, None])).astype(mx.float32)


def _deepest(ok: mx.array, arrays: TreeArrays) -> mx.array:
    """The row of the deepest node whose whole path is `ok` (0, the root, if none)."""
    if ok.size == 0:
        return mx.array(0, dtype=mx.int32)
    bad = (1.0 - ok.astype(mx.float32))[:, None]
    path_ok = (arrays.path_of @ bad)[:, 0] == 0
    score = mx.where(path_ok, arrays.depths, 0)
    best = mx.argmax(score)
    return mx.where(score[best] > 0, best + 1, 0).astype(mx.int32)


def accept_tree_greedy_packed(logits: mx.array, arrays: TreeArrays) -> mx.array:
    """[argmax per row (N + 1), the accepted path's last row]: the host reads the path from the
    tree and the next token as the argmax at that row."""
    top = mx.argmax(logits, axis=-1).astype(mx.int32)
    match = arrays.tokens == mx.take(top, arrays.parent_rows)
    return mx.concatenate([top, _deepest(match, arrays)[None]])


def accept_tree_lossless_packed(p: mx.array, arrays: TreeArrays, key: mx.array) -> mx.array:
    """[the accepted path's last row, the next token], by recursive rejection over each row's
    children (p: [N + 1, V] target probabilities per row)."""
    assert arrays.earlier is not None, "built with sampled=True"
    k_u, k_r = mx.random.split(key, 2)
    if arrays.tokens.size == 0:
        return mx.stack([mx.array(0, dtype=mx.int32), sample(p[:1], k_r)[0].astype(mx.int32)])
    px = p[arrays.parent_rows, arrays.tokens]  # each child's mass at its parent's row
    left = 1.0 - arrays.earlier @ px  # mass not yet rejected when child i is tried
    a = mx.where(left > 0, mx.minimum(px / mx.where(left > 0, left, 1.0), 1.0), 0.0)
    u = mx.random.uniform(shape=px.shape, key=k_u)
    accepted = (u < a).astype(mx.float32)
    first = (accepted > 0) & ((arrays.earlier @ accepted) == 0)  # tried and kept first
    best = _deepest(first, arrays)
    row = mx.take(p, best, axis=0)
    # the tokens of `best`'s children (the others scatter into a slot past the vocabulary)
    vocab = p.shape[-1]
    kids = mx.where(arrays.parent_rows == best, arrays.tokens, vocab)
    tried = mx.zeros((vocab + 1,), dtype=mx.float32).at[kids].add(1.0)[:vocab] > 0
    res = mx.where(tried, 0.0, row)
    s = res.sum()
    res = mx.where(s > 0, res / mx.where(s > 0, s, 1.0), row)
    nxt = sample(res[None], k_r)[0].astype(mx.int32)
    return mx.stack([best, nxt])


def child_acceptance(p_row: np.ndarray, child_tokens: list[int]) -> list[float]:
    """The recursive rule's acceptance probability of each child, given it is tried: p(x_i)
    over the mass its earlier siblings' rejections left (host NumPy, for the enumeration)."""
    out, used = [], 0.0
    for x in child_tokens:
        left = 1.0 - used
        out.append(min(float(p_row[x]) / left, 1.0) if left > 0 else 0.0)
        used += float(p_row[x])
    return out


def output_distribution(
    p_rows: np.ndarray, tree: TokenTree
) -> dict[tuple[int, ...], float]:
    """Exact distribution of the tokens one lossless round emits (the accepted path, then the
    next token), by enumerating the rule's outcomes: every child accepted or rejected in turn,
    then the residual. `p_rows[r]` is the target's distribution at row r."""
    out: dict[tuple[int, ...], float] = {}
    vocab = p_rows.shape[-1]

    def walk(row: int, prefix: tuple[int, ...], reach: float) -> None:
        kids = tree.children(row - 1)
        toks = [tree.tokens[c] for c in kids]
        stay = reach
        for c, a in zip(kids, child_acceptance(p_rows[row], toks), strict=True):
            walk(c + 1, (*prefix, tree.tokens[c]), stay * a)
            stay *= 1.0 - a
        res = np.array(p_rows[row], dtype=np.float64)
        res[toks] = 0.0
        total = res.sum()
        res = res / total if total > 0 else np.array(p_rows[row], dtype=np.float64)
        for y in range(vocab):
            if res[y] > 0 and stay > 0:
                out[(*prefix, y)] = out.get((*prefix, y), 0.0) + stay * res[y]

    walk(0, (), 1.0)
    return out


def target_distribution(
    p_rows: np.ndarray, tree: TokenTree
) -> dict[tuple[int, ...], float]:
    """What the target alone gives the same sequences: each token's probability at the row it
    is drawn from, multiplied along the sequence (the tree's rows hold the target's
    conditionals along each of its paths)."""
    out: dict[tuple[int, ...], float] = {}
    vocab = p_rows.shape[-1]

    def walk(row: int, prefix: tuple[int, ...], prob: float) -> None:
        kids = {tree.tokens[c]: c for c in tree.children(row - 1)}
        for y in range(vocab):
            py = prob * float(p_rows[row][y])
            if y in kids:
                walk(kids[y] + 1, (*prefix, y), py)
            elif py > 0:
                out[(*prefix, y)] = py

    walk(0, (), 1.0)
    return out
