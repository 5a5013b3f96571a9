"""tui/features/runs.py at the context window's edge: a chat that outgrows it drops its oldest
turns, saying so once with the running count, and a message that cannot fit stops with a
sentence before anything is generated."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.settings import Settings
from tests.helpers.app import FakeSession, Script, chat, ready, wait_for
from tests.helpers.app_shown import app_on, notices, plain
from tests.helpers.app_turns import send_until

SIZE = (160, 45)


def windowed(script: Script, window: int) -> Callable[[str, str | None], FakeSession]:
    """A scripted session with a context window (the fake's prompt is one id per message)."""

    def factory(target: str, draft: str | None) -> FakeSession:
        session = FakeSession(script, target, draft)
        session.context_window = window
        return session

    return factory


async def test_a_long_chat_drops_its_oldest_turns_and_says_so(profiles: Path) -> None:
    script = Script(rounds=2)
    app = app_on(windowed(script, 8 + 5), profiles, Settings(max_tokens=8))
    async with app.run_test(size=SIZE) as pilot:
        for i in range(5):
            await chat(pilot, f"turn {i}")
            assert len(script.prompts[-1]) <= 5  # what the engine saw fits 13 - 8
            assert script.prompts[-1][-1]["content"] == f"turn {i}"
        # one note, at the latest trim, with the running count (not one more note a turn):
        # five turns in 5 ids: 4 messages dropped in all
        notes = [plain(n) for n in app.query(".context-note")]
        assert len(notes) == 1 and app.runs_state.dropped_messages == 4, (notes, app.runs_state.dropped_messages)
        assert f"so far its {app.runs_state.dropped_messages} oldest messages were dropped" in notes[0]
        assert app.runs_state.messages[:-1] == script.prompts[-1]  # the app keeps what the engine sees
        assert app.runs_state.messages[-1]["role"] == "assistant"


async def test_a_message_that_cannot_fit_stops_with_a_sentence(profiles: Path) -> None:
    script = Script(rounds=2)
    app = app_on(windowed(script, 8), profiles, Settings(max_tokens=8))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        # the error, not just run_id None: that holds too while the enter key is still queued
        await send_until(pilot, "too long for this model",
                         lambda: bool(notices(app, "error")) and app.run_id is None)
        errors = notices(app, "error")
        assert any("context window of 8 tokens" in e for e in errors), errors
        assert "generate" not in script.calls and app.runs_state.messages == []


async def test_a_round_folded_after_a_mode_change_keeps_the_mode_it_ran_in(
    profiles: Path,
) -> None:
    """The app may fold a round after a key changed the mode (rounds queue behind a busy
    screen): the round is labelled by the settings it ran with, not the settings now. Here all
    8 rounds run in speculative mode with the lookup (4 copies, 4 plain target steps) while
    the screen is held, then the mode goes to target-only before any is folded: the plain
    steps still count as speculative-mode rounds (the lookup hit 4 of 8, not 4 of 4)."""
    import threading
    import time

    script = Script(rounds=8, prefill_gate=threading.Event())
    app = app_on(lambda t, d: FakeSession(script, t, d), profiles,
                 Settings(mode="speculative", draft_source="lookup", k=4))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.query_one("#prompt").value = "copy this"
        await pilot.press("enter")
        await wait_for(pilot, lambda: script.calls == ["generate"])  # held before its rounds
        deadline = time.monotonic() + 30
        script.prefill_gate.set()
        # the screen is held (no await): the engine runs every round, nothing is folded yet
        while (len(script.seen) < 8 or app.bridge.busy_with is not None) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(script.seen) == 8 and not app.runs_state.stats.rounds
        app.apply(mode="target-only")
        await wait_for(pilot, lambda: app.run_id is None and bool(app.runs_state.runs))
    assert {s.mode for s in script.seen} == {"speculative"}
    sources = app.runs_state.stats.sources
    assert (sources.plain_steps, sources.speculative_rounds) == (4, 8)
    assert sources.hit_rate("lookup") == 0.5
