"""The measured guard's law (core/cost/guard.py): the default never makes decoding slower.

Two levels. The guard alone, in a simulated run (host arithmetic: each arm's rounds cost
what the regime says), with hypothesis over cost and acceptance regimes: against a source
slower than plain target steps the run's time stays within the probing budget of
target-only's; a faster one is used from the start; a hybrid is never below its better part
by more than the budget. Then the engine itself on the tiny random pair, with a fake clock
that its forwards and a drafter advance (the clock the engine's RoundTimer reads), so the
real loop, its pipelined stretches and its acceptance counts are what is checked.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.cost.guard import FASTER, SLOWER, STALL, TARGET, WITHIN, Prior, RateGuard
from core.drafting import registry
from core.settings import Settings
from tests.helpers.fake_clock import FakeClock, OracleDrafter, timed
from tests.helpers.guard_sim import simulate

# -- the guard alone, in a simulated run ------------------------------------------------------


def accepted_run(k: int, a: float) -> Callable[[random.Random], int]:
    """Tokens a round proposing k commits when each draft is kept with probability a: the
    accepted prefix plus the correction or bonus token."""

    def draw(rng: random.Random) -> int:
        n = 0
        while n < k and rng.random() < a:
            n += 1
        return n + 1

    return draw


def expected_tokens(k: int, a: float) -> float:
    return sum(a**i for i in range(k + 1))


def budget(guard: RateGuard, round_s: float, break_s: float, step_s: float) -> float:
    """What the schedule lets a slow source cost: its first `min_rounds` rounds, one round per
    probe, the pipeline break after each, and the target steps measured on the way (paid
    either way: they are target steps)."""
    return guard.min_rounds * (1 + guard.probes) * (round_s + break_s + step_s)


def test_a_source_slower_than_target_steps_stops_being_asked() -> None:
    """Rounds of 3 target steps that commit 2 tokens: asked twice, then only by probes, as
    far apart as keeps a probe's measured loss (2 rounds of 3.3 ms for 4 tokens: 2.6 ms over
    the steps) within PROBE_SHARE of the steps between (130 rounds, then doubling), not the
    32 of `probe_gap`; the run's time is target-only's plus that budget."""
    guard = RateGuard()
    step, brk, n = 1e-3, 0.3e-3, 256
    t, rounds = simulate(guard, n, step, brk, {"lookup": (3e-3, lambda r: 2)}, lambda i: ["lookup"])
    assert guard.probes == 1  # 130 rounds on, then 260: past the run
    assert guard.benched["lookup"].gap >= 130
    assert rounds["lookup"] == guard.min_rounds * (1 + guard.probes)
    assert t <= n * step + budget(guard, 3e-3, brk, step)
    assert guard.verdict("lookup") == SLOWER
    report = guard.report()
    assert report["lookup"]["guard"] == SLOWER
    assert report["lookup"]["vs_target"] < 1.0


def test_a_request_counts_its_stops_and_the_offers_they_refused() -> None:
    """The report says, per request, how often the source was stopped and how many of its
    offers a stop refused (a plain step each): the slow source above is stopped once its
    first two rounds are measured, then refused at every round until the run ends; a new
    request starts both counts at zero."""
    guard = RateGuard()
    _, rounds = simulate(guard, 64, 1e-3, 0.3e-3, {"lookup": (3e-3, lambda r: 2)},
                         lambda i: ["lookup"])
    report = guard.report()["lookup"]
    assert report["stops"] == 1
    # every round after the stop offered the lookup and was a plain step instead; the three
    # steps before it were not refusals: the step after its first round (a break, which
    # teaches the target arm nothing) and the min_rounds steps that measured the target arm
    assert report["refused"] == rounds[TARGET] - (1 + guard.min_rounds)
    assert report["refused"] > 0
    guard.begin_run()
    assert (guard.report()["lookup"]["stops"], guard.report()["lookup"]["refused"]) == (0, 0)
    assert "stops" not in guard.report()[TARGET]


def test_a_source_faster_than_target_steps_is_used_from_the_start() -> None:
    guard = RateGuard()
    t, rounds = simulate(guard, 256, 1e-3, 0.3e-3, {"lookup": (1.2e-3, lambda r: 4)},
                         lambda i: ["lookup"])
    alone, _ = simulate(None, 256, 1e-3, 0.3e-3, {"lookup": (1.2e-3, lambda r: 4)},
                        lambda i: ["lookup"])
    assert "lookup" not in guard.benched and guard.probes == 0
    # Only the target arm's own measurement (min_rounds pipelined steps after one break).
    assert rounds[TARGET] == guard.min_rounds + 1
    assert t <= alone + (guard.min_rounds + 1) * 1.3e-3
    assert guard.verdict("lookup").startswith("asked")


@pytest.mark.parametrize("at", range(12))
def test_one_stall_does_not_stop_a_source_that_pays(at: int) -> None:
    """One round or step of the first twelve pays a second more (a kernel compiled at first
    use): a lookup 3x faster than target steps is still asked throughout, and the run costs
    what it would have plus that second. Before the clamp, a stall in a lookup round stopped
    it for the rest of the run (1024 rounds: the probe gap its loss implied), 3x slower. The
    prior's step (the curve's single-row forward) is the scale before a step is measured."""
    arms = {"lookup": (1.2e-3, lambda r: 4)}
    prior = Prior(tokens=9.0, seconds=2e-3, step_s=1.5e-3)
    guard = RateGuard(prior=lambda name: prior)
    t, rounds = simulate(guard, 512, 1e-3, 0.3e-3, arms, lambda i: ["lookup"],
                         stall=lambda i: 1.0 if i == at else 0.0)
    alone, _ = simulate(RateGuard(prior=lambda name: prior), 512, 1e-3, 0.3e-3, arms,
                        lambda i: ["lookup"])
    assert "lookup" not in guard.benched and guard.verdict("lookup").startswith("asked")
    assert rounds["lookup"] >= 512 / 4 - 4
    assert t <= alone + 1.0 + 1e-9


def test_a_source_whose_rounds_are_all_dear_still_reads_slow() -> None:
    """Rounds of 100 target steps that commit 33 tokens (the longest proposal, all kept): the
    first is counted as STALL steps, the next as at most STALL times the arm's own recent
    round, so within a few rounds as themselves: the source reads slower than steps and is
    stopped, as it was before the cut."""
    guard = RateGuard(prior=lambda name: Prior(tokens=33.0, seconds=20e-3, step_s=1e-3))
    t, rounds = simulate(guard, 512, 1e-3, 0.3e-3, {"model": (100e-3, lambda r: 33)},
                         lambda i: ["model"])
    assert guard.verdict("model") == SLOWER
    assert rounds["model"] <= guard.min_rounds * (1 + guard.probes) + 1
    assert STALL < 100  # so the first rounds were cut: the verdict survives the cut


def test_a_catch_up_is_counted_whole() -> None:
    """A model round's catch-up grows with the tokens it absorbs (a request's first feeds the
    whole prompt): no round's scale bounds it, so it is never cut as a stall, while the same
    seconds inside the round itself are."""
    guard = RateGuard(prior=lambda name: Prior(tokens=5.0, seconds=2e-3, step_s=1e-3))
    guard.asks("model")  # the prior is consulted: its step and price set the scale
    guard.observe_round("model", 5, 2e-3, catch_up_s=0.5)
    assert guard.arms["model"].seconds == pytest.approx(0.502)
    guard.observe_round("other", 5, 0.502)
    assert guard.arms["other"].seconds == pytest.approx(STALL * 1e-3)  # no price: a step's


def test_probes_back_off_and_find_a_later_stretch_that_pays() -> None:
    """Slow for the first 600 tokens, fast after: probed at growing gaps (at most ~2% of the
    rounds), and used again within one gap of the change."""
    guard = RateGuard()
    rich = 600
    arms = {"lookup": (1.5e-3, lambda r: 1)}
    state = {"produced": 0}

    def offers(produced: int) -> list[str]:
        state["produced"] = produced
        arms["lookup"] = (1.5e-3, (lambda r: 8) if produced >= rich else (lambda r: 1))
        return ["lookup"]

    t, rounds = simulate(guard, 2000, 1e-3, 0.3e-3, arms, offers)
    assert guard.verdict("lookup").startswith("asked")
    # Found within one back-off gap of the change (the gap at most 2 * 32 * 2^k < 600).
    assert rounds["lookup"] >= (2000 - rich - 8 * 512) / 8
    assert t < 2000 * 1e-3 * 0.6  # the copy-rich stretch paid


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    ratio=st.floats(1.05, 6.0),  # a drafting round's cost in target steps
    k=st.integers(1, 8),
    a=st.floats(0.0, 1.0),
    brk=st.floats(0.0, 1.0),  # the pipeline break, in target steps
    seed=st.integers(0, 10_000),
)
def test_the_loss_is_bounded_by_the_probing_budget(ratio, k, a, brk, seed) -> None:
    """Any regime: the guarded run is never slower than target-only by more than the probing
    budget (plus, where the source's rate sits within noise of the target's, what noise lets
    it win: one round per probe), and never slower than the source alone by more than the
    target arm's measurement."""
    step, n = 1e-3, 400
    round_s, break_s = ratio * step, brk * step
    arm = {"src": (round_s, accepted_run(k, a))}
    guard = RateGuard()
    t, rounds = simulate(guard, n, step, break_s, arm, lambda i: ["src"], seed)
    target_only = n * step
    speed = expected_tokens(k, a) / round_s * step  # the source's rate / the target's
    src_rounds = rounds.get("src", 0)
    if speed < 0.8:  # slower: only the schedule's rounds
        assert t <= target_only + budget(guard, round_s, break_s, step) * 2
    if speed < 0.6:  # clearly slower: no probe is lucky enough to pay, the gaps only grow
        assert guard.probes <= 2 + 0.02 * rounds.get(TARGET, 0)
    if speed > 1.25:  # clearly faster: asked from the start, target steps only to measure
        alone, _ = simulate(None, n, step, break_s, arm, lambda i: ["src"], seed)
        assert t <= alone + 4 * (step + break_s) + guard.probes * round_s + 0.1 * alone
        assert src_rounds >= 1
    # Whatever the regime: never much slower than target-only.
    assert t <= target_only * 1.1 + budget(guard, round_s, break_s, step) * 2


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    model_ratio=st.floats(1.05, 4.0),
    model_a=st.floats(0.0, 0.95),
    copy_every=st.integers(3, 40),  # a copy is offered on this share of the text
    copy_len=st.integers(2, 16),
    seed=st.integers(0, 10_000),
)
def test_the_hybrid_is_never_below_its_better_part(
    model_ratio, model_a, copy_every, copy_len, seed
) -> None:
    """The hybrid asks the lookup when it has a copy, else the model (each guarded on its
    own rate); its time is within the probing budget of the better of lookup alone (the
    lookup or plain steps) and model alone (the model every round), each guarded too."""
    step, brk, n = 1e-3, 0.3e-3, 400
    arms = {
        "lookup": (1.1 * step, lambda r: copy_len),  # a copy that is there runs on
        "model": (model_ratio * step, accepted_run(3, model_a)),
    }

    def copies(i: int) -> bool:
        return (i // copy_len) % copy_every == 0

    def hybrid(i: int) -> list[str]:
        return (["lookup"] if copies(i) else []) + ["model"]

    def lookup(i: int) -> list[str]:
        return ["lookup"] if copies(i) else []

    g = RateGuard()
    t_h, _ = simulate(g, n, step, brk, arms, hybrid, seed)
    gl, gm = RateGuard(), RateGuard()
    t_l, _ = simulate(gl, n, step, brk, arms, lookup, seed)
    t_m, _ = simulate(gm, n, step, brk, arms, lambda i: ["model"], seed)
    better = min(t_l, t_m)
    model_budget = budget(g, model_ratio * step, brk, step)
    assert t_h <= better * 1.03 + model_budget * 2


# -- the engine, with a fake clock --------------------------------------------------------------


STEP = 1e-3
PROMPT = [5, 6, 7, 8, 9, 10]


@pytest.fixture(scope="module")
def greedy_text(tiny_pair) -> list[int]:
    """The tiny target's greedy continuation of PROMPT (what the oracle proposes)."""
    from core.decode.engine import Engine

    engine = Engine.from_pair(tiny_pair)
    s = Settings(mode="target-only", temperature=0.0, max_tokens=200, ignore_eos=True)
    summary = [x for x in engine.generate(PROMPT, s)][-1]
    return PROMPT + list(summary.token_ids)


def guarded_run(tiny_pair, text, cost_s: float, tokens: int = 160, policy="cost-aware"):
    """One generation with the oracle source on a fake clock; (events, summary, seconds)."""
    from core.decode.engine import Engine
    from core.dispatch import VerifyCostCurve

    clock = FakeClock()
    engine = Engine.from_pair(tiny_pair)
    engine._target.model = timed(engine._target.model, clock, STEP)  # this engine's forward
    engine._clock = clock
    engine.set_cost_curve(VerifyCostCurve("cpu", "", 16, {"auto": {1: STEP, 9: STEP}}))
    drafter = OracleDrafter("oracle", text, clock, cost_s)
    registry.register("oracle", lambda res: drafter)
    try:
        s = Settings(mode="speculative", draft_source="oracle", policy=policy, k_max=4,
                     temperature=0.0, max_tokens=tokens, ignore_eos=True,
                     traced=False)
        items = list(engine.generate(PROMPT, s))
    finally:
        registry.unregister("oracle")
    events, summary = items[:-1], items[-1]
    return events, summary, sum(e.timings.total for e in events)


@pytest.fixture(scope="module")
def target_only_s(tiny_pair) -> float:
    """Target-only's seconds on the same fake clock: one step a token."""
    from core.decode.engine import Engine

    clock = FakeClock()
    engine = Engine.from_pair(tiny_pair)
    engine._target.model = timed(engine._target.model, clock, STEP)
    engine._clock = clock
    s = Settings(mode="target-only", temperature=0.0, max_tokens=160, ignore_eos=True,
                 traced=False)
    events = [x for x in engine.generate(PROMPT, s)][:-1]
    return sum(e.timings.total for e in events)


def test_engine_stops_a_source_slower_than_target_steps(tiny_pair, greedy_text, target_only_s):
    """Every draft is accepted, so the cost-aware policy keeps drafting; its rounds cost 40
    target steps of host time, which no curve knows. The guard stops it after two rounds;
    the run's time is target-only's plus the probing budget; the text is the target's."""
    cost = 40 * STEP
    events, summary, seconds = guarded_run(tiny_pair, greedy_text, cost)
    drafted = [e for e in events if e.proposed]
    # min_rounds (2), then a probe of 2 rounds after 32 rounds, then after 64 more
    assert 2 <= len(drafted) <= 2 * (1 + 2)
    worst = cost + 6 * STEP  # a round: its host cost, its verify, the break after it
    assert seconds <= target_only_s + len(drafted) * worst
    # Without the guard (fixed k) the same source makes the run several times slower.
    _, _, unguarded = guarded_run(tiny_pair, greedy_text, cost, policy="fixed")
    assert unguarded > 3 * target_only_s
    assert list(summary.token_ids) == greedy_text[len(PROMPT) : len(PROMPT) + 160]
    assert summary.proposed == sum(e.proposed for e in events)  # exact counts
    assert summary.accepted == sum(e.accepted for e in events)
    row = summary.per_source["oracle"]
    assert row["guard"] == SLOWER and row["vs_target"] < 1.0
    assert summary.per_source["none"]["measured_tok_s"] > 0


def test_engine_keeps_a_paying_source_through_one_stall(tiny_pair, greedy_text, target_only_s):
    """The source's first proposal stalls for a second (a kernel compiled at first use), its
    others cost nothing: the engine still drafts from it to the end, so the run is its
    unstalled time plus that second, not a run of plain steps (before the stall was cut,
    the guard stopped the source for the rest of the run)."""
    stalled = {"left": 1}
    real_propose = OracleDrafter.propose

    def propose(self, request):  # noqa: ANN001, ANN202
        if stalled["left"]:
            stalled["left"] -= 1
            self.clock.t += 1.0
        return real_propose(self, request)

    _, _, unstalled = guarded_run(tiny_pair, greedy_text, 0.0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OracleDrafter, "propose", propose)
        events, summary, seconds = guarded_run(tiny_pair, greedy_text, 0.0)
    assert not stalled["left"]
    assert summary.per_source["oracle"]["guard"].startswith("asked")
    assert seconds <= unstalled + 1.0 + 4 * STEP
    assert sum(1 for e in events if not e.proposed) <= 3 + 2
    assert list(summary.token_ids) == greedy_text[len(PROMPT) : len(PROMPT) + 160]
    # the source's policy as the run ended: its cost scales (plain steps, drafted rounds),
    # which the bench keeps per request; plain steps ("none") have no policy of their own
    scale = summary.per_source["oracle"]["cost_scale"]
    assert len(scale) == 2 and all(x > 0.0 for x in scale)
    assert "cost_scale" not in summary.per_source.get("none", {})


@pytest.mark.parametrize("flagged", [True, False])
def test_engine_leaves_out_the_rounds_that_built_an_attention_plan(
    tiny_pair, greedy_text, flagged
):
    """Run 13 on the H200: a lookup's first two rounds each built a cuDNN plan (a new row
    bucket), so two of its first four rounds cost tens of ms, the stall cut could not save it
    (each round's scale grows with the last) and the guard stopped it at 0.17x of target
    steps. Here the oracle's first two rounds cost 40 steps each. Where the verification says
    it built a plan (the hardware query, `took_new_plan`, faked; CPU has no cuDNN), those
    rounds are left out and the source is asked to the end; where it does not, the same
    rounds stop it, so the flag is what keeps it."""
    import core.decode.speculative as speculative

    dear = {"left": 2, "built": False}
    real_propose = OracleDrafter.propose

    def propose(self, request):  # noqa: ANN001, ANN202
        if dear["left"]:
            dear["left"] -= 1
            dear["built"] = True
            self.clock.t += 40 * STEP
        return real_propose(self, request)

    def took_new_plan() -> bool:
        built, dear["built"] = dear["built"], False
        return built and flagged

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OracleDrafter, "propose", propose)
        mp.setattr(speculative, "took_new_plan", took_new_plan)
        events, summary, _ = guarded_run(tiny_pair, greedy_text, 0.0)
    row = summary.per_source["oracle"]
    assert not dear["left"]
    if flagged:
        assert row["plan_rounds"] == 2
        assert row["guard"].startswith("asked")
        assert sum(1 for e in events if not e.proposed) <= 3 + 2
    else:
        assert row["plan_rounds"] == 0
        assert row["guard"] == SLOWER
    assert list(summary.token_ids) == greedy_text[len(PROMPT) : len(PROMPT) + 160]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.floats(1e-4, 0.5), st.booleans()), max_size=40))
