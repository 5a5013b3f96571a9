"""Copies as a tree: the continuations of every earlier occurrence of the conversation's
longest repeat (then of shorter ones), merged into one token tree, verified in one forward.

The lookup (core.drafting.lookup) copies one chain: what followed the most recent occurrence.
Where the text forks (functions that share a body but differ in a name, a rename, a rewrite
that keeps most clauses) that chain is often the wrong branch. Here every occurrence's
continuation is a path of the tree; a node's score is how many occurrences continued through
it, and children are tried heaviest first, so the tree's first chain is the lookup's best
guess and the other branches are alternatives the same verification checks
(core.primitives.token_tree, core.primitives.tree_sampling).

How big: the cost-aware policy picks the depth k as for a copy (core.cost.policy.CopyRunPolicy);
the nodes are then as many as the calibrated curve says cost about what the chain's k + 1
rows cost (rows = nodes + 1), at most NODE_BUDGET. A tree with one branch is a chain (the
lookup's round), and a chain that does not pay is a plain step, as for every source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx
import numpy as np

from core.drafting.base import DraftRequest, Offer, Proposal, empty_proposal
from core.drafting.lookup import DEFAULT_MIN_MATCH, match_kind
from core.drafting.registry import DraftResources
from core.drafting.suffix_index import Occurrences, SuffixIndex
from core.primitives.token_tree import TokenTree

# Most nodes a tree verifies: rows = nodes + 1 = 64, the largest row bucket of the bucketed
# fused attention (core/dispatch/bucketed.py ROW_BUCKETS); past it a shape has its own plan.
NODE_BUDGET = 63
BRANCHES = 16  # most earlier occurrences merged into one tree
LONGEST = 64  # match lengths are measured up to this many tokens
# Extra nodes are taken while the curve prices their rows within this share of the chain's
# k + 1 rows: where a verification is host-bound (flat), a tree costs what its chain does.
FLAT_SHARE = 0.05


def build_tree(
    occ: Occurrences, depth: int, nodes: int, min_match: int = DEFAULT_MIN_MATCH,
    branches: int = BRANCHES,
) -> TokenTree:
    """The tree of continuations after the text held by `occ`: each earlier occurrence of its
    last tokens agreeing on at least `min_match` of them (longest first, then most recent),
    its next `depth` tokens (a run into the text's end repeats with its period, as the
    lookup's copy does), merged; at most `nodes` nodes, heaviest child first in preorder."""
    if depth <= 0 or nodes <= 0:
        return TokenTree((), ())
    ends, lengths = occ.repeats(branches, LONGEST)
    ends = ends[lengths >= min_match][:branches]
    if ends.size == 0:
        return TokenTree((), ())
    n = len(occ)
    start = ends + 1
    period = n - start  # >= 1: every end is earlier than the text's last token
    conts = occ.tokens[start[:, None] + np.arange(depth)[None, :] % period[:, None]]
    return merge(conts, nodes)


def merge(conts: np.ndarray, nodes: int) -> TokenTree:
    """The token tree of continuations `conts` [M, depth] (row order: priority, the longer
    and more recent match first), at most `nodes` nodes: each node's score is how many rows
    pass through it; siblings are ordered by score, then priority, and the tree is numbered
    in preorder, so its heaviest chain is its first nodes. Kept are the `nodes` best by
    (score, priority, depth): a parent always ranks before its child, so what is kept is a
    tree. NumPy over the [M, M, depth] prefix comparisons (M <= BRANCHES): no Python loop over
    nodes or tokens.

    Cell (i, j) of `conts` is the node of row i's first j + 1 tokens; the rows through it are
    those sharing that prefix, the first of them its priority, and the node is represented
    once, by the cell of that first row."""
    m, d = conts.shape
    cols = np.arange(d)
    eq = np.empty((m, m, d + 1), dtype=bool)  # a last column unequal: every prefix ends
    np.equal(conts[:, None, :], conts[None, :, :], out=eq[:, :, :d])
    eq[:, :, d] = False
    lcp = eq.argmin(axis=2)  # [i, k]: the prefix rows i and k share
    through = lcp[:, :, None] > cols  # [i, k, j]: row k passes through cell (i, j)'s node
    score = through.sum(axis=1)  # [i, j]
    prio = through.argmax(axis=1)  # [i, j]: the first row through it
    ri, rj = np.nonzero(prio == np.arange(m)[:, None])  # each node's own cell
    if ri.size > nodes:  # the best by (score, priority, depth); a node's cell has prio = ri
        best = np.lexsort((rj, ri, -score[ri, rj]))[:nodes]
        ri, rj = ri[best], rj[best]
    # preorder, heavier then earlier sibling first: sort the nodes by their paths' sibling
    # keys (1 + rank, 0 past the node's depth, so a node comes before its descendants); as
    # big-endian bytes a path compares as its keys do, one sort instead of a lexsort by column
    key = (m - score) * m + prio + 1  # <= m * m: two bytes
    path = np.where(cols <= rj[:, None], key[ri], 0).astype(">u2")
    order = np.argsort(path.view(f"V{2 * d}").ravel(), kind="stable")
    ri, rj = ri[order], rj[order]
    n = ri.size
    row = np.zeros((m, d), dtype=np.int64)  # a node's cell -> its verification row (1 + index)
    row[ri, rj] = np.arange(1, n + 1)
    row = row[prio, cols]  # every cell's node's row (0 where the budget dropped the node)
    parent = np.where(rj > 0, row[ri, rj - 1] - 1, -1)
    # the ancestors' matrix (token_tree.ancestors): row r sees the rows along its cells' path
    seen = np.zeros((n + 1, n + 1), dtype=bool)
    seen[:, 0] = True
    seen[np.arange(1, n + 1)[:, None], np.where(cols <= rj[:, None], row[ri], 0)] = True
    return TokenTree.preordered(tuple(conts[ri, rj].tolist()), tuple(parent.tolist()),
                                tuple(score[ri, rj].tolist()), tuple((rj + 1).tolist()), seen)


def tree_nodes(curve: Any, k: int, budget: int = NODE_BUDGET) -> int:
    """How many nodes a tree of depth k may have: the most rows whose verification the curve
    prices within FLAT_SHARE of the chain's k + 1 rows, at least k, at most `budget`, and
    never past the curve's largest measured row count (beyond it the curve extrapolates, and
    a flat curve's extrapolation is noise). No curve (a policy that reads none): the chain's k."""
    if curve is None or k <= 0:
        return max(k, 0)
    measured = getattr(curve, "rows", None)  # VerifyCostCurve.rows: the row counts timed
    if measured:
        budget = min(budget, max(measured) - 1)
    limit = curve.t_verify(k + 1) * (1.0 + FLAT_SHARE)
    best = k
    for n in range(k + 1, budget + 1):
        if curve.t_verify(n + 1) <= limit:
            best = n
    return best


class TreeDrafter:
    """Proposes a token tree of copies (a chain where the text never forked)."""

    name = "tree"
    copies = True  # the cost-aware policy picks the depth as for a copy's run

    def __init__(self, min_match: int = DEFAULT_MIN_MATCH, budget: int = NODE_BUDGET) -> None:
        self.min_match = min_match
        self.budget = budget
        self.index = SuffixIndex()
        self.occ = Occurrences()
        self.curve: Any = None
        # tree_nodes' answer per depth, for the curve and budget it was computed under
        self._sized: tuple[Any, int, dict[int, int]] = (None, budget, {})

    @classmethod
    def from_resources(cls, res: DraftResources) -> TreeDrafter:
        return cls()

    def configure(self, settings: Any) -> None:
        """The shortest repeat it copies from (Settings.lookup_min_match, as the lookup)."""
        self.min_match = settings.lookup_min_match

    def catch_up(self, seq: Sequence[int], chunk: int = 0, cancel: Any = None) -> int:
        """Index every committed token in both indexes (host work only)."""
        self.occ.sync(seq, len(self.occ))
        return self.index.sync(seq, len(self.index))

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        """As the lookup's: a copy after `seq` when its longest repeat is long enough (the
        policy's depth is capped by no single continuation: other branches may run on)."""
        self.catch_up(seq)
        match = self.index.longest_repeat()
        if match is None or match.length < self.min_match:
            return []
        return [Offer(self.name, None, match_kind(match.length))]

    def propose(self, request: DraftRequest) -> Proposal:
        """The tree of depth request.k, its nodes set by the curve (`tree_nodes`); its tokens
        are the heaviest chain (what a chain verification would feed), its `tree` the whole."""
        self.catch_up(request.seq)
        if request.k <= 0:
            return empty_proposal(self.name)
        tree = build_tree(self.occ, request.k, self.nodes_for(request.k), self.min_match)
        if tree.size == 0:
            return empty_proposal(self.name)
        chain = list(tree.tokens[: tree.first_chain()])
        return Proposal(mx.array(chain, dtype=mx.uint32), None, self.name, origin="copied",
                        tree=None if tree.is_chain() else tree)

    def nodes_for(self, k: int) -> int:
        """tree_nodes(curve, k, budget), computed once per depth while the curve and budget
        stay: it reads the curve once per candidate node count, ~80 µs at 64 nodes, more
        than the rest of a round's tree."""
        curve, budget, sizes = self._sized
        if curve is not self.curve or budget != self.budget:
            sizes = {}
            self._sized = (self.curve, self.budget, sizes)
        if k not in sizes:
            sizes[k] = tree_nodes(self.curve, k, self.budget)
        return sizes[k]

    def learn(self, proposed: Sequence[int], accepted: int) -> None:
        """Nothing: the committed tokens are indexed at the next catch-up."""

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        """Keep both indexes a prefix of the committed tokens."""
        self.index.truncate(_agree(self.index.tokens, committed, start))
        self.occ.truncate(_agree(self.occ.tokens, committed, start))

    def price(self, curve: Any) -> Callable[[int], float]:
        """Host time only; the curve is kept to size the tree (`tree_nodes`)."""
        self.curve = curve
        return lambda k: 0.0

    def state(self) -> dict[str, Any]:
        return {"seen": list(self.index.tokens)}


def _agree(held: Sequence[int], committed: Sequence[int], start: int) -> int:
    n = min(len(held), len(committed))
    i = min(start, n)
    while i < n and held[i] == committed[i]:
        i += 1
    return i
