"""The round's own cost beyond its verification, counted on the CPU (never timed): the MLX
calls and host syncs a round makes outside the models' forwards (issue 28).

Counting, because what a host-bound GPU pays for them is the host's time to issue them and
the idle device a sync leaves, which a CPU clock cannot show: a greedy plain target step
issues no key split, and a model source that lags a long stretch of target steps behind
catches up inside its round's graph, so its round still syncs the host once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import mlx.core as mx
import pytest

from core.settings import Settings

PROMPT = [5, 6, 7, 8, 9, 10, 11, 12]


def counting(monkeypatch, names: tuple[str, ...]) -> Counter[str]:
    """Every call of these mlx.core functions (and mx.random.split), counted."""
    seen: Counter[str] = Counter()

    def wrap(name: str, fn: Any) -> Any:
        def counted(*a: Any, **k: Any) -> Any:
            seen[name] += 1
            return fn(*a, **k)

        return counted

    for name in names:
        monkeypatch.setattr(mx, name, wrap(name, getattr(mx, name)))
    monkeypatch.setattr(mx.random, "split", wrap("random.split", mx.random.split))
    return seen


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_a_plain_greedy_step_splits_no_key(engine, monkeypatch, temperature) -> None:
    """A greedy step draws nothing, so its key split was an op in every step's path for
    nothing; a sampled step still splits one key a step (its draw needs it)."""
    s = Settings(mode="target-only", temperature=temperature, max_tokens=24, ignore_eos=True,
                 traced=False)
    seen = counting(monkeypatch, ("eval",))
    gen = engine.generate(PROMPT, s)
    per_step = []
    while True:
        seen.clear()
        item = next(gen)
        if not hasattr(item, "index"):
            break
        per_step.append(seen["random.split"])
    later = per_step[1:-1]  # the first round holds the run's key set-up; the last queues none
    assert later and all(n == (0 if temperature == 0.0 else 1) for n in later), per_step


def test_greedy_text_is_unchanged_by_the_skipped_split(engine) -> None:
    """Greedy output is the target's argmax chain, whatever keys are (not) split."""
    s = Settings(mode="target-only", temperature=0.0, max_tokens=24, ignore_eos=True,
                 traced=False)
    a = list(engine.generate(PROMPT, s))[-1].token_ids
    engine.reset()
    b = list(engine.generate(PROMPT, s.replace(seed=5)))[-1].token_ids
    assert a == b


def test_a_model_round_after_a_long_target_stretch_syncs_once(engine, monkeypatch) -> None:
    """The model drafts, then 60 target-only rounds pass (its cache 60 tokens behind, more
    than the old lazy limit of 32), then it drafts again: that round's catch-up joins its
    graph, so the round evaluates once, and the text is still the target's greedy text."""
    base = Settings(mode="speculative", draft_source="model", policy="fixed", k=3,
                    temperature=0.0, max_tokens=80, ignore_eos=True, traced=False)
    rounds = {"n": 0}

    def source() -> Settings:  # speculative for 2 rounds, target-only for 60, then speculative
        n = rounds["n"]
        return base.replace(mode="target-only") if 2 <= n < 62 else base

    seen = counting(monkeypatch, ("eval",))
    evals: list[tuple[int, int]] = []
    items = []
    for item in engine.generate(PROMPT, base, settings_source=source):
        if hasattr(item, "index"):
            if item.proposed:
                evals.append((rounds["n"], seen["eval"]))
            rounds["n"] += 1
        items.append(item)
        seen.clear()
    after = [n for i, n in evals if i >= 62]
    assert after, evals
    assert after[0] == 1, evals  # the round after the stretch: its one sync, no prefill's
    state = engine.cache_state()
    assert state["draft_seq"] == state["target_seq"][: len(state["draft_seq"])]
    target_only = Settings(mode="target-only", temperature=0.0, max_tokens=80, ignore_eos=True,
                           traced=False)
    engine.reset()
    expected = list(engine.generate(PROMPT, target_only))[-1].token_ids
    assert items[-1].token_ids == expected


def test_a_greedy_speculative_round_splits_no_key_and_reads_once(engine, monkeypatch) -> None:
    """A greedy round draws nothing, so no key is split in it (mlx-lm's loop splits none),
    and its drafts, the target's argmax rows and n come back in one eval and one read."""
    s = Settings(mode="speculative", draft_source="model", policy="fixed", k=4,
                 temperature=0.0, max_tokens=40, ignore_eos=True, traced=False)
    seen = counting(monkeypatch, ("eval",))
    reads: Counter[str] = Counter()
    for name in ("tolist", "item"):
        fn = getattr(mx.array, name)

        def read(self, *a, _fn=fn, _name=name):  # noqa: ANN001, ANN002, ANN202
            reads[_name] += 1
            return _fn(self, *a)

        monkeypatch.setattr(mx.array, name, read)
    per_round = []
    for item in engine.generate(PROMPT, s):
        if hasattr(item, "index") and item.proposed:
            per_round.append((seen["random.split"], seen["eval"], reads["tolist"] + reads["item"]))
        seen.clear()
        reads.clear()
    later = per_round[1:]  # the first holds the run's key and the draft's prefill
    assert later and all(r == (0, 1, 1) for r in later), per_round


def test_after_every_draft_is_accepted_the_draft_feeds_its_lag_with_its_first_step(
    target,
) -> None:
    """A round that accepted every draft leaves the draft one token behind (the last draft):
    its next round feeds it with the pending token in its first step's forward, one forward
    of 2 rows, as mlx-lm's loop does, instead of a forward of its own first. The text is the
    target's greedy text."""
    from core.decode.engine import Engine
    from tests.helpers.forward_rows import forward_rows
    from tests.helpers.tiny import noisy_copy

    draft = noisy_copy(target, 0.0, seed=1)  # the target's own weights: every draft accepted
    engine = Engine(target, draft, vocab_size=target.args.vocab_size)
    s = Settings(mode="speculative", draft_source="model", policy="fixed", k=3,
                 temperature=0.0, max_tokens=17, ignore_eos=True, traced=False)
    draft_rows: list[tuple[int, list[int]]] = []
    with forward_rows(draft=draft) as rows:
        for item in engine.generate(PROMPT, s):
            if hasattr(item, "index"):
                draft_rows.append((item.proposed, list(rows["draft"])))
                assert item.accepted == item.proposed, item
            rows["draft"].clear()
    later = [(k, r) for k, r in draft_rows[1:] if k]
    assert later and all(r == [2] + [1] * (k - 1) for k, r in later), draft_rows
    engine.reset()
    expected = list(engine.generate(PROMPT, s.replace(mode="target-only")))[-1].token_ids
    engine.reset()
    assert list(engine.generate(PROMPT, s))[-1].token_ids == expected
