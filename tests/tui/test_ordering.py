"""A run's messages are folded in the engine's order whatever order they are delivered in.

The sequencer alone, under every order hypothesis finds; then the app, fed a recorded run's
messages in adversarial orders (rounds after the finish, interleaved with the next run's
start), must end in the same state as when they came in order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from core.settings import Settings
from tests.helpers.app import Script, chat, ready
from tui.messages import Prefilling, RoundCommitted, RunFinished, RunStarted
from tui.ordering import RunSequencer

SIZE = (140, 44)


@dataclass
class Msg:
    run_id: int
    seq: int
    last: bool = False


def _run(run_id: int, n: int) -> list[Msg]:
    return [Msg(run_id, i, last=i == n - 1) for i in range(n)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.randoms(use_true_random=False),
       st.booleans())
def test_each_run_is_released_in_order_and_ends_last(sizes: list[int], rnd: random.Random,
                                                     duplicate: bool) -> None:
    runs = [_run(i + 1, n) for i, n in enumerate(sizes)]
    delivered = [m for run in runs for m in run]
    rnd.shuffle(delivered)  # any interleaving of any runs
    if duplicate:
        delivered += rnd.sample(delivered, k=min(3, len(delivered)))  # delivered twice
    seq = RunSequencer()
    released: list[Msg] = []
    for m in delivered:
        released += seq.push(m, ends_run=m.last)
    for run in runs:
        got = [m for m in released if m.run_id == run[0].run_id]
        assert got == run  # every message once, in order, the finish last
        assert seq.waiting(run[0].run_id) == 0


def test_a_finish_before_its_rounds_waits_for_them() -> None:
    seq = RunSequencer()
    assert seq.push(Msg(1, 3, last=True), ends_run=True) == []
    assert seq.push(Msg(1, 0)) == [Msg(1, 0)]
    assert seq.push(Msg(1, 2)) == []
    assert seq.waiting(1) == 2
    assert seq.push(Msg(1, 1)) == [Msg(1, 1), Msg(1, 2), Msg(1, 3, last=True)]
    assert seq.push(Msg(1, 2)) == []  # the run ended: a late duplicate is dropped


def test_unnumbered_messages_pass_straight_on() -> None:
    seq = RunSequencer()
    assert seq.push(Msg(5, -1), ends_run=True) == [Msg(5, -1)]


async def _recorded_run(make_app, script: Script, text: str):  # noqa: ANN001, ANN202
    """One real run of the scripted engine, its messages captured as the bridge posted them,
    and the state the app reached with them delivered in order."""
    app = make_app(Settings(draft_source="hybrid"))
    async with app.run_test(size=SIZE) as pilot:
        captured: list = []
        post = app.bridge._post

        def capture(message) -> None:  # noqa: ANN001
            if isinstance(message, RunStarted | Prefilling | RoundCommitted | RunFinished):
                captured.append(message)
            post(message)

        app.bridge._post = capture
        await chat(pilot, text)
        state = _state(app)
    return captured, state


def _state(app) -> dict:  # noqa: ANN001
    record = app.runs_state.runs[-1]
    return {
        "rounds": len(app.runs_state.stats.rounds),
        "tokens": record.summary.tokens,
        "sources": {name: (t.rounds, t.rates()) for name, t in app.runs_state.sources.tallies.items()},
        "plain steps": app.runs_state.sources.plain_steps,
        "text": record.text,
    }


async def test_the_app_folds_a_run_in_order_however_its_messages_arrive(
    make_app, script: Script
) -> None:
    script.rounds = 6
    captured, in_order = await _recorded_run(make_app, script, "first")
    assert in_order["rounds"] == 6
    started = [m for m in captured if isinstance(m, RunStarted | Prefilling)]
    rounds = [m for m in captured if isinstance(m, RoundCommitted)]
    finish = [m for m in captured if isinstance(m, RunFinished)]
    assert [m.seq for m in started + rounds + finish] == list(range(len(captured)))
    orders = {
        "finish first, rounds reversed": finish + rounds[::-1] + started[::-1],
        "rounds after the finish": started + rounds[:2] + finish + rounds[2:],
        "shuffled": random.Random(7).sample(captured, len(captured)),
    }
    for name, order in orders.items():
        app = make_app(Settings(draft_source="hybrid"))
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            before = len(app.runs_state.runs)
            app.query_one("#prompt").value = "first"
            app.bridge.generate = lambda *a, **k: captured[0].run_id  # nothing else runs
            await pilot.press("enter")
            assert app.run_id == captured[0].run_id
            for message in order:
                app.post_message(message)
                await pilot.pause()
                if len(app.runs_state.runs) == before + 1:
                    # recorded only once every round is in: the state is the in-order one
                    assert _state(app) == in_order, name
            assert len(app.runs_state.runs) == before + 1 and app.run_id is None, name
            assert _state(app) == in_order, name
