"""The app on the real engine and the embedded default pair: a few tokens through every layer.

Slow on the CPU (~10 tokens/s after a few seconds of loading), so it asks for 8 tokens.
"""

from __future__ import annotations

import threading

import pytest

from core.profile import ProfileStore
from core.settings import Settings
from tests.helpers.app import wait_for
from tui.app import SpecDecApp
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.composer import Composer

pytestmark = pytest.mark.real_model


async def test_real_engine_answers_on_the_default_pair(tmp_path) -> None:
    settings = Settings(max_tokens=8, temperature=0.0, k=4)
    app = SpecDecApp(settings, profiles_dir=tmp_path,
                     profile_store=ProfileStore(tmp_path, presets=None))  # real MLXSession
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: app.info is not None or bool(app._notifications),
                       timeout=300)
        assert app.info is not None, [n.message for n in app._notifications]
        assert app.info.target_name.startswith("SmolLM2")
        assert not app.info.random_weights
        app.query_one("#prompt", Composer).value = "What is the capital of France?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.run_id is None and bool(app.runs_state.runs), timeout=300)
        summary = app.runs_state.runs[-1].summary
        assert 1 <= summary.tokens <= 8
        msg = app.query_one(AssistantMessage)
        # greedy speculation is lossless: the target's own answer, decided per round
        assert "Paris" in msg.text
        origins = {p.origin for p in msg.transcript.pieces}
        assert origins <= {"accepted", "corrected", "bonus", "rejected"}
        assert len(app.runs_state.stats.rounds) == summary.rounds
        assert summary.acceptance is not None
        # the MLX work ran on the bridge's thread, never on the UI's
        assert app.bridge.alive
        assert threading.current_thread().name != "specdec-engine"