def test_plan_rounds_are_invisible_to_the_rates(rounds) -> None:
    """Whatever the rounds and wherever the plans fall, a guard that left the flagged rounds
    out holds exactly the rates of one that never saw them (the same clamps, the same decayed
    sums, the same long window), and counts each flagged round once."""
    seen, blind = RateGuard(), RateGuard()
    for g in (seen, blind):
        g.observe_step(1e-3)
        g.observe_step(1e-3)
    for tokens, seconds, plan in rounds:
        seen.observe_round("src", tokens, seconds, new_plan=plan)
        if not plan:
            blind.observe_round("src", tokens, seconds)
    assert seen.plan_rounds.get("src", 0) == sum(plan for *_, plan in rounds)
    a, b = seen.arms.get("src"), blind.arms.get("src")
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert (a.rounds, a.tokens, a.seconds) == (b.rounds, b.tokens, b.seconds)
        assert a.long.upper(2.0) == b.long.upper(2.0)
    assert seen.round == blind.round + sum(plan for *_, plan in rounds)


def test_a_plan_round_keeps_its_place_and_its_catch_up() -> None:
    """Left out of the rates, a plan round still counts in the schedule (the round counter,
    the source's last round) and its catch-up is still charged where the source has rounds:
    the catch-up is the draft's own cost whatever the verification built."""
    guard = RateGuard()
    guard.observe_step(1e-3)
    guard.observe_step(1e-3)
    guard.observe_round("model", 3, 0.2, new_plan=True)
    assert "model" not in guard.arms and guard.plan_rounds == {"model": 1}
    assert guard.report()["model"]["plan_rounds"] == 1
    assert guard.verdict("model") == "measuring"
    guard.observe_round("model", 3, 2e-3)
    before = guard.arms["model"].seconds
    guard.observe_round("model", 3, 0.2, catch_up_s=0.05, new_plan=True)
    assert guard.arms["model"].seconds == pytest.approx(before + 0.05)
    assert guard.arms["model"].rounds == 1 and guard.round == 5


