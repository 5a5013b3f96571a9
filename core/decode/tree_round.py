"""A tree round's verification: the whole token tree in one target forward, accepted on the
device with one host read, the accepted path's cache rows kept and the rest dropped.

Beside core/decode/speculative.py, which drafts, commits and reports every round; this is what
differs when the proposal is a tree (core.drafting.tree): the rows (core.primitives.tree_forward),
the rule (core.primitives.tree_sampling) and the cache (CachedModel.keep_tree_path).
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx

from core.decode.run_state import RoundKit
from core.decode.trace import RoundTimer
from core.dispatch.bucketed import ROW_BUCKETS
from core.primitives.sampling import LogitsConfig, to_probs
from core.primitives.token_tree import TokenTree
from core.primitives.tree_forward import forward_tree, supports_tree
from core.primitives.tree_sampling import (
    TreeArrays,
    accept_tree_greedy_packed,
    accept_tree_lossless_packed,
)
from core.settings import Settings


@dataclass(frozen=True)
class TreeVerdict:
    """What the round read: the accepted path (node indices), the next token, and rows fed."""

    path: list[int]
    next_token: int
    rows: int
    at_leaf: bool  # the path ran to the end of its branch: the next token is a bonus


def tree_to_verify(tree: TokenTree | None, kit: RoundKit, s: Settings, cfg: LogitsConfig,
                   penalised: bool) -> TokenTree | None:
    """The tree to verify as a tree, or None for its heaviest chain: the mentored rule is for
    chains only, a repetition penalty's window follows one sequence of rows, and a model
    without a tree forward (supports_tree) verifies the chain."""
    if tree is None or penalised:
        return None
    if not cfg.greedy and s.rule != "lossless":
        return None
    if supports_tree(kit.target) is not None:
        return None
    return tree


def fit_rows(tree: TokenTree, pending: int) -> TokenTree:
    """The tree's first nodes in preorder (a subtree) such that the verification's rows, the
    `pending` committed tokens and the nodes, fit the largest row bucket: past it CUDA's
    fused attention takes a shape of its own, a cuDNN plan built anew at each KV buffer size
    (core/dispatch/bucketed.py)."""
    room = max(ROW_BUCKETS[-1] - pending, 1)
    return tree if tree.size <= room else tree.truncated(room)


def verify_tree(
    kit: RoundKit, seq: list[int], tree: TokenTree, cfg: LogitsConfig, key: mx.array | None,
    row0: mx.array | None, timer: RoundTimer, s: Settings,
) -> TreeVerdict:
    """Feed the pending committed tokens and every node (inside RoundKit.verify_context: the
    verification's dispatch patches), accept, read once, and keep the path's cache rows that
    are in place (CachedModel.keep_tree_path: the next forward feeds the rest)."""
    t = kit.target
    pending = seq[len(t.seq) :]
    assert row0 is None or not pending, "a handed-off step has fed every committed token"
    arrays = TreeArrays.of(tree, sampled=not cfg.greedy)
    rows = len(pending) + tree.size
    with kit.verify_context(s, rows):
        logits = forward_tree(t, pending, tree, kit.vocab_size)
    if row0 is not None:
        logits = mx.concatenate([row0, logits], axis=0)
    timer.mark("verify", logits)
    if cfg.greedy:
        packed = kit.agreed(accept_tree_greedy_packed(logits, arrays))
        mx.eval(packed)
        vals = packed.tolist()
        best = vals[-1]
        nxt = vals[best]
    else:
        assert key is not None
        packed = kit.agreed(accept_tree_lossless_packed(to_probs(logits, cfg), arrays, key))
        mx.eval(packed)
        best, nxt = packed.tolist()
    timer.mark("sample")
    path = tree.path(best - 1)
    t.keep_tree_path(pending, tree.size, path, [tree.tokens[i] for i in path])
    return TreeVerdict(path, nxt, rows, not tree.children(best - 1))


def rejected_branches(tree: TokenTree, path: list[int]) -> tuple[tuple[int, ...], ...]:
    """The branches the target turned down where the accepted path stopped (the children of
    its last node, heaviest first), each as its heaviest chain's tokens: what `r` shows at
    the correction."""
    out = []
    for c in tree.children(path[-1] if path else -1):
        chain, at = [], c
        while at is not None:
            chain.append(tree.tokens[at])
            kids = tree.children(at)
            at = kids[0] if kids else None
        out.append(tuple(chain))
    return tuple(out)
