"""Speculation that never loses: counted, never timed. A source whose rounds cannot pay is not
asked, its rounds stay one pipelined stretch of target steps (as target-only runs them), the
hybrid asks each source on its own evidence, and a model's catch-up is charged to its rounds.
Copies as long as they pay: the run-length model and the k it gives on recorded costs."""

from __future__ import annotations

import pytest

from core.cost.policy import CopyRunPolicy, NullPolicy
from core.cost.prediction import RunLengths, copy_acceptance, expected_tokens, run_hazards
from core.decode.engine import Engine
from core.dispatch import VerifyCostCurve
from core.drafting.base import Offer
from core.settings import Settings
from tests.helpers.engine import assert_caches, counting, run
from tests.helpers.tiny import VOCAB, noisy_copy

# The lookup copies from the start: "5 6 7" repeats, and so do shorter runs later.
REPEATING = [5, 6, 7, 8, 9, 10, 11, 3, 5, 6, 7, 8, 9, 5, 6, 7]


def curve(rows: dict[int, float], draft_step_s: float | None = None) -> VerifyCostCurve:
    return VerifyCostCurve("cpu", "", 16, {"auto": rows}, draft_step_s=draft_step_s)


FLAT = {1: 1e-3, 2: 2e-3, 33: 2.2e-3}  # H200-like: any verification costs ~2 target steps
STEEP = {1: 1e-3, 2: 4e-3, 33: 66e-3}  # 2 ms a row: no copy pays even if all are kept


SPEC = Settings(mode="speculative", policy="cost-aware", k_max=32, temperature=0.0,
                max_tokens=40, ignore_eos=True, traced=False)


def test_copies_that_cannot_pay_leave_one_pipelined_stretch(target) -> None:
    """Where no copy could pay even if all were kept, the lookup is never asked to draft and
    the request is one pipelined stretch, as target-only runs it, though the conversation
    repeats all along (before, every change of route stopped the pipeline)."""
    engine = Engine(target, vocab_size=VOCAB)
    engine.set_cost_curve(curve(STEEP), observed=False)
    counts = counting(engine)
    events, summary = run(engine, REPEATING, SPEC.replace(draft_source="lookup"))
    assert counts == {"stretches": 1, "drafted": 0, "plans that draft": 0}
    assert all(e.proposed == 0 and e.rows == 1 for e in events)
    offers = engine.drafter("lookup").offers(REPEATING + list(summary.token_ids))
    ref = run(Engine(target, vocab_size=VOCAB), REPEATING, SPEC.replace(mode="target-only"))[1]
    assert summary.token_ids == ref.token_ids
    assert offers or any(True for _ in events)  # the text did repeat: there was a route


@pytest.mark.parametrize("source", ["lookup", "hybrid"])
def test_the_pipeline_stops_only_for_a_round_that_drafts(target, source) -> None:
    """Copies that may pay: every stretch of target steps but the first ends because the
    next round drafts (stretches <= drafting rounds + 1), and the text is the target's."""
    draft = noisy_copy(target, 0.3, seed=3) if source == "hybrid" else None
    engine = Engine(target, draft, vocab_size=VOCAB)
    engine.set_cost_curve(curve(FLAT, draft_step_s=10e-3), observed=False)
    counts = counting(engine)
    events, summary = run(engine, REPEATING, SPEC.replace(draft_source=source))
    assert counts["drafted"] == sum(e.proposed > 0 for e in events) >= 1
    assert counts["stretches"] <= counts["drafted"] + 1
    ref = run(Engine(target, vocab_size=VOCAB), REPEATING, SPEC.replace(mode="target-only"))[1]
    assert summary.token_ids == ref.token_ids
    assert_caches(engine, REPEATING + list(summary.token_ids), settled=True)


def test_the_hybrid_does_not_ask_a_model_that_cannot_pay(target) -> None:
    """A draft step dearer than what k drafts could save at full acceptance: the hybrid never
    runs the model (not even its catch-up), and copies where they may pay."""
    engine = Engine(target, noisy_copy(target, 0.3, seed=3), vocab_size=VOCAB)
    engine.set_cost_curve(curve(FLAT, draft_step_s=10e-3), observed=False)
    events, summary = run(engine, REPEATING, SPEC.replace(draft_source="hybrid"))
    assert "model" not in summary.per_source
    assert sum(e.source == "lookup" for e in events) >= 1
    assert engine.cache_state()["draft_seq"] == []  # never fed, never caught up


