"""The tree source: occurrences and their match lengths against a scan, trees merged from
them within their budget, and in the engine: greedy equals target-only, lossless keeps the
target's law, the cache holds the committed text after tree rounds."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.decode.engine import Engine
from core.decode.run_state import logits_config
from core.drafting.suffix_index import Occurrences
from core.drafting.tree import TreeDrafter, build_tree, merge, tree_nodes
from core.primitives.token_tree import TokenTree, ancestors
from core.settings import Settings
from tests.helpers.engine import assert_caches, exact_pair_law, run
from tests.helpers.tiny import VOCAB, assert_matches

# "1 2 3" occurs three times before the end, followed by 4 5 / 7 8 / 4 6
FORKED = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 9, 1, 2, 3, 4, 6, 9, 1, 2, 3]


def _scan(tokens: list[int]) -> list[tuple[int, int]]:
    """(end, length) of every earlier end of the last pair, by brute force."""
    n = len(tokens)
    out = []
    for e in range(1, n - 1):
        if tokens[e - 1 : e + 1] == tokens[n - 2 :]:
            length = 0
            while length <= e and tokens[e - length] == tokens[n - 1 - length]:
                length += 1
            out.append((e, length))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=50), st.integers(0, 50))
def test_repeats_are_every_earlier_pair_with_its_length(tokens: list[int], cut: int) -> None:
    occ = Occurrences(tokens)
    occ.sync(tokens[:cut] + [1, 2])  # a rewind and more tokens, as a round does
    text = tokens[:cut] + [1, 2]
    ends, lengths = occ.repeats(64, 64)
    want = sorted(_scan(text), key=lambda el: (-el[1], -el[0]))
    assert list(zip(ends.tolist(), lengths.tolist(), strict=True)) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=4, max_size=4), min_size=1, max_size=9),
       st.integers(1, 40))
def test_merge_is_the_trie_of_its_rows(rows: list[list[int]], budget: int) -> None:
    """Against the trie's definition: every prefix of a row is a node whose score counts the
    rows through it; siblings heaviest first (ties: the earlier row); preorder; a budget
    keeps the best nodes by (score, earliest row, depth), which is a tree."""
    tree = merge(np.array(rows), budget)
    walked = TokenTree(tree.tokens, tree.parents, tree.scores)  # depths, ancestors derived
    assert tree.depths == walked.depths and tree._preorder == walked._preorder
    assert (ancestors(tree) == ancestors(walked)).all()
    prefixes: dict[tuple[int, ...], tuple[int, int]] = {}  # prefix -> (rows through, first row)
    for r, row in enumerate(rows):
        for d in range(1, len(row) + 1):
            cnt, first = prefixes.get(tuple(row[:d]), (0, r))
            prefixes[tuple(row[:d])] = (cnt + 1, min(first, r))
    ranked = sorted(prefixes, key=lambda p: (-prefixes[p][0], prefixes[p][1], len(p)))
    want = set(ranked[:budget])
    got = {tuple(tree.tokens[i] for i in tree.path(n)): tree.scores[n] for n in range(tree.size)}
    assert set(got) == want
    assert all(got[p] == prefixes[p][0] for p in got)
    for node in [-1, *range(tree.size)]:
        kids = tree.children(node)
        keys = [(-tree.scores[c], prefixes[tuple(tree.tokens[i] for i in tree.path(c))][1])
                for c in kids]
        assert keys == sorted(keys)
        # preorder: a node's subtree is the run of nodes right after it
        if node >= 0:
            sub = [n for n in range(tree.size) if node in tree.path(n)]
            assert sub == list(range(node, node + len(sub)))


def test_the_tree_merges_every_continuation_heaviest_first() -> None:
    tree = build_tree(Occurrences(FORKED), depth=3, nodes=64)
    # 4 6 9 | 4 5 9 | 7 8 9: "4" followed twice, then its most recent continuation first
    assert tree.tokens == (4, 6, 9, 5, 9, 7, 8, 9)
    assert tree.parents == (-1, 0, 1, 0, 3, -1, 5, 6)
    assert tree.scores[0] == 2 and tree.first_chain() == 3 and tree.depth == 3
    assert build_tree(Occurrences(FORKED), depth=3, nodes=2).size <= 3  # the budget holds
    assert build_tree(Occurrences([1, 2, 3, 4]), depth=3, nodes=8).size == 0


def test_shorter_repeats_come_in_after_the_longest() -> None:
    """The longest repeat ("0 1 2 3") occurred once; a shorter one ("2 3") adds a branch."""
    text = [0, 1, 2, 3, 5, 9, 2, 3, 6, 9, 0, 1, 2, 3]
    tree = build_tree(Occurrences(text), depth=2, nodes=16)
    assert [tree.tokens[i] for i in tree.children(-1)] == [5, 6]
    assert build_tree(Occurrences(text), depth=2, nodes=16, min_match=3).size == 2  # chain


class _Flat:
    def t_verify(self, rows: int) -> float:
        return 1.0 if rows <= 24 else 1.0 + rows / 10


class _Measured(_Flat):
    rows = (1, 2, 9, 17)  # as VerifyCostCurve.rows: the row counts a calibration timed


def test_nodes_by_the_curve() -> None:
    assert tree_nodes(None, 5) == 5  # no curve: the chain
    assert tree_nodes(_Flat(), 5) == 23  # rows = nodes + 1 within the flat part
    assert tree_nodes(_Flat(), 5, budget=10) == 10
    assert tree_nodes(_Measured(), 5) == 16  # no more rows than the curve measured
    from core.dispatch.curve import VerifyCostCurve

    def curve(t33: float) -> VerifyCostCurve:
        return VerifyCostCurve.from_dict({"times": {"auto": {"1": 1.0, "9": 1.0, "17": 1.02,
                                                             "33": t33}},
                                          "backend": "cuda", "context_len": 512})

    assert tree_nodes(curve(1.04), 8) == 32  # k_max 32's calibration: 33 rows, not past them
    assert tree_nodes(curve(1.20), 8) == 18  # 19 rows: 5% over the chain's 9 rows


class _Counted(_Flat):
    calls = 0

    def t_verify(self, rows: int) -> float:
        self.calls += 1
        return super().t_verify(rows)


def test_the_drafter_sizes_a_depth_once_per_curve() -> None:
    """tree_nodes walks the curve once per candidate node count (~80 µs at a 64-node
    budget): the drafter keeps its answer per depth until the curve or the budget changes."""
    from core.drafting.base import DraftRequest
    from core.primitives.sampling import LogitsConfig

    d = TreeDrafter()
    d.price(_Counted())
    req = DraftRequest(FORKED, 3, VOCAB, LogitsConfig(temperature=0.0), None)
    d.propose(req)
    walked = d.curve.calls
    assert walked > 0
    d.propose(req)
    assert d.curve.calls == walked  # the same depth: not walked again
    d.propose(DraftRequest(FORKED, 2, VOCAB, LogitsConfig(temperature=0.0), None))
    assert d.curve.calls > walked  # another depth is sized
    d.budget = 4
    assert d.propose(req).tree.size == 4  # a new budget: sized again
    d.price(_Counted())
    d.budget = 64
    d.propose(req)
    assert d.curve.calls > 0  # a new curve: sized again


# -- in the engine -----------------------------------------------------------------------------


HANDED = [39, 1, 2, 3, 12, 39, 1, 5, 6, 13, 30, 31, 32, 33, *FORKED[:12], 40, 41]
# "13 20" was followed twice by 31 26 5 2, once by 46 19 47 40: the tiny target takes the
# lighter branch (found by a seeded search), so the accepted path leaves the first chain
OFF_CHAIN = [13, 20, 31, 26, 5, 2, 3, 13, 20, 31, 26, 5, 2, 4, 13, 20, 46, 19, 47, 40, 5, 41, 20,
             13, 39, 13, 20]


@pytest.mark.parametrize("k", [2, 6])
@pytest.mark.parametrize("prompt", [FORKED * 2, HANDED, OFF_CHAIN])
def test_greedy_tree_is_target_greedy(target, k: int, prompt: list[int], monkeypatch) -> None:
    """HANDED's end repeats nothing: target steps first, then (the tiny target says 39 1,
    which forked twice before) tree rounds handed the queued step's row (the handoff).
    OFF_CHAIN's accepted path leaves the tree's first chain: its nodes past it are left to
    the next forward, whose rows are then those pending tokens and its own."""
    from core.primitives.cached_model import CachedModel

    paths: list[list[int]] = []
    keep_path = CachedModel.keep_tree_path
    monkeypatch.setattr(CachedModel, "keep_tree_path", lambda self, fed, nodes, path, *a:
                        paths.append(list(path)) or keep_path(self, fed, nodes, path, *a))
    s = Settings(mode="target-only", temperature=0.0, max_tokens=60, ignore_eos=True,
                 traced=False)
    engine = Engine(target, vocab_size=VOCAB)
    engine.drafter("tree").budget = 12
    engine.drafter("tree").curve = _Flat()
    events, spec = run(engine, prompt, s.replace(mode="speculative", k=k, draft_source="tree"))
    _, ref = run(Engine(target, vocab_size=VOCAB), prompt, s)
    assert spec.token_ids == ref.token_ids
    trees = [e for e in events if e.nodes]
    assert trees, "no round verified a tree"
    if prompt is HANDED:
        assert any(e.rows == e.nodes for e in trees)  # a handed-off tree round
    if prompt is OFF_CHAIN:
        assert any(len(p) > 1 and p != list(range(len(p))) for p in paths), paths
    assert all(e.rows >= e.nodes for e in trees)  # a handoff feeds no root
    if prompt is not OFF_CHAIN:  # no path left to feed: a tree round feeds one pending token
        assert all(e.rows in (e.nodes, e.nodes + 1) for e in trees)
    assert_caches(engine, prompt + list(spec.token_ids), settled=prompt is not OFF_CHAIN)
    # the cache's K/V are its tokens': the next forward agrees with a fresh prefill's
    held = engine.caches.target
    fresh = CachedModel.fresh(target)
    fresh.prefill(held.seq)
    nxt = mx.array([1], dtype=mx.uint32)
    np.testing.assert_allclose(np.array(held.forward(nxt, VOCAB)),
                               np.array(fresh.forward(nxt, VOCAB)), atol=2e-4)


def test_refed_tokens_reach_the_target_through_the_verification_s_patches(
    target, monkeypatch
) -> None:
    """After a tree round whose path left the first chain, the target lags the
    text by more than its last token, and any plain step that feeds the lag (several rows)
    enters the verification's patches: on CUDA the bucketed fused attention, not a cuDNN
    plan built at each new KV length (core/dispatch/bucketed.py)."""
    import core.decode.run_state as run_state
    from core.primitives.cached_model import CachedModel

    active: list[int] = []
    real = run_state.verification_patches

    class Recorded:
        def __init__(self, *a, **kw) -> None:
            self.inner = real(*a, **kw)

        def __enter__(self) -> None:
            active.append(1)
            self.inner.__enter__()

        def __exit__(self, *exc) -> None:
            active.pop()
            self.inner.__exit__(*exc)

    steps: list[tuple[int, bool]] = []
    decode = CachedModel.decode

    def recorded_decode(self, tokens, vocab, compiled=None):
        if tokens.shape[0] > 1:
            steps.append((tokens.shape[0], bool(active)))
        return decode(self, tokens, vocab, compiled)

    class Family:  # a stand-in for the kernel predictor: names the rows it was asked
        def family(self, rows: int) -> str:
            return f"R{rows}"

    monkeypatch.setattr(run_state, "verification_patches", Recorded)
    monkeypatch.setattr(CachedModel, "decode", recorded_decode)
    engine = Engine(target, vocab_size=VOCAB, predictor=Family())
    engine.drafter("tree").budget = 12
    engine.drafter("tree").curve = _Flat()
    lags = []
    s = Settings(mode="speculative", temperature=0.0, max_tokens=60, ignore_eos=True,
                 traced=False, k=6, draft_source="tree")
    prompt = OFF_CHAIN
    events, _ = run(engine, prompt, s, on_event=lambda e, seen: lags.append(
        len(prompt) + sum(len(x.tokens) for x in seen) - len(engine.cache_state()["target_seq"])))
    assert max(lags) > 1, "no path left the first chain"
    assert steps and all(inside for _, inside in steps), steps
    # the Rounds panel and the profile see such a step's rows and their kernel, not one row's
    wide = [e for e in events if not e.proposed and e.rows > 1]
    assert sorted(e.rows for e in wide) == sorted(r for r, _ in steps)
    assert all(e.kernel == f"R{e.rows}" for e in wide)


def test_lossless_tree_follows_the_target_law(target) -> None:
    """Two sampled tokens after a prompt whose end forks (7 then 8, or 7 then 9): the first
    round verifies a tree; the (first, second) law is the target's."""
    prompt = [5, 6, 7, 8, 1, 5, 6, 7, 9, 2, 5, 6, 7]
    s = Settings(mode="speculative", draft_source="tree", rule="lossless", temperature=1.0,
                 max_tokens=2, k=2, ignore_eos=True, traced=False, policy="fixed")
    law = exact_pair_law(target, prompt, logits_config(s))
    engine = Engine(target, vocab_size=VOCAB)
    engine.drafter("tree").curve = _Flat()
    table = np.zeros((VOCAB, VOCAB), dtype=np.int64)
    trees = 0
    for seed in range(1000):
        events, summary = run(engine, prompt, s.replace(seed=seed))
        trees += events[0].nodes > 0
        t1, t2 = summary.token_ids[:2]
        table[t1, t2] += 1
    assert trees == 1000
    assert_matches(table.sum(axis=1), law.sum(axis=1), "first token")
    assert_matches(table, law, "(first, second) pair")


