"""The drafter seam (core/drafting): a source added by one module and one register() call.

tests/helpers/fixed_drafter.py is such a module: it proposes the same tokens every round and
knows nothing of the engine. These tests run the engine's unedited round with it and check
what must hold for any source: greedy output equals the target's, lossless output follows the
target's law (exact law by enumeration, seeded chi-square), every cache stays a prefix of the
conversation after every round, and an unknown name is one sentence.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from core.decode.engine import Engine
from core.decode.run_state import logits_config
from core.drafting import registry
from core.errors import UserError
from core.settings import Settings, SettingsError
from tests.helpers import fixed_drafter
from tests.helpers.engine import (
    N_RUNS,
    assert_caches,
    exact_pair_law,
    run,
    sample_pairs,
)
from tests.helpers.tiny import PROMPT, VOCAB, assert_matches, assert_rejects, noisy_copy


@pytest.fixture(scope="module")
def greedy_ref(target) -> tuple[int, ...]:
    s = Settings(mode="target-only", temperature=0.0, max_tokens=40, ignore_eos=True)
    return run(Engine(target, vocab_size=VOCAB), PROMPT, s)[1].token_ids


@pytest.fixture
def fixed_source(greedy_ref):
    """Registers "fixed-tokens" proposing the target's first six greedy tokens: the first round
    is wholly accepted, later ones mostly rejected, so both paths run."""
    fixed_drafter.register(greedy_ref[:6])
    yield fixed_drafter.NAME
    registry.unregister(fixed_drafter.NAME)


def test_a_registered_name_is_a_setting_and_an_unknown_one_a_sentence(fixed_source) -> None:
    assert fixed_source in registry.names()
    assert Settings(draft_source=fixed_source).draft_source == fixed_source
    with pytest.raises(SettingsError, match="draft_source must be one of"):
        Settings(draft_source="no-such-source")


def test_unregistered_source_is_refused_before_any_work(target) -> None:
    registry.register("gone", lambda res: None)
    s = Settings(draft_source="gone", temperature=0.0, max_tokens=4)
    registry.unregister("gone")
    with pytest.raises(UserError, match="Unknown draft source 'gone'"):
        list(Engine(target, target, vocab_size=VOCAB).generate(PROMPT, s))


@pytest.mark.parametrize("repetition_penalty", [1.0, 1.3])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_greedy_with_a_registered_source_is_target_greedy(
    k, repetition_penalty, target, fixed_source
) -> None:
    s = Settings(
        mode="target-only", temperature=0.0, max_tokens=30, ignore_eos=True,
        repetition_penalty=repetition_penalty, traced=False,
    )
    _, ref = run(Engine(target, vocab_size=VOCAB), PROMPT, s)
    engine = Engine(target, noisy_copy(target, 0.2, seed=7), vocab_size=VOCAB)
    events, spec = run(engine, PROMPT, s.replace(mode="speculative", k=k, draft_source=fixed_source))
    assert spec.token_ids == ref.token_ids
    assert all(e.proposed <= min(k, 6) for e in events)
    assert all(e.source == fixed_source for e in events if e.proposed)
    drafter = engine.drafter(fixed_source)
    assert drafter.learnt and all(p <= k for p, _ in drafter.learnt)
    if repetition_penalty == 1.0:  # the first round proposes the target's own greedy tokens
        assert events[0].accepted == min(k, 6)
    assert_caches(engine, PROMPT + list(spec.token_ids), settled=True)


def test_lossless_with_a_deterministic_source_follows_the_target(target, fixed_source) -> None:
    """Two tokens, k = 1, drafts one-hot on the target's likeliest first token: the pair law is
    the target's; the same sample rejects resampling rejections from p instead of p minus x."""
    s = Settings(mode="speculative", rule="lossless", temperature=1.0, max_tokens=2, k=1,
                 ignore_eos=True, traced=False, draft_source=fixed_source)
    law = exact_pair_law(target, PROMPT, logits_config(s))
    x = int(np.argmax(law.sum(axis=1)))
    fixed_drafter.register([x])
    table = sample_pairs(Engine(target, vocab_size=VOCAB), s, N_RUNS)
    assert_matches(table.sum(axis=1), law.sum(axis=1), "first token")
    assert_matches(table, law, "(first, second) pair")
    p1 = law.sum(axis=1)
    wrong = (1.0 - p1[x]) * p1
    wrong[x] += p1[x]
    assert_rejects(table.sum(axis=1), wrong, "first token vs p-resampling")