def test_engine_uses_a_source_faster_than_target_steps_from_the_start(
    tiny_pair, greedy_text, target_only_s
):
    events, summary, seconds = guarded_run(tiny_pair, greedy_text, 0.0)
    assert events[0].proposed >= 1  # from the first round
    assert summary.per_source["oracle"]["guard"].startswith("asked")
    assert seconds < 0.5 * target_only_s
    # Target steps: the target arm's measurement (the step after the break, then two) and the
    # request's last token (no draft fits before it).
    assert sum(1 for e in events if not e.proposed) <= 3 + 2
    assert list(summary.token_ids) == greedy_text[len(PROMPT) : len(PROMPT) + 160]


def test_the_step_after_a_round_is_charged_to_the_rounds_policy(
    tiny_pair, greedy_text, monkeypatch
) -> None:
    """On the fake clock a stretch's first step builds two forwards before its read: it
    costs two steps where a pipelined one costs one, the pipeline break a round causes. That
    step is the round's cost: the policies observe it as no step's seconds (their step scale
    would take the break for a dearer step, and drafting for cheaper), and the round's own
    policy is charged its extra step (`charge`), so it prices the next rounds with it."""
    from core.cost.policy import CostAwarePolicy

    log: list[tuple[str, int, float | None]] = []
    observe, charge = CostAwarePolicy.observe, CostAwarePolicy.charge

    def observed(self, proposed, accepted, seconds=None):  # noqa: ANN001, ANN202
        log.append(("observe", proposed, seconds))
        return observe(self, proposed, accepted, seconds)

    def charged(self, proposed, seconds):  # noqa: ANN001, ANN202
        log.append(("charge", proposed, seconds))
        return charge(self, proposed, seconds)

    monkeypatch.setattr(CostAwarePolicy, "observe", observed)
    monkeypatch.setattr(CostAwarePolicy, "charge", charged)
    events, _, _ = guarded_run(tiny_pair, greedy_text, 3 * STEP)  # 5 in 4: pays
    breaks = sum(1 for a, b in zip(events, events[1:], strict=False) if a.proposed and not b.proposed)
    assert breaks >= 2  # the target arm's first measurement, and the request's end
    charges = [x for x in log if x[0] == "charge"]
    assert len(charges) == breaks
    assert all(k >= 1 for _, k, _ in charges)
    # the first round came before any plain step: no pipelined step to compare its break with
    assert charges[0][2] == 0.0 and events[0].proposed
    assert all(extra == pytest.approx(STEP) for _, _, extra in charges[1:])
    # The policy that declines the step after a round (the request's last tokens, where no
    # draft fits) observes it unpriced, then its round is charged the break.
    unpriced = [i for i, x in enumerate(log) if x[0] == "charge" and log[i - 1] == ("observe", 0, None)]
    assert unpriced
    steps = [sec for what, k, sec in log if what == "observe" and k == 0 and sec]
    assert all(sec < 1.5 * STEP for sec in steps)  # no break read as a plain step


