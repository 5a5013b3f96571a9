"""A tree round's rows fit the largest row bucket of the bucketed fused attention, so a tree
verification never takes a shape of its own (core/dispatch/bucketed.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.decode.tree_round import fit_rows
from core.dispatch.bucketed import ROW_BUCKETS
from core.drafting.tree import NODE_BUDGET
from core.primitives.token_tree import TokenTree


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-1, 200), min_size=1, max_size=90), st.integers(0, 40))
def test_rows_fit_the_last_bucket_and_the_kept_nodes_are_a_preorder_prefix(
    raw: list[int], pending: int
) -> None:
    parents = tuple(min(p, i - 1) for i, p in enumerate(raw))  # each parent before its node
    tree = TokenTree(tuple(range(len(parents))), parents)
    fitted = fit_rows(tree, pending)
    if pending + tree.size <= ROW_BUCKETS[-1]:
        assert fitted is tree
    else:
        assert pending + fitted.size == max(ROW_BUCKETS[-1], pending + 1)
        assert fitted.tokens == tree.tokens[: fitted.size]
        assert fitted.parents == tree.parents[: fitted.size]
        assert fitted.depths == tree.depths[: fitted.size]


def test_the_widest_tree_with_its_root_is_the_last_bucket() -> None:
    """NODE_BUDGET nodes and the root: a full tree is never cut when one token is pending."""
    tree = TokenTree.chain(list(range(NODE_BUDGET)))
    assert fit_rows(tree, 1) is tree
    assert fit_rows(tree, 2).size == NODE_BUDGET - 1