def test_mentored_with_a_deterministic_source_emits_pi(target, fixed_source) -> None:
    """One drafted position, budget D: the first token follows pi = (1 - theta) p + theta e_x
    with d = 1 - p(x), and the realised TV is min(D, d)."""
    budget = 0.3
    s = Settings(mode="speculative", rule="mentored", tv_budget=budget, temperature=1.0,
                 max_tokens=1, k=1, bonus=False, ignore_eos=True, traced=False,
                 draft_source=fixed_source)
    p1 = exact_pair_law(target, PROMPT, logits_config(s)).sum(axis=1)
    x = int(np.argsort(p1)[-3])  # a token the target rates low-ish: d is large
    fixed_drafter.register([x])
    d = 1.0 - p1[x]
    theta = min(1.0, budget / d)
    pi = (1 - theta) * p1
    pi[x] += theta
    engine = Engine(target, vocab_size=VOCAB)
    counts = np.zeros(VOCAB)
    tvs = []
    for seed in range(N_RUNS):
        events, summary = run(engine, PROMPT, s.replace(seed=seed))
        counts[summary.token_ids[0]] += 1
        tvs.append(events[0].tv)
    assert_matches(counts, pi, "first token vs pi")
    assert_rejects(counts, p1, "first token vs p")
    assert np.allclose(tvs, min(budget, d), atol=1e-5)


def test_caches_stay_prefixes_across_sources_and_modes(target, greedy_ref, fixed_source) -> None:
    """A seeded mix of turns on one engine, switching between the model drafter, the fixed one,
    the lookup, the hybrid, target-only and draft-only: after every round every cache and every drafter's state is a
    prefix of the conversation; after every run the target or draft holds exactly text[:-1]."""
    rng = random.Random(99)
    engine = Engine(target, noisy_copy(target, 0.2, seed=7), vocab_size=VOCAB,
                    eos_ids=[greedy_ref[7]])
    conversation = list(PROMPT)
    sources_used = set()
    for i in range(28):
        if rng.random() < 0.7:
            conversation += [rng.randrange(VOCAB) for _ in range(rng.randint(1, 3))]
        else:
            conversation = [rng.randrange(VOCAB) for _ in range(rng.randint(2, 6))]
        prompt = list(conversation)
        mode = rng.choice(["speculative"] * 4 + ["target-only", "draft-only"])
        source = rng.choice(["model", fixed_source, "lookup", "hybrid"])
        s = Settings(mode=mode, draft_source=source, k=rng.randint(1, 6),
                     rule=rng.choice(["greedy", "lossless", "mentored"]),
                     tv_budget=rng.choice([0.0, 0.5]), temperature=rng.choice([0.0, 1.0]),
                     bonus=rng.random() < 0.5, ignore_eos=rng.random() < 0.5,
                     max_tokens=rng.randint(2, 16), seed=i, traced=rng.random() < 0.5)
        cancel = threading.Event()
        stop_after = rng.choice([None, 2])

        def check(ev, events, prompt=prompt, cancel=cancel, stop_at=stop_after):
            so_far = [t.id for e in events for t in e.tokens]
            text = prompt + so_far
            assert_caches(engine, text, settled=False)
            for name, st in engine.cache_state().items():
                if name.startswith("drafter:") and "seen" in st:
                    assert st["seen"] == text[: len(st["seen"])], (name, st, text)
            if stop_at is not None and len(events) == stop_at:
                cancel.set()

        events, summary = run(engine, prompt, s, on_event=check, cancel=cancel)
        tokens = [t.id for e in events for t in e.tokens]
        assert list(summary.token_ids) == tokens
        assert_caches(engine, prompt + tokens, settled=True, last_mode=mode)
        if mode == "speculative":
            sources_used.add(source)
        conversation = prompt + tokens
    assert sources_used == {"model", fixed_source, "lookup", "hybrid"}