def test_fixed_k_runs_as_asked_unguarded(tiny_pair, greedy_text) -> None:
    """The guard serves the policy that promises speed; a fixed k is an experiment."""
    events, summary, _ = guarded_run(tiny_pair, greedy_text, 40 * STEP, tokens=40,
                                     policy="fixed")
    assert all(e.proposed for e in events[:-1])
    assert "guard" not in summary.per_source.get("oracle", {})


# -- what the app and the reports show ----------------------------------------------------------


def test_a_source_asked_below_the_target_s_rate_is_not_said_to_be_faster() -> None:
    """A source whose recent rate is below the target steps' but within its rounds' spread
    stays asked, and its words say so: run 9's lookup at T = 0.7 was reported "asked: faster
    than target steps" at 0.38-0.95x of them."""
    guard = RateGuard()
    for _ in range(8):
        guard.observe_step(1e-3)  # the target arm: 1,000 tok/s
    for tokens in (1, 9):  # 1 and 9 tokens in 6 ms each: 833 tok/s, a wide spread
        guard.observe_round("lookup", tokens, 6e-3)
    assert "lookup" not in guard.benched
    assert guard.verdict("lookup") == WITHIN
    assert guard.report()["lookup"]["vs_target"] < 1.0
    for _ in range(2):
        guard.observe_round("lookup", 9, 6e-3)  # now faster than the steps
    assert guard.verdict("lookup") == FASTER