def test_a_model_catch_up_after_its_first_is_charged_to_its_round(target) -> None:
    """The model's policy sees the seconds its catch-up took (after the request's first,
    which is a prefill), so a fallback that lags behind copies and target steps pays its way."""

    class Recording(NullPolicy):  # the hooks the loop calls, as no-ops
        def __init__(self) -> None:
            self.schedule = [2, 0, 0, 0, 2, 2]
            self.seconds: list[float | None] = []

        def next_k(self, limit: int | None = None) -> int:
            return self.schedule[0] if self.schedule else 2

        def observe(self, proposed: int, accepted: int, seconds: float | None = None) -> None:
            if proposed:
                self.seconds.append(seconds)
            if self.schedule:
                self.schedule.pop(0)

    engine = Engine(target, noisy_copy(target, 0.3, seed=3), vocab_size=VOCAB)
    policy = Recording()
    engine._policy_for = lambda s, context, drafter: policy  # type: ignore[method-assign]
    now = [0.0]  # the engine's clock (its rounds' too): only a catch-up moves it
    engine._clock = lambda: now[0]
    model = engine.drafter("model")
    caught = model.catch_up

    def slow_catch_up(seq, chunk, cancel=None):  # noqa: ANN001, ANN202
        now[0] += 1000.0  # every catch-up "takes" 1000 s
        return caught(seq, chunk, cancel)

    model.catch_up = slow_catch_up  # type: ignore[method-assign]
    s = Settings(policy="fixed", temperature=0.0, max_tokens=16, ignore_eos=True)
    run(engine, [1, 2, 3, 4, 5], s)
    assert len(policy.seconds) >= 2
    first, later = policy.seconds[0], policy.seconds[1:]
    assert first is not None and first < 1000  # the first catch-up is the draft's prefill
    assert all(x is not None and x >= 1000 for x in later)


# -- copies: run lengths ----------------------------------------------------------------------


def test_run_lengths_count_a_kept_proposal_as_at_least_its_length() -> None:
    runs = RunLengths.empty(8)
    runs.observe(3, 3)  # all three kept: the run went on past 0, 1, 2 (then censored)
    runs.observe(1, 4)  # kept one: past 0, stopped at 1
    runs.observe(0, 5)  # none: stopped at 0
    assert runs.risk[:4] == [3, 2, 1, 0]
    assert runs.went[:4] == [2, 1, 1, 0]
    h = run_hazards(runs, 4, [0.5, 0.8, 0.8, 0.8], weight=0.0 + 1e-12)
    assert h[0] == pytest.approx(2 / 3) and h[1] == pytest.approx(0.5)
    assert h[3] == pytest.approx(0.8)  # never reached: the prior
    assert runs.survival(3, [0.5, 0.8, 0.8]) == pytest.approx(
        [h0 := run_hazards(runs, 3, [0.5, 0.8, 0.8])[0],
         h0 * run_hazards(runs, 3, [0.5, 0.8, 0.8])[1],
         h0 * run_hazards(runs, 3, [0.5, 0.8, 0.8])[1] * run_hazards(runs, 3, [0.5, 0.8, 0.8])[2]]
    )


# SmolLM2 on the H200 (docs/benchmarks/data/h200-2026-12-01, rewrite-paragraph at T = 0.7):
# one row 5.24 ms, 2-17 rows 9.4-11.2 ms; flat to 33 rows for this 135M model.
H200_SMOLLM2 = {1: 5.24e-3, 2: 11.2e-3, 5: 9.9e-3, 9: 10.7e-3, 17: 11.0e-3, 33: 11.5e-3}


def copy_policy(k_max: int = 32) -> CopyRunPolicy:
    c = curve(H200_SMOLLM2)
    return CopyRunPolicy(c.t_verify, lambda k: 0.0, k_max=k_max, k_min=0, bonus=True)


def feed(policy: CopyRunPolicy, offer: Offer, rounds: list[tuple[int, int]]) -> None:
    for proposed, accepted in rounds:
        policy.consider(offer)
        policy.observe(proposed, accepted)


