"""The stretch's handoff: a round planned after a stretch's last token, its next target step
already queued, verifies that step's row first (core/decode/speculative.py `Handoff`).

What it replaced: the plan was made one token early, and the queued step read as the last
of the stretch; where the token read then refuted the copy offered, no round drafted and the
pipeline restarted for nothing (issue 28, run 6's finding 3). Counted, never timed."""

from __future__ import annotations

import mlx.core as mx
import pytest

from core.decode.engine import Engine
from core.dispatch import VerifyCostCurve
from core.settings import Settings
from tests.helpers.engine import assert_caches, counting, run
from tests.helpers.fixed_drafter import FixedTokensDrafter
from tests.helpers.tiny import VOCAB, noisy_copy

PROMPT = [5, 6, 7, 8, 9, 10, 11, 3, 5, 6, 7, 8, 9, 5, 6, 7]
FLAT = {1: 1e-3, 2: 2e-3, 33: 2.2e-3}  # H200-like: any verification costs ~2 target steps
SPEC = Settings(mode="speculative", policy="cost-aware", k_max=32, max_tokens=48,
                ignore_eos=True, traced=False)


def curve(draft_step_s: float | None = None) -> VerifyCostCurve:
    return VerifyCostCurve("cpu", "", 16, {"auto": FLAT}, draft_step_s=draft_step_s)


@pytest.mark.parametrize(("temperature", "rule"), [(0.0, "greedy"), (1.0, "lossless"),
                                                   (1.0, "mentored")])
def test_a_handed_off_round_equals_the_round_that_feeds_its_pending_token(
    target, temperature, rule
) -> None:
    """The same round two ways: its pending token fed with the drafts (k + 1 rows in one pass),
    or fed by a queued step whose logits are the first row (k rows): the same tokens, the
    same verdict, the same caches after."""
    drafts = [8, 9, 10, 4, 2]
    s = Settings(mode="speculative", policy="fixed", k=len(drafts), temperature=temperature,
                 rule=rule, tv_budget=0.3, ignore_eos=True, traced=False)
    outcomes = []
    for handed in (False, True):
        engine = Engine(target, vocab_size=VOCAB)
        seq = list(PROMPT)
        engine._prefill(seq, s, False)
        row0 = None
        if handed:  # the stretch's queued step: it fed seq[-1]
            row0 = engine._target.decode(mx.array(seq[-1:]), VOCAB, False)
            engine._target.seq.append(seq[-1])
        ev = engine._speculative_round(seq, s, len(drafts), mx.random.key(3), 0,
                                       FixedTokensDrafter(drafts), row0)
        outcomes.append((ev, list(seq), engine.cache_state()))
    (plain, seq_a, st_a), (handed_ev, seq_b, st_b) = outcomes
    assert [t.id for t in handed_ev.tokens] == [t.id for t in plain.tokens]
    assert (handed_ev.accepted, handed_ev.proposed) == (plain.accepted, plain.proposed)
    assert seq_b == seq_a and st_b == st_a
    assert (plain.rows, handed_ev.rows) == (len(drafts) + 1, len(drafts))
    if rule == "mentored":
        assert handed_ev.tv == pytest.approx(plain.tv, abs=1e-5)


@pytest.mark.parametrize("source", ["lookup", "hybrid"])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_a_stretch_ends_only_where_a_round_drafts(target, source, temperature) -> None:
    """Every plan that drafts is a round: the plan is made on tokens already read, so a copy
    the next token refutes is never offered, and a stretch ends only in a round. (Before, a
    plan made a token early was made again after it, and wherever the second said no the
    pipeline restarted: on this text the plans that drafted outnumbered the rounds.)"""
    draft = noisy_copy(target, 0.3, seed=3) if source == "hybrid" else None
    engine = Engine(target, draft, vocab_size=VOCAB)
    engine.set_cost_curve(curve(draft_step_s=10e-3), observed=False)
    counts = counting(engine)
    for seed in range(4):
        events, summary = run(engine, PROMPT, SPEC.replace(draft_source=source,
                                                           temperature=temperature, seed=seed))
        assert_caches(engine, PROMPT + list(summary.token_ids), settled=True)
    assert counts["drafted"] >= 1
    assert counts["plans that draft"] == counts["drafted"]  # each one a round, none refuted
    assert counts["stretches"] <= counts["drafted"] + 4  # one first stretch per request


@pytest.mark.parametrize("after", [SPEC.replace(mode="target-only"),
                                   SPEC.replace(draft_source="lookup", k_max=4)])
def test_a_handoff_no_round_takes_is_dropped_and_the_token_fed_again(target, after) -> None:
    """The settings change just after a stretch handed its step to a round (the mode to
    target-only, or another k): that step is dropped, the target rewound to the text minus
    its last token, and the run goes on with the target's own tokens."""
    engine = Engine(target, vocab_size=VOCAB)
    engine.set_cost_curve(curve(), observed=False)
    s0 = SPEC.replace(draft_source="lookup", temperature=0.0)
    later = after.replace(temperature=0.0)
    switched = [False]
    stretches = engine._single_model_rounds

    def stretch(*a, stop_after=None, **kw):  # noqa: ANN002, ANN003, ANN202
        def handing(row0):  # noqa: ANN001, ANN202
            yes = stop_after(row0)
            switched[0] = switched[0] or yes  # a stretch handed its step to a round
            return yes

        yield from stretches(*a, stop_after=handing if stop_after else None, **kw)

    engine._single_model_rounds = stretch  # type: ignore[method-assign]
    events, summary = run(engine, PROMPT, s0,
                          settings_source=lambda: later if switched[0] else s0)
    assert switched[0]
    assert_caches(engine, PROMPT + list(summary.token_ids), settled=True)
    ref = run(Engine(target, vocab_size=VOCAB), PROMPT,
              SPEC.replace(mode="target-only", temperature=0.0))[1]
    assert list(summary.token_ids) == list(ref.token_ids)
