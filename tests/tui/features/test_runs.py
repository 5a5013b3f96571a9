"""tui/features/runs.py at the context window's edge: a chat that outgrows it drops its oldest
turns, saying so once with the running count, and a message that cannot fit stops with a
sentence before anything is generated."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.settings import Settings
from tests.helpers.app import FakeSession, Script, chat, ready
from tests.helpers.app_shown import app_on, notices, plain
from tests.helpers.app_turns import send_until

SIZE = (160, 45)


def windowed(script: Script, window: int) -> Callable[[str, str | None], FakeSession]:
    """A scripted session with a context window (the fake's prompt is one id per message)."""

    def factory(target: str, draft: str | None) -> FakeSession:
        session = FakeSession(script, target, draft)
        session.context_window = window  # type: ignore[attr-defined]
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
        assert len(notes) == 1 and app.dropped_messages == 4, (notes, app.dropped_messages)
        assert f"so far its {app.dropped_messages} oldest messages were dropped" in notes[0]
        assert app.messages[:-1] == script.prompts[-1]  # the app keeps what the engine sees
        assert app.messages[-1]["role"] == "assistant"


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
        assert "generate" not in script.calls and app.messages == []