def test_the_decision_is_shown_in_words_and_carried_by_bench_rows() -> None:
    from core.bench.report import report_markdown
    from core.bench.requests import record_timed
    from core.bench.results import BenchReport, BenchResult
    from core.cost.guard import guard_lines

    guard = RateGuard()
    simulate(guard, 128, 1e-3, 0.3e-3, {"model": (3e-3, lambda r: 2), "lookup": (1e-3, lambda r: 5)},
             lambda i: ["lookup", "model"] if i % 20 < 10 else ["model"])
    per = {"none": {"rounds": 3}, "model": {"rounds": 2}, "lookup": {"rounds": 9}}
    for name, row in guard.report().items():
        per["none" if name == TARGET else name].update(row)
    lines = guard_lines(per)
    assert any(x.startswith("model: ") and f": {SLOWER}" in x and "x target steps" in x
               for x in lines)
    assert any(x.startswith("lookup: ") and "asked" in x for x in lines)
    assert lines[-1].startswith("target steps: ")
    assert guard_lines({"model": {"rounds": 4}}) == []  # an unguarded run says nothing
    assert not any("left out" in x for x in lines)  # no plan was built in the simulation
    planned = {**per, "lookup": {**per["lookup"], "plan_rounds": 2}}
    assert any(x.startswith("lookup: ") and x.endswith("(2 rounds left out: an attention plan "
                                                       "built)") for x in guard_lines(planned))
    # the stopped model's offers ran as target steps: the report says how many (the guard's
    # own count, this run's), and a source never stopped says nothing of it
    refused = per["model"]["refused"]
    assert refused > 0 and per["lookup"]["refused"] == 0
    assert any(x.startswith("model: ") and f"({refused} offers run as target steps while "
               "stopped)" in x for x in lines)
    assert not any("while stopped" in x for x in lines if x.startswith("lookup: "))

    class Summary:  # what record_timed reads of a RunSummary
        e2e_s = ttft_s = 1.0
        decode_tok_s, rounds, tokens, mean_tv, fallback_reason = 100.0, 14, 128, None, None
        token_ids = ()
        per_source = per

    class Req:
        summary, positions, sources, kernels, proposals, origins = Summary(), None, {}, {}, {}, []
        tv_moved = 0.0
        steps_s: list[float] = []  # no plain steps recorded: step_ms is None

    r = BenchResult("hybrid", "hybrid", {"mode": "speculative"})
    r.positions.merge = lambda other: None  # type: ignore[method-assign]
    record_timed(r, Req(), 0, keep_output=False)  # type: ignore[arg-type]
    record_timed(r, Req(), 1, keep_output=False)  # type: ignore[arg-type]
    row = r.to_dict()["guard"]
    assert row["model"]["guard"] == [SLOWER, SLOWER]
    assert len(row["none"]["measured_tok_s"]) == 2
    protocol = {"prompt_tokens": 9, "tokens": 128, "warmup": 1, "invocations": 1, "seeds": 2,
                "nll_basis": "-"}
    md = report_markdown(BenchReport({}, protocol, [r]))
    assert "### Measured guard" in md and SLOWER in md


