"""The measured guard across requests, and its calibrated prior (core/cost/guard.py,
core/cost/guard_memory.py), with fake clocks: the law of issue 28 held over several
requests of the same settings, as a bench's seeds and a chat's turns make them.

- the second request of a stopped source asks it only on the probe schedule (no new
  "measuring" rounds), and a faster source is used from its first round;
- a changed workload (a later request that copies well) is still found by the probes;
- a source whose best calibrated round cannot beat a plain target step is not asked before
  its first probe, one that clearly can is asked at once, and one in between waits for the
  target arm's measured step (plain steps: no loss);
- the engine keeps one guard per settings across `generate` calls and `reset()`, bounded.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from core.cost.guard import SLOWER, TARGET, Prior, RateGuard, guard_lines, prior_of
from core.cost.guard_memory import GuardMemory, guard_key
from core.drafting import registry
from core.settings import Settings
from tests.helpers.fake_clock import FakeClock, OracleDrafter, timed

STEP = 1e-3  # a pipelined target step
BREAK = 0.3e-3  # what the step after a drafting round pays above it


def request(
    guard: RateGuard,
    n_tokens: int,
    arms: dict[str, tuple[float, Callable[[random.Random], int]]],
    offers: Callable[[int], Sequence[str]],
    seed: int = 0,
) -> tuple[float, list[str]]:
    """One request as the engine makes it (core/decode/speculative.py): each round the first
    offered source the guard asks drafts (its policy always wants to: the guard's worst
    case), else a plain target step, which pays BREAK more right after a drafting round.
    Returns the request's seconds and which arm ran each round."""
    guard.begin_run()
    rng = random.Random(seed)
    produced, t, prev = 0, 0.0, None
    order: list[str] = []
    while produced < n_tokens:
        name = None
        if not guard.target_probe_due():
            offered = sorted(offers(produced), key=guard.rank)
            name = next((o for o in offered if guard.asks(o)), None)
        if name is None:
            secs = STEP + (BREAK if prev else 0.0)
            guard.observe_step(secs, after=prev)
            produced, prev, name = produced + 1, None, TARGET
        else:
            secs, tokens = arms[name][0], arms[name][1](rng)
            guard.observe_round(name, tokens, secs)
            produced, prev = produced + tokens, name
        t += secs
        order.append(name)
    return t, order


def always(name: str) -> Callable[[int], list[str]]:
    return lambda produced: [name]


def probe_rounds_due(guard: RateGuard, start: int, end: int) -> int:
    """The rounds the schedule lets a stopped source draft between rounds start and end:
    `min_rounds` per bench that expires in that window."""
    bench = guard.benched.get("src")
    return 0 if bench is None or not start <= bench.until < end else guard.min_rounds


# -- across requests -------------------------------------------------------------------------


def test_a_second_request_asks_a_stopped_source_only_on_its_probe_schedule() -> None:
    """Rounds of 3 target steps committing 2 tokens: the first request measures and stops
    the source; the second starts where the first left off, so it pays no measuring rounds
    of its own, only the probes its schedule says are due, and its time is target-only's
    plus those probes."""
    guard = RateGuard()
    slow = {"src": (3 * STEP, lambda r: 2)}
    n = 256
    request(guard, n, slow, always("src"))
    assert guard.verdict("src") == SLOWER
    start = guard.round
    due = probe_rounds_due(guard, start, start + n)
    t2, order2 = request(guard, n, slow, always("src"))
    assert order2[0] == TARGET  # no "measuring" round at the request's start
    assert order2.count("src") <= due + guard.min_rounds  # at most one probe in the window
    assert t2 <= n * STEP + order2.count("src") * (3 * STEP + BREAK + STEP)
    # A fresh guard per request (what each seed had before) asks it at the start again.
    fresh = RateGuard()
    _, order_fresh = request(fresh, n, slow, always("src"))
    assert order_fresh.count("src") > order2.count("src")
    assert "src" in order_fresh[: 2 * fresh.min_rounds + 2]


def test_the_report_is_the_requests_own_and_says_what_was_carried() -> None:
    guard = RateGuard()
    fast = {"src": (1.2 * STEP, lambda r: 4)}
    request(guard, 64, fast, always("src"))
    first = guard.report()
    request(guard, 64, fast, always("src"))
    second = guard.report()
    assert first["src"]["earlier_rounds"] == 0
    assert second["src"]["earlier_rounds"] == first["src"]["measured_rounds"]
    assert second["src"]["measured_rounds"] == 16  # 64 tokens at 4 a round: this request's
    assert second["src"]["guard"].startswith("asked")
    assert second["src"]["measured_tok_s"] == pytest.approx(4 / (1.2 * STEP))


