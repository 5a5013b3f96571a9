"""A token tree: several draft continuations sharing their prefixes, and how it is verified.

Nodes are numbered in depth-first preorder with each node's heaviest child first, so the tree's
heaviest chain is nodes 0..d-1: where the target accepts that chain, the accepted rows are a
prefix of the verified rows and the cache keeps them with a plain trim. Each node has one
parent (-1: the root, the last committed token, which the round feeds as its first row).

The verification feeds every node at once: row r of the forward is node r - 1 (row 0 the
root), at position offset + depth, seeing the committed context, its ancestors and itself
(`visible`). Everything here is host NumPy over the nodes (never over the vocabulary), built
once per round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TokenTree:
    """Draft tokens as a tree: `tokens[i]`, its `parents[i]` (-1: the root) and `scores[i]`,
    how many earlier occurrences continued through node i (its path's frequency)."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    scores: tuple[int, ...] = ()
    _depth: tuple[int, ...] = field(default=(), repr=False, compare=False)
    _preorder: bool = field(default=True, repr=False, compare=False)
    _anc: list[np.ndarray] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.parents) != len(self.tokens):
            raise ValueError("a tree needs one parent per token")
        if not self.scores:
            object.__setattr__(self, "scores", (1,) * len(self.tokens))
        if self._depth:  # `preordered`: a builder that numbered the tree knows its depths
            return
        depth: list[int] = []
        path: list[int] = []  # the path to the previous node: a preorder's parent is on it
        preorder = True
        for i, p in enumerate(self.parents):
            if not -1 <= p < i:
                raise ValueError("a node's parent must come before it")
            d = 1 if p < 0 else depth[p] + 1
            depth.append(d)
            del path[d - 1 :]
            preorder = preorder and (p == (path[-1] if path else -1))
            path.append(i)
        object.__setattr__(self, "_depth", tuple(depth))
        object.__setattr__(self, "_preorder", preorder)

    @classmethod
    def preordered(cls, tokens: tuple[int, ...], parents: tuple[int, ...],
                   scores: tuple[int, ...], depths: tuple[int, ...],
                   seen: np.ndarray | None = None) -> TokenTree:
        """A tree its builder numbered in preorder and whose depths (and optionally its
        `ancestors` matrix, `seen`) it knows: the merge of the continuations
        (core.drafting.tree). Taken as given, without the per-node walk that derives and
        checks the depths (a Python loop over the nodes) or the ancestors' [N + 1, N + 1]
        pass: at 64 nodes each is a sixth of a round's host work."""
        if not len(depths) == len(tokens) > 0:
            return cls(tokens, parents, scores)
        tree = cls(tokens, parents, scores, _depth=depths, _preorder=True)
        if seen is not None:
            seen.flags.writeable = False
            tree._anc.append(seen)
        return tree

    @classmethod
    def chain(cls, tokens: list[int] | tuple[int, ...]) -> TokenTree:
        """A single chain: node i's parent is node i - 1."""
        return cls(tuple(tokens), tuple(range(-1, len(tokens) - 1)))

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def depths(self) -> tuple[int, ...]:
        """Each node's depth (1 for a child of the root)."""
        return self._depth

    @property
    def depth(self) -> int:
        return max(self._depth, default=0)

    def is_chain(self) -> bool:
        return all(p == i - 1 for i, p in enumerate(self.parents))

    def first_chain(self) -> int:
        """How many leading nodes form the heaviest chain (node i the child of node i - 1)."""
        n = 0
        while n < self.size and self.parents[n] == n - 1:
            n += 1
        return n

    def path(self, node: int) -> list[int]:
        """The nodes from the root's child down to `node` (empty for the root, -1)."""
        out: list[int] = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]

    def children(self, node: int) -> list[int]:
        """`node`'s children in order (node -1: the root's)."""
        return [i for i, p in enumerate(self.parents) if p == node]

    def truncated(self, nodes: int) -> TokenTree:
        """The first `nodes` nodes in preorder: a subtree, since parents come first."""
        return TokenTree(self.tokens[:nodes], self.parents[:nodes], self.scores[:nodes])


def ancestors(tree: TokenTree) -> np.ndarray:
    """[N + 1, N + 1] bool over rows (row 0 the root, row i + 1 node i): row r sees row c
    where c is r or an ancestor of r, the root included. Built once per tree (read-only): in
    preorder a node's descendants are the run of deeper nodes right after it, so node c is
    an ancestor of r where c <= r < end(c), end(c) the first later node no deeper than c."""
    if tree._anc:
        return tree._anc[0]
    n = tree.size
    if tree._preorder and n:
        d = np.asarray(tree.depths)
        idx = np.arange(n + 1)
        after = np.empty((n, n + 1), dtype=bool)  # [c, k]: k after c and no deeper (k = n: end)
        np.less_equal(d[None, :], d[:, None], out=after[:, :n])
        after[:, :n] &= idx[None, :n] > idx[:n, None]
        after[:, n] = True
        end = after.argmax(axis=1) + 1  # in rows
        seen = (idx[None, 1:] <= idx[:, None]) & (idx[:, None] < end[None, :])
        seen = np.concatenate([np.ones((n + 1, 1), dtype=bool), seen], axis=1)
    else:
        seen = np.zeros((n + 1, n + 1), dtype=bool)
        seen[:, 0] = True
        for i, p in enumerate(tree.parents):
            seen[i + 1] = seen[p + 1]
            seen[i + 1, i + 1] = True
    seen.flags.writeable = False
    tree._anc.append(seen)
    return seen


def row_positions(tree: TokenTree, offset: int, pending: int = 1) -> np.ndarray:
    """Position of each row of the verification: `pending` committed tokens fed first (the
    last of them the root) at offset .. offset + pending - 1, then each node at the root's
    position plus its depth."""
    root = offset + pending - 1
    return np.concatenate([np.arange(offset, root + 1), root + np.asarray(tree.depths, np.int64)
                           ]).astype(np.int32)


def visible(tree: TokenTree, pending: int = 1) -> np.ndarray:
    """The verification's attention mask over its own rows, [pending + N, pending + N] bool:
    the pending rows causally, each node its ancestors and itself among the nodes (every row
    also sees the whole cached context, which the forward prepends on the device, so this
    host work does not grow with the conversation)."""
    if pending == 1:  # the root is the pending row: the mask is the ancestors' matrix
        return ancestors(tree)
    n = tree.size
    rows = pending + n
    mask = np.zeros((rows, rows), dtype=bool)
    mask[:pending, :pending] = np.tril(np.ones((pending, pending), dtype=bool))
    mask[pending:, :pending] = True
    mask[pending:, pending:] = ancestors(tree)[1:, 1:]  # row 0 is the root, the last pending
    return mask