def test_mentored_and_a_penalty_verify_the_chain(target) -> None:
    prompt = FORKED * 2
    for s in (Settings(mode="speculative", draft_source="tree", rule="mentored",
                       temperature=1.0, max_tokens=12, k=4, ignore_eos=True, policy="fixed"),
              Settings(mode="speculative", draft_source="tree", temperature=0.0,
                       repetition_penalty=1.3, max_tokens=12, k=4, ignore_eos=True,
                       policy="fixed")):
        engine = Engine(target, vocab_size=VOCAB)
        engine.drafter("tree").curve = _Flat()
        events, spec = run(engine, prompt, s)
        assert any(e.source == "tree" for e in events)
        assert not any(e.nodes for e in events)
        assert_caches(engine, prompt + list(spec.token_ids), settled=True)


def test_the_drafter_is_registered_and_rewinds() -> None:
    from core.drafting import registry

    assert "tree" in registry.names()
    d = TreeDrafter()
    d.catch_up(FORKED)
    d.rewind(FORKED[:5])
    assert len(d.occ) == len(d.index) == 5


@pytest.mark.real_model
def test_greedy_tree_equals_target_only_on_the_default_model(default_pair, default_greedy) -> None:
    """SmolLM2's greedy tokens 113..159 with the tree source equal target-only's (the session's
    shared reference, tests/helpers/greedy_reference.py); trees of several branches were
    verified, turned down whole, and accepted, and the caches hold the text after them.

    The reference's story repeats its sentences with different endings, so the text forks: the
    tree has several continuations to merge, as in a pasted module's shared bodies, without the
    module's ~670 prompt rows (on this CPU each costs about a decode step).
    k = 8 and at most 16 nodes under a flat stand-in curve: on this CPU a verification costs
    its rows, so a 64-node tree a round would make this test minutes long; the forks it
    checks appear at 16 nodes already.
    The run starts after the reference's first 113 tokens (prompt + those, prefilled) and stops
    at 160. On this CPU (rounds listed by a run from token 100 to 176): a whole 16-node tree is
    turned down at 117, forks are accepted from 132 on, and the accepted paths that leave the
    tree's first chain (whose nodes past it the next forward feeds, CachedModel.keep_tree_path)
    come at 148 and 155, their pending rows fed at 151 and 159; the rounds before 113 and after
    160 repeat those cases. Breaks shown failing on this window: the path's nodes kept in
    place where it left the first chain (tokens differ), no trim after a rejected tree (tokens
    and caches differ). 31 s of CPU here, against 40 s for 100..176 and 78 s for 0..255."""
    ids, reference = default_greedy
    start, end = 113, 160
    engine = Engine.from_pair(default_pair)
    tree = engine.drafter("tree")
    tree.budget, tree.curve = 16, _Flat()
    s = Settings(mode="speculative", temperature=0.0, max_tokens=end - start, ignore_eos=True,
                 traced=False, k=8, policy="fixed", draft_source="tree")
    prompt = ids + list(reference[:start])
    events, spec = run(engine, prompt, s)
    assert spec.token_ids == reference[start:end]
    trees = [e for e in events if e.nodes]
    assert any(e.nodes > s.k and e.accepted for e in trees)  # a fork's path accepted
    assert any(e.nodes > s.k and not e.accepted for e in trees)  # a whole fork turned down
    assert_caches(engine, prompt + list(spec.token_ids), settled=True)