def test_copies_that_run_on_are_proposed_long() -> None:
    """~30% of first tokens kept, then runs that go on: the run-length model proposes the
    longest copy the curve allows (per-position averages gave ~8), and the match caps it."""
    policy = copy_policy()
    long_match = Offer("lookup", None, 4)
    # 10 rounds of 16: 3 ran all the way, 7 failed at once.
    feed(policy, long_match, [(16, 16)] * 3 + [(16, 0)] * 7)
    policy.consider(long_match)
    k = policy.next_k()
    assert k >= 24
    a = policy.acceptance()
    assert a[0] < 0.5 and min(a[1:k]) > 0.85  # a first-token gate, then the run
    policy.consider(Offer("lookup", 6, 4))
    assert policy.next_k() == 6  # only 6 tokens follow the match
    assert expected_tokens(k, a, True) > 0.3 * k  # a third of the copies run to the end


def test_a_kind_of_copy_that_never_pays_stops_being_asked() -> None:
    """Two-token matches whose copies are never kept (a creative prompt): after the evidence,
    their offers get k = 0 and no probe; a long match's kind, which ran, is still copied."""
    policy = copy_policy()
    short, long_ = Offer("lookup", None, 2), Offer("lookup", None, 5)
    feed(policy, long_, [(16, 16)] * 4)
    feed(policy, short, [(32, 0)] * 150)  # copies of short matches, all rejected at once
    asked = []
    for _ in range(40):  # every target step is observed; would it still probe?
        policy.consider(short)
        asked.append(policy.next_k())
        policy.observe(asked[-1], 0)
    assert sum(k > 0 for k in asked) == 0
    policy.consider(long_)
    assert policy.next_k() >= 16


def test_copy_acceptance_falls_back_on_all_kinds_then_the_prior() -> None:
    pooled = RunLengths.empty()
    for _ in range(20):
        pooled.observe(8, 8)
    a = copy_acceptance(None, pooled, 12)
    assert a[1] > 0.9 and a[11] > 0.9  # unreached lengths run on like the reached ones
    assert copy_acceptance(None, RunLengths.empty(), 3)[0] == pytest.approx(0.5)


def test_stalled_first_rounds_lock_copies_out_at_the_observed_gate() -> None:
    """A request's first two copies stall (10x their price: a kernel's first use, a pause of
    the host), then every offer is a long match whose copies would pay. The drafted rounds'
    cost scale moves only on drafted rounds, and a copy's probe is gated at that observed
    scale: the stalled scale (3.24x at the 5x clip) leaves no copy that seems to pay and no
    probe runs for the rest of the request, the lock-in the replay found. The trade the code
    keeps: the gate at the lesser cost and a 1.5x clip each ended it in the replay and
    neither won on the H200 (docs/decisions/0004-probe-at-observed-cost.md,
    0005-cost-scale-clip.md). The control: the same offers without the stalls copy on."""
    c = curve(H200_SMOLLM2)
    for stalls, locked in ((2, True), (0, False)):
        policy = CopyRunPolicy(c.t_verify, lambda k: 0.0, k_max=32, k_min=0, bonus=True)
        after = _copies_after_stalls(policy, c, stalls)
        if locked:
            assert policy.scale[1] > 3.0 and not any(after)
        else:
            assert sum(k > 0 for k in after) >= 0.9 * len(after)


def _copies_after_stalls(policy: CopyRunPolicy, c: VerifyCostCurve, stalls: int) -> list[int]:
    """The k the policy chose for 200 offers of a long match, its first `stalls` copies heard
    at 10x their price and not kept, every other copy kept at its price: the k after them."""
    offer = Offer("lookup", None, 4)
    asked, stalled, at = [], [], 0
    for i in range(200):  # each offer: a plain step at its price, or a copy that runs on
        policy.consider(offer)
        k = policy.next_k()
        asked.append(k)
        if k and len(stalled) < stalls:  # stalled, its first token not kept
            policy.observe(k, 0, 10.0 * c.t_verify(k + 1))
            stalled.append(policy.scale[1])
            at = i + 1
        else:
            policy.observe(k, k, c.t_verify(k + 1))
    if stalls == 2:  # 1 + 0.2 (5 - 1), then + 0.2 (5 x 1.8 - 1.8): the 5x clip
        assert stalled[-1] == pytest.approx(3.24)
    return asked[at:]