def test_a_faster_source_is_used_from_the_first_round_of_the_next_request() -> None:
    """The target arm was measured in the first request: the second needs no target
    probe, so its first round drafts."""
    guard = RateGuard()
    fast = {"src": (1.2 * STEP, lambda r: 4)}
    _, order1 = request(guard, 128, fast, always("src"))
    assert order1[0] == "src"
    _, order2 = request(guard, 128, fast, always("src"))
    assert TARGET not in order2[:-1]  # its last token may be a step (nothing to draft)
    assert guard.probes == 0


def test_a_later_request_that_copies_well_is_found_by_the_probes() -> None:
    """Requests 1-3 copy nothing (1 token a round), so the source is stopped and its gaps
    grow; request 4 copies 8 tokens a round: found at the next probe, within the largest gap
    the schedule reached, and that request runs mostly on the source."""
    guard = RateGuard()
    arms = {"src": (1.5 * STEP, lambda r: 1)}
    for _ in range(3):
        request(guard, 256, arms, always("src"))
    assert guard.verdict("src") == SLOWER
    gap = guard.benched["src"].until - guard.round
    arms["src"] = (1.5 * STEP, lambda r: 8)
    t4, order4 = request(guard, 2048, arms, always("src"))
    first = order4.index("src")
    assert first <= gap
    assert guard.verdict("src").startswith("asked")
    assert t4 < 2048 * STEP * 0.6


def test_over_requests_the_loss_stays_within_the_probing_budget() -> None:
    """Eight requests of a source 2.5 target steps a round at 1 token: stopped after its
    first two rounds, then asked only by probes (gaps 32, 64, ... rounds, over all eight
    requests); the time is target-only's plus, per drafted round, what it cost above the
    step it replaced."""
    guard = RateGuard()
    arms = {"src": (2.5 * STEP, lambda r: 1)}
    total, drafted = 0.0, 0
    for seed in range(8):
        t, order = request(guard, 256, arms, always("src"), seed)
        total += t
        drafted += order.count("src")
    assert drafted == guard.min_rounds * (1 + guard.probes)
    # Its probes lose 2 x 1.8 ms over the steps they replace: a new request brings its probe
    # within 180 rounds (PROBE_SHARE), so about one probe a request, never more than two
    assert guard.probes <= 2 * 8
    assert total <= 8 * 256 * STEP + drafted * (2.5 * STEP + BREAK + STEP)
    loss = total - 8 * 256 * STEP
    assert loss <= 0.02 * 8 * 256 * STEP + guard.min_rounds * (2.5 * STEP + BREAK) * 3


def test_a_new_request_probes_a_cheap_stopped_source_early_and_a_dear_one_late() -> None:
    """After five requests that copy nothing the doubled gaps have grown past a request; a
    sixth request starts. A lookup whose rounds cost 1.6 steps for 1 token (a probe loses
    about 1.5 steps over the steps it replaces) is probed within its budget gap (under 100
    rounds: 2% of them pay for the probe), so a request that copies well is found early; a
    model round of 6 steps for 1-2 tokens keeps its schedule (a probe would lose ~10 steps:
    its budget gap is longer than a request)."""
    for cost, draw, early in ((1.6, lambda r: 1, True), (6.0, lambda r: 1 + (r.random() < 0.5),
                                                         False)):
        guard = RateGuard()
        arms = {"src": (cost * STEP, draw)}
        for seed in range(5):
            request(guard, 256, arms, always("src"), seed)
        assert guard.verdict("src") == SLOWER
        before = guard.benched["src"].until - guard.round
        guard.begin_run()
        due = guard.benched["src"].until - guard.round
        budget = guard._loss_gap("src")
        assert budget is not None
        assert due == min(before, budget)
        if early:  # within its budget gap, well inside the request, though its gaps doubled
            assert due <= budget <= 100 < guard.benched["src"].gap
        else:  # a probe every other request at most: its schedule, not the new request
            assert budget > 256