# -- the round's own cost: one host sync ------------------------------------------------------


@pytest.mark.parametrize("source", ["hybrid", "lookup", "model"])
def test_an_untraced_round_syncs_the_host_once(tiny_pair, greedy_text, monkeypatch, source):
    """Counted, not read from the code: every mx.eval while an untraced run goes; a drafting
    round (after each source's first, whose catch-up is the draft's prefill) evaluates once,
    a model's lag behind copies and target steps included, and a pipelined target step not
    at all (its one read is the token's .item(), with the next step already queued)."""
    from core.decode.engine import Engine

    engine = Engine.from_pair(tiny_pair)
    evals: list[int] = []
    real = mx.eval

    def counting(*arrays: Any) -> Any:
        evals.append(1)
        return real(*arrays)

    prompt = greedy_text[:40] + greedy_text[6:40]  # something to copy, and new text after it
    s = Settings(mode="speculative", draft_source=source, policy="heuristic", k=3,
                 temperature=0.0, max_tokens=48, ignore_eos=True, traced=False)
    monkeypatch.setattr(mx, "eval", counting)
    gen = engine.generate(prompt, s)
    seen: set[str] = set()
    per_round: list[tuple[str, int]] = []
    while True:
        evals.clear()
        item = next(gen)
        if not hasattr(item, "index"):
            break
        if item.source and item.source in seen:
            per_round.append((item.source, len(evals)))
        seen.add(item.source)
        if not item.source:
            per_round.append(("step", len(evals)))
    drafted = [n for name, n in per_round if name != "step"]
    assert drafted, per_round  # the run drafted after its first round of each source
    assert all(n == 1 for n in drafted), per_round
    assert all(n == 0 for name, n in per_round if name == "step"), per_round
