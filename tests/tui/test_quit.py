"""Issue 32, row 14: ctrl+q while a turn generates. The engine thread stops at its round
boundary and only then does the app exit (an exit while MLX ran a round crashed: exit 134 or
139), and a save confirmed just before the quit is on disk."""

from __future__ import annotations

import time

from textual.widgets import Input

from tests.helpers.app import FakeSession, ready, wait_for
from tests.helpers.app_shown import app_on
from tests.helpers.app_turns import send_until
from tui.app import SpecDecApp
from tui.screens.save_profile import SaveProfileScreen

SIZE = (160, 48)


def _app(script, profiles, state: dict) -> SpecDecApp:  # noqa: ANN001
    class Uninterruptible(FakeSession):
        """Rounds that a cancel cannot cut short, as an MLX forward cannot be."""

        def generate(self, prompt_ids, settings, cancel, settings_source):  # noqa: ANN001, ANN201
            for item in super().generate(prompt_ids, settings, cancel, settings_source):
                state["in_round"] = False
                yield item
                state["in_round"] = True
                time.sleep(state["round_s"])
            state["in_round"] = False

    app = app_on(lambda t, d: Uninterruptible(script, t, d), profiles)
    real_exit = app.exit

    def exit_(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        state.setdefault("exits", []).append((state["in_round"], app.bridge.stopped))
        return real_exit(*args, **kw)

    app.exit = exit_  # type: ignore[method-assign]
    return app


async def test_ctrl_q_mid_turn_exits_only_after_the_round_ends(script, profiles) -> None:  # noqa: ANN001
    script.rounds = 10_000
    state: dict = {"in_round": False, "round_s": 0.4}
    app = _app(script, profiles, state)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "go on", lambda: len(app.runs_state.stats.rounds) >= 2)
        await wait_for(pilot, lambda: state["in_round"])  # mid-round, as a user presses it
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: bool(state.get("exits")))
    assert state["exits"][0] == (False, True), state["exits"]  # not in a round, thread stopped
    assert app.bridge.stopped


async def test_a_save_confirmed_just_before_ctrl_q_is_on_disk(script, profiles) -> None:  # noqa: ANN001
    script.rounds = 10_000
    state: dict = {"in_round": False, "round_s": 0.2}
    app = _app(script, profiles, state)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "go on", lambda: len(app.runs_state.stats.rounds) >= 2)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SaveProfileScreen))
        app.screen.query_one(Input).value = "kept"
        await pilot.press("enter", "ctrl+q")
        await wait_for(pilot, lambda: bool(state.get("exits")))
    assert (profiles / "kept.toml").is_file()
    assert state["exits"][0] == (False, True), state["exits"]
