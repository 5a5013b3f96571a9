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

NODE_BUDGET = 64  # most nodes a tree verifies (rows = nodes + 1)
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
    idx = start[:, None] + np.arange(depth)[None, :] % period[:, None]
    conts = occ.tokens[idx].tolist()
    kids: list[dict[int, int]] = [{}]  # per trie node (0: the root), token -> trie node
    tok: list[int] = [-1]
    par: list[int] = [-1]
    score: list[int] = [0]
    for cont in conts:
        at = 0
        for t in cont:
            nxt = kids[at].get(t)
            if nxt is None:
                if len(tok) > nodes:
                    break
                nxt = len(tok)
                kids[at][t] = nxt
                kids.append({})
                tok.append(t)
                par.append(at)
                score.append(0)
            score[nxt] += 1
            at = nxt
    return _preorder(kids, tok, score)


def _preorder(kids: list[dict[int, int]], tok: list[int], score: list[int]) -> TokenTree:
    """The trie as a TokenTree: depth-first, each node's children heaviest first (ties: the
    order they were made in, i.e. the longer, more recent match first)."""
    tokens: list[int] = []
    parents: list[int] = []
    scores: list[int] = []
    stack = [(c, -1) for c in sorted(kids[0].values(), key=lambda c: (score[c], -c))]
    while stack:
        node, parent = stack.pop()
        me = len(tokens)
        tokens.append(tok[node])
        parents.append(parent)
        scores.append(score[node])
        stack.extend((c, me) for c in sorted(kids[node].values(), key=lambda c: (score[c], -c)))
    return TokenTree(tuple(tokens), tuple(parents), tuple(scores))


def tree_nodes(curve: Any, k: int, budget: int = NODE_BUDGET) -> int:
    """How many nodes a tree of depth k may have: the most rows whose verification the curve
    prices within FLAT_SHARE of the chain's k + 1 rows, at least k, at most `budget`. No
    curve (a policy that reads none): the chain's k."""
    if curve is None or k <= 0:
        return max(k, 0)
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
        tree = build_tree(self.occ, request.k, tree_nodes(self.curve, request.k, self.budget),
                          self.min_match)
        if tree.size == 0:
            return empty_proposal(self.name)
        chain = list(tree.tokens[: tree.first_chain()])
        return Proposal(mx.array(chain, dtype=mx.uint32), None, self.name, origin="copied",
                        tree=None if tree.is_chain() else tree)

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