def test_over_requests_a_noisy_slow_source_costs_at_most_twice_the_budget() -> None:
    """Rounds of 1 or 2 tokens for 2.5 steps (0.6x of target steps): a lucky pair of rounds
    may keep it for a while (the guard stops a source only beyond its rounds' spread), so
    the bound is twice the schedule's, as tests/core/cost/test_guard.py holds within a request."""
    guard = RateGuard()
    arms = {"src": (2.5 * STEP, lambda r: 1 + (r.random() < 0.5))}
    total = 0.0
    for seed in range(8):
        total += request(guard, 256, arms, always("src"), seed)[0]
    budget = guard.min_rounds * (1 + guard.probes) * (2.5 * STEP + BREAK + STEP)
    assert total <= 8 * 256 * STEP + 2 * budget
    assert guard.probes <= 0.01 * guard.round  # well under 2% of the rounds


# -- the prior -------------------------------------------------------------------------------


def slow_prior(name: str) -> Prior:
    """A model whose draft step costs 0.9 of a curve step: its best round (k = 8, every
    draft accepted) commits 9 tokens in 8 x 0.9 + 1.5 steps, 1.03 per curve step."""
    return Prior(tokens=9, seconds=(8 * 0.9 + 1.5) * 1.5 * STEP, step_s=1.5 * STEP)


def test_a_source_that_cannot_beat_a_target_step_even_at_full_acceptance_waits_for_a_probe():
    """Within PRIOR_MARGIN of the curve's (dearer, synced) step the prior waits for the
    measured pipelined step (1 ms against the curve's 1.5): 9 tokens in 13.8 ms cannot beat
    it, so the source is not asked before its first probe, 32 rounds on, and it is not judged
    by the prior again."""
    guard = RateGuard(prior=slow_prior)
    slow = {"src": (13.8 * STEP, lambda r: 3)}
    _, order = request(guard, 200, slow, always("src"))
    first = order.index("src")
    assert order[:first] == [TARGET] * first
    assert first >= guard.probe_gap
    assert guard.probes >= 1
    assert "src" not in guard.by_prior  # the probe measured it; the clock judges from then on
    assert guard.verdict("src") == SLOWER
    assert order.count("src") <= guard.min_rounds * guard.probes


def test_the_prior_stops_at_once_what_cannot_beat_even_the_curves_step() -> None:
    guard = RateGuard(prior=lambda name: Prior(tokens=3, seconds=5 * STEP, step_s=1.5 * STEP))
    assert not guard.asks("src")
    assert guard.verdict("src") == SLOWER
    row = guard.report()["src"]
    assert row["basis"] == "calibration" and row["measured_tok_s"] is None
    lines = guard_lines({"none": {"measured_tok_s": None}, "src": row})
    assert lines == ["src: -: not asked: slower than target steps (by the calibration: its "
                     "best round is slower)"]


def test_a_source_that_clearly_pays_is_asked_from_the_first_round() -> None:
    """A lookup's best round (9 copies verified for 1.3 steps) is far past the margin: asked
    at once, no target probe first."""
    guard = RateGuard(prior=lambda name: Prior(tokens=9, seconds=1.3 * STEP, step_s=STEP))
    fast = {"src": (1.3 * STEP, lambda r: 5)}
    _, order = request(guard, 128, fast, always("src"))
    assert order[0] == "src"
    assert "src" not in guard.by_prior


def test_a_prior_that_is_wrong_is_corrected_by_the_first_probe() -> None:
    """The calibration says the source cannot pay; its rounds do (4 tokens for 1.2 steps):
    stopped until the first probe, then asked for the rest of the run."""
    guard = RateGuard(prior=lambda name: Prior(tokens=2, seconds=4 * STEP, step_s=STEP))
    fast = {"src": (1.2 * STEP, lambda r: 4)}
    _, order = request(guard, 400, fast, always("src"))
    first = order.index("src")
    assert first == guard.probe_gap
    assert guard.verdict("src").startswith("asked")
    assert order[first:].count(TARGET) <= 3  # the break's step, and the request's end


def test_the_prior_counts_the_measured_pipeline_break() -> None:
    """A best round of 4 tokens in 3.2 steps beats a step by PAY_MARGIN (1.25 tokens a
    step) until the measured break (1 step after every drafting round) is added: then it
    cannot (0.95)."""
    prior = Prior(tokens=4, seconds=3.2 * STEP, step_s=STEP)
    guard = RateGuard(prior=lambda name: prior if name == "late" else None)
    guard.begin_run()
    for _ in range(4):  # the target arm, and a break of one step after another source
        guard.observe_step(STEP)
    guard.observe_round("other", 2, 2 * STEP)
    guard.observe_step(2 * STEP, after="other")
    assert guard.break_s == pytest.approx(STEP)
    assert not guard.asks("late")
    no_break = RateGuard(prior=lambda name: prior)
    for _ in range(4):
        no_break.observe_step(STEP)
    assert no_break.asks("late")


