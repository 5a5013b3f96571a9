"""The step after a round, queued before the round is read (core/decode/queued.py).

Its logits at an array position must be a plain step's at the host position, for every
outcome the round could have (n kept drafts of k), over a buffer holding the rejected drafts'
keys; the engine must give the same tokens and caches with it on and off. Counted, never
timed: what it saves is device idle time, measured on the H200 (never-slower.md)."""

from __future__ import annotations

import mlx.core as mx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lm.models import qwen2
from mlx_lm.models.cache import QuantizedKVCache, make_prompt_cache

from core.decode.engine import Engine
from core.decode.queued import FollowRate, adopt, queue_step, queued_attention, why_not
from core.primitives.cached_model import prefill
from core.settings import Settings
from tests.helpers.engine import assert_caches, run
from tests.helpers.tiny import VOCAB, tiny_llama


def tiny_qwen(seed: int) -> qwen2.Model:
    """A seeded random qwen2 (q/k/v biases, the pair's architecture), weights evaluated."""
    mx.random.seed(seed)
    args = qwen2.ModelArgs(model_type="qwen2", hidden_size=64, num_hidden_layers=2,
                           intermediate_size=128, num_attention_heads=4, rms_norm_eps=1e-6,
                           vocab_size=VOCAB, num_key_value_heads=2, rope_theta=1e6,
                           tie_word_embeddings=True)  # fmt: skip
    model = qwen2.Model(args)
    model.model.embed_tokens.weight = model.model.embed_tokens.weight * 10.0
    mx.eval(model.parameters())
    return model


def pairs(events: list) -> list:
    """Each event with the one before it."""
    return list(zip(events, events[1:], strict=False))


MODELS = {"llama": lambda: tiny_llama(2, seed=4), "qwen2": lambda: tiny_qwen(5)}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):  # noqa: ANN001, ANN201
    return MODELS[request.param]()


@settings(max_examples=25, deadline=None)
@given(context=st.integers(1, 300), k=st.integers(0, 6), data=st.data())
def test_the_queued_step_is_a_plain_step_at_its_position(model, context, k, data) -> None:
    """After a verification of k drafts, the step fed at base + n (n an array) gives the
    logits of a plain step fed there after the cache is trimmed to base + n, for each n; and
    `adopt` leaves the cache where that plain step leaves it."""
    n = data.draw(st.integers(0, k))
    attention = data.draw(st.sampled_from(["fused", "plain"]))  # queued_attention's two answers
    tokens = data.draw(st.lists(st.integers(0, VOCAB - 1), min_size=context + k + 1,
                                max_size=context + k + 1))  # fmt: skip
    prompt, drafts, nxt = tokens[:context], tokens[context : context + k], tokens[-1]
    base = context  # the round's first draft position (its pending token is prompt[-1])

    def verified() -> list:
        cache = make_prompt_cache(model)
        prefill(model, cache, prompt[:-1])
        model(mx.array([prompt[-1], *drafts])[None], cache=cache)  # the verification
        return cache

    cache = verified()
    if base + k + 1 > cache[0].keys.shape[2]:  # no slot past the round: nothing is queued
        assert queue_step(model, cache, mx.array(nxt), mx.array(n), base, VOCAB, attention) is None
        return
    got = queue_step(model, cache, mx.array(nxt), mx.array(n), base, VOCAB, attention)
    held = prompt + drafts[:n]
    for c in cache:  # the engine's rewind: to what the committed sequence shares
        c.offset = len(held)
    adopt(held, cache, prompt + drafts[:n] + [nxt])

    ref_cache = make_prompt_cache(model)
    prefill(model, ref_cache, prompt + drafts[:n])
    want = model(mx.array([[nxt]]), cache=ref_cache)[0, -1:]
    assert got.shape == (1, VOCAB)
    assert mx.allclose(got, want, atol=1e-4, rtol=1e-4).item()
    assert cache[0].offset == ref_cache[0].offset == len(held) == base + n + 1
    # what the next forward reads is the same cache: the held slots agree
    for c, r in zip(cache, ref_cache, strict=True):
        keys, ref_keys = c.keys[..., : c.offset, :], r.keys[..., : r.offset, :]
        assert mx.allclose(keys, ref_keys, atol=1e-4).item()


@pytest.mark.parametrize(("temperature", "rule"), [(0.0, "greedy"), (0.7, "lossless"),
                                                   (1.0, "mentored")])  # fmt: skip
@pytest.mark.parametrize("source", ["model", "lookup", "hybrid"])
def test_the_engine_gives_the_same_run_with_and_without_it(
    target, temperature, rule, source, monkeypatch
):
    """The same tokens, acceptance and caches with overlap_round on and off (the queued step's
    row is the row the plain pass computed), and the passes after a round one row shorter
    (every round queues here, whatever follows it)."""
    from tests.helpers.tiny import tiny_llama as make

    monkeypatch.setattr(FollowRate, "queues", lambda self, source: True)
    draft = make(1, seed=1)
    prompt = [5, 6, 7, 8, 9, 10, 11, 5, 6, 7, 8, 9, 10, 5, 6, 7]
    runs = []
    for overlap in (False, True):
        s = Settings(mode="speculative", draft_source=source, policy="fixed", k=3,
                     temperature=temperature, rule=rule, tv_budget=0.3, max_tokens=40,
                     ignore_eos=True, traced=False, seed=7, overlap_round=overlap)  # fmt: skip
        engine = Engine(target, draft, vocab_size=VOCAB)
        events, summary = run(engine, prompt, s)
        assert_caches(engine, prompt + list(summary.token_ids), settled=True, last_mode=s.mode)
        runs.append((events, summary))
    (off, s_off), (on, s_on) = runs
    assert list(s_on.token_ids) == list(s_off.token_ids)
    assert [(e.proposed, e.accepted) for e in on] == [(e.proposed, e.accepted) for e in off]
    # a round right after a round: k + 1 rows off, its drafts alone on (the queued step's
    # row first); after plain steps both may take a stretch's handoff (test_handoff.py)
    after_off = [e for prev, e in pairs(off) if e.proposed and prev.source]
    after_on = [e for prev, e in pairs(on) if e.proposed and prev.source]
    assert all(e.rows == e.proposed + 1 for e in after_off)
    # a lookup at a sampled temperature rarely copies twice in a row on these random weights:
    # its queued steps go to the plain steps after it (the tokens above)
    assert after_on or (source == "lookup" and temperature > 0)
    assert any(prev.source and not e.proposed for prev, e in pairs(on)) or source != "lookup"
    assert all(e.rows == max(e.proposed, 1) for e in after_on)


