"""The tree's structure as the verification sees it: ancestors, positions by depth, the mask."""

from __future__ import annotations

import numpy as np
import pytest

from core.primitives.token_tree import (
    TokenTree,
    ancestors,
    row_positions,
    visible,
)

# root -> 5 -> 6 -> 7 ; root -> 5 -> 8 ; root -> 9
TREE = TokenTree((5, 6, 7, 8, 9), (-1, 0, 1, 0, -1), (3, 2, 2, 1, 1))


def test_depths_chain_and_paths() -> None:
    assert TREE.depths == (1, 2, 3, 2, 1)
    assert TREE.first_chain() == 3 and not TREE.is_chain()
    assert TREE.path(3) == [0, 3] and TREE.children(-1) == [0, 4]
    assert TokenTree.chain([4, 4, 4]).is_chain()
    with pytest.raises(ValueError):
        TokenTree((1, 2), (1, -1))


def test_ancestors_and_mask_rows() -> None:
    anc = ancestors(TREE)
    assert anc[4].tolist() == [True, True, False, False, True, False]  # node 3: root, 0, itself
    m = visible(TREE, pending=2)
    assert m.shape == (7, 7)
    assert m[0].tolist() == [True] + [False] * 6  # the first pending row is causal
    assert m[5, 2:].tolist() == [True, False, False, True, False]  # node 3: node 0 and itself
    assert m[:, :2].sum() == 1 + 2 * 6  # every later row sees both pending rows
    assert row_positions(TREE, offset=4, pending=2).tolist() == [4, 5, 6, 7, 8, 7, 6]


def test_ancestors_of_a_tree_not_in_preorder_are_the_same() -> None:
    """The preorder shortcut against the general walk: the same tree numbered breadth-first."""
    bfs = TokenTree((5, 9, 6, 8, 7), (-1, -1, 0, 0, 2))
    assert not bfs._preorder and TREE._preorder
    order = [0, 4, 1, 3, 2]  # TREE's node of each BFS node
    want = ancestors(TREE)[np.ix_([0, *[o + 1 for o in order]], [0, *[o + 1 for o in order]])]
    assert (ancestors(bfs) == want).all()