def test_prior_of_takes_the_best_full_acceptance_round_of_a_cost_aware_policy() -> None:
    from core.cost.policy import CostAwarePolicy

    policy = CostAwarePolicy(lambda rows: STEP * (1 + 0.1 * rows), 0.9 * STEP, k_max=8)
    p = prior_of(policy)
    assert p is not None
    rates = {k: (k + 1) / policy.cost.seconds(k) for k in range(1, 9)}
    assert p.tokens / p.seconds == pytest.approx(max(rates.values()))
    assert p.step_s == pytest.approx(1.1 * STEP)
    assert prior_of(object()) is None  # a fixed or adaptive k has no price


# -- the engine keeps them ---------------------------------------------------------------------


def test_guard_memory_is_one_guard_per_settings_and_bounded() -> None:
    memory = GuardMemory(size=2)
    a = Settings(policy="cost-aware", draft_source="lookup")
    g = memory.get(a)
    assert memory.get(a.replace(seed=7, max_tokens=64)) is g  # a seed and a length share it
    assert guard_key(a) != guard_key(a.replace(temperature=0.0))
    memory.get(a.replace(temperature=0.0))
    memory.get(a.replace(temperature=1.0))  # a third: the least recently used goes
    assert len(memory) == 2
    assert memory.get(a) is not g


PROMPT = [5, 6, 7, 8, 9, 10]


@pytest.fixture(scope="module")
def greedy_text(tiny_pair) -> list[int]:
    from core.decode.engine import Engine

    engine = Engine.from_pair(tiny_pair)
    s = Settings(mode="target-only", temperature=0.0, max_tokens=120, ignore_eos=True)
    return PROMPT + list([x for x in engine.generate(PROMPT, s)][-1].token_ids)


def fake_clock_engine(
    tiny_pair, draft_step_s: float | None = None, curve: dict[str, dict[int, float]] | None = None
) -> tuple[Any, FakeClock]:
    from core.decode.engine import Engine
    from core.dispatch import VerifyCostCurve

    clock = FakeClock()
    engine = Engine.from_pair(tiny_pair)
    engine._target.model = timed(engine._target.model, clock, STEP)
    if engine._draft is not None and draft_step_s is not None:
        engine._draft.model = timed(engine._draft.model, clock, draft_step_s)
    engine._clock = clock
    times = curve or {"auto": {1: STEP, 9: STEP}}
    engine.set_cost_curve(VerifyCostCurve("cpu", "", 16, times, draft_step_s=draft_step_s))
    return engine, clock


def test_the_engine_keeps_a_stopped_source_stopped_in_the_next_request(tiny_pair, greedy_text):
    """Its rounds cost 40 target steps of host time, which no curve knows: the first request
    stops it after its two rounds; the second, after reset() as the bench does per request,
    drafts only on the probe schedule, not at its start; forget_guards() starts afresh."""
    engine, clock = fake_clock_engine(tiny_pair)
    oracle = OracleDrafter("oracle", greedy_text, clock, 40 * STEP)
    registry.register("oracle", lambda res: oracle)
    try:
        s = Settings(mode="speculative", draft_source="oracle", policy="cost-aware", k_max=4,
                     temperature=0.0, max_tokens=100, ignore_eos=True, traced=False)

        def run() -> tuple[list[Any], Any]:
            engine.reset()
            items = list(engine.generate(PROMPT, s))
            return items[:-1], items[-1]

        first, summary1 = run()
        assert summary1.per_source["oracle"]["guard"] == SLOWER
        guard = engine.guard_for(s)
        start, due = guard.round, guard.benched["oracle"].until
        second, summary2 = run()
        drafted = [i for i, e in enumerate(second) if e.proposed]
        assert not second[0].proposed  # no measuring round at its start
        assert all(start + i >= due for i in drafted)  # only once the probe is due
        assert summary2.per_source["oracle"]["earlier_rounds"] >= 2
        assert list(summary2.token_ids) == greedy_text[len(PROMPT) : len(PROMPT) + 100]
        engine.forget_guards()
        third, _ = run()
        assert third[0].proposed  # a fresh guard asks it again from the start
    finally:
        registry.unregister("oracle")