def test_where_it_does_not_apply_a_sentence_says_why(target) -> None:
    cache = make_prompt_cache(target)
    on = Settings(traced=False, overlap_round=True)
    assert why_not(target, cache, on, None) is None
    assert "off" in why_not(target, cache, on.replace(overlap_round=False), None)
    assert "traced" in why_not(target, cache, on.replace(traced=True), None)
    assert "bonus" in why_not(target, cache, on.replace(bonus=False), None)
    assert "sharded" in why_not(target, cache, on, object())
    assert "plain KVCache" in why_not(target, [QuantizedKVCache()] * len(cache), on, None)
    target.model_type = "gemma3"
    try:
        assert "gemma3" in why_not(target, cache, on, None)
    finally:
        target.model_type = "llama"


def test_a_traced_run_feeds_every_pending_token_with_its_drafts(target) -> None:
    """Traced rounds end in barriers: nothing is queued, every pass is k + 1 rows."""
    s = Settings(mode="speculative", policy="fixed", k=3, max_tokens=30, ignore_eos=True,
                 traced=True, temperature=0.0, overlap_round=True)  # fmt: skip
    events, _ = run(Engine(target, tiny_llama(1, seed=1), vocab_size=VOCAB), [5, 6, 7, 8], s)
    assert all(e.rows == e.proposed + 1 for e in events if e.proposed)


def test_rounds_that_follow_rounds_stop_queueing(target) -> None:
    """A model that drafts every round: each round is followed by another, so the step it
    would queue costs a forward the next pass did not need. The first rounds queue; once
    more than half of the source's recent rounds were followed by a round (the average
    0.25, 0.44, 0.58 after the first three), no more: the passes are k + 1 rows again."""
    k = 3
    s = Settings(mode="speculative", policy="fixed", k=k, max_tokens=8 * (k + 1), rule="mentored",
                 tv_budget=1.0, temperature=1.0, ignore_eos=True, traced=False,
                 overlap_round=True)  # fmt: skip
    engine = Engine(target, tiny_llama(1, seed=1), vocab_size=VOCAB)
    events, _ = run(engine, [5, 6, 7, 8], s)
    assert all(e.accepted == k for e in events)  # budget 1: every draft kept, bonus added
    assert [e.rows for e in events[:7]] == [k + 1, k, k, k, k + 1, k + 1, k + 1]
    assert engine.follow.rate["model"] > 0.5


def test_follow_rate_is_an_average_of_what_followed() -> None:
    f = FollowRate()
    assert f.queues("lookup")  # no evidence: queue
    for _ in range(3):
        f.observe("lookup", True)
    assert f.rate["lookup"] == pytest.approx(1 - 0.75**3) and not f.queues("lookup")
    f.observe("lookup", False)
    f.observe("lookup", False)
    assert f.queues("lookup") and f.queues("model")


def test_it_is_off_unless_asked() -> None:
    """Off by default (first use too): on the H200 it made greedy copies slower (run 11)."""
    from core.settings import first_run_settings

    assert not Settings().overlap_round and not first_run_settings().overlap_round


def test_the_queued_steps_attention_by_setting() -> None:
    """Fused under "auto" on every backend (on the H200 the cuDNN call the masked one-row
    query takes measured cheaper than the plain attention, run 12); a named verify_attention
    is taken as given."""
    auto = Settings()
    assert queued_attention(auto) == "fused"
    for how in ("fused", "plain"):
        s = auto.replace(verify_attention=how)
        assert queued_attention(s) == how


def test_plain_means_the_plain_attention_runs_at_one_row(monkeypatch) -> None:
    """"plain" must reach `plain_attention` for the one-row query (a patch that only acted
    on multi-row queries would leave the fused call in place, the same logits, and this test
    as the only witness); "fused" must not."""
    import core.dispatch.patches as dp

    calls: list[int] = []
    real = dp.plain_attention

    def counted(q, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(q.shape[-2])
        return real(q, *a, **kw)

    monkeypatch.setattr(dp, "plain_attention", counted)
    model = tiny_llama(2, seed=4)
    cache = make_prompt_cache(model)
    prefill(model, cache, list(range(1, 9)))
    model(mx.array([[9, 10, 11]]), cache=cache)  # a verification of two drafts
    for how, want in (("fused", []), ("plain", [1, 1])):  # two layers, one row each
        calls.clear()
        out = queue_step(model, cache, mx.array(3), mx.array(1), 8, VOCAB, how)
        mx.eval(out)
        assert calls == want, how