def test_the_engine_stops_the_model_by_the_calibrations_prior(tiny_pair) -> None:
    """The curve times a target step at 1.5 ms (one forward and a host sync) and a draft
    step at 1.3; the fake clock's pipelined step costs 1 ms (its stretch's first, 2). The
    policy, on the curve alone, thinks 8 accepted drafts pay (9 tokens in 11.9 ms against 1.5
    a step) and drafts; the guard's prior waits for the measured steps (4 tokens in 5 ms, the
    decayed rate 825 tok/s), which that best round (756) cannot beat, so the model drafts no
    round before its first probe."""
    curve = {"auto": {1: 1.5 * STEP, 9: 1.5 * STEP}}
    engine, _ = fake_clock_engine(tiny_pair, draft_step_s=1.3 * STEP, curve=curve)
    s = Settings(mode="speculative", draft_source="model", policy="cost-aware", k_max=8,
                 temperature=0.0, max_tokens=24, ignore_eos=True, traced=False)
    items = list(engine.generate(PROMPT, s))
    events, summary = items[:-1], items[-1]
    assert not any(e.proposed for e in events)
    row = summary.per_source["model"]
    assert row["guard"] == SLOWER and row["basis"] == "calibration"
    # The same run without the guard's prior: the policy drafts in its first rounds.
    engine2, _ = fake_clock_engine(tiny_pair, draft_step_s=1.3 * STEP, curve=curve)
    engine2.guard_for(s).prior = None
    events2 = list(engine2.generate(PROMPT, s))[:-1]
    assert any(e.proposed for e in events2)


def test_a_guarded_runs_summary_passes_the_run_files_checks(tiny_pair, greedy_text) -> None:
    """A saved cost-aware run keeps the guard's words per source ("measuring", the
    sentence, "calibration"): `profiles show` reads it back instead of refusing it."""
    from core.events import RunSummary
    from core.profile.run_check import check_summary

    engine, clock = fake_clock_engine(tiny_pair)
    oracle = OracleDrafter("oracle", greedy_text, clock, 40 * STEP)
    registry.register("oracle", lambda res: oracle)
    try:
        s = Settings(mode="speculative", draft_source="oracle", policy="cost-aware", k_max=4,
                     temperature=0.0, max_tokens=40, ignore_eos=True, traced=False)
        summary = list(engine.generate(PROMPT, s))[-1]
    finally:
        registry.unregister("oracle")
    d = summary.to_dict()
    assert d["per_source"]["oracle"]["guard"] == SLOWER
    check_summary(d)
    assert RunSummary.from_dict(d).per_source["oracle"]["guard"] == SLOWER
    d["per_source"]["oracle"]["guard"] = 3
    with pytest.raises(TypeError, match="guard must be a string"):
        check_summary(d)


def test_rates_after_a_mid_run_change_go_under_the_new_settings(tiny_pair, greedy_text):
    """A key pressed mid-run (here the TV budget) applies from the next round, and so does
    the guard: every round and step after the change is measured under the new settings'
    key, every one before under the old, none lost (the guard was once chosen per run, so
    the new settings' rates went under the old key)."""
    engine, clock = fake_clock_engine(tiny_pair)
    oracle = OracleDrafter("oracle", greedy_text, clock, 2 * STEP)
    registry.register("oracle", lambda res: oracle)
    try:
        s0 = Settings(mode="speculative", draft_source="oracle", policy="cost-aware", k_max=4,
                      temperature=0.0, max_tokens=60, ignore_eos=True, traced=False)
        s1 = s0.replace(tv_budget=0.5)
        seen: list[Any] = []
        switch = 8
        for item in engine.generate(PROMPT, s0, settings_source=lambda: s1 if len(seen) >= switch
                                    else s0):
            seen.append(item)
    finally:
        registry.unregister("oracle")
    events = seen[:-1]
    before, after = engine.guard_for(s0), engine.guard_for(s1)
    assert guard_key(s0) != guard_key(s1)
    assert after.round > 0 and after.runs == 1  # measured under its own key, begun once
    assert before.round + after.round == len(events)
    assert before.round in (switch, switch + 1)  # a round may end after the key is read
