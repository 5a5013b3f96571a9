"""tui/features/calibration.py: `c` and a first cost-aware turn's calibration, and Esc during
either (issue 24): the forward under way is said at once, then nothing is generated."""

from __future__ import annotations

import threading

from core.settings import Settings
from tests.helpers.app import Script, blur_input, ready, wait_for
from tests.helpers.app_shown import said
from tests.helpers.app_turns import send_until
from tui.widgets.assistant_message import AssistantMessage

SIZE = (160, 45)


async def test_esc_cancels_a_calibration_started_with_c(make_app, script: Script) -> None:
    script.calibrate_gate = threading.Event()
    app = make_app()
    said(app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await blur_input(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: app.calibration_label is not None)
        await pilot.press("escape")
        # the forward under way cannot be cut short: the app says so at once
        await wait_for(pilot, lambda: any("stops after the forward under way" in m
                                          for m in said(app)))
        script.calibrate_gate.set()
        await wait_for(pilot, lambda: not app.calibrating)
        assert app.curve is None and app.calibration_label is None
        assert any("calibration cancelled" in m for m in said(app))
        assert not app.busy  # usable: the next command runs
        await pilot.press("c")
        await wait_for(pilot, lambda: app.curve is not None)


async def test_esc_during_a_first_use_calibration_generates_nothing(
    make_app, script: Script
) -> None:
    script.needs_curve, script.calibrate_gate = True, threading.Event()
    app = make_app(Settings(policy="cost-aware"))
    said(app)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "hello",
                         lambda: "first turn waits on the calibration" in app._state_text())
        await pilot.press("escape")
        await wait_for(pilot, lambda: any("stops after the forward under way" in m
                                          for m in said(app)))
        script.calibrate_gate.set()
        await wait_for(pilot, lambda: app.run_id is None)
        # it used to go on to the first round and report "cancelled · TTFT ..."
        assert script.calls == ["calibrate"] and app.curve is None
        footer = app.query_one(AssistantMessage).footer_text(None).plain
        assert "first-use calibration" in footer and "TTFT" not in footer, footer
        assert app.runs_state.messages == []  # the unanswered turn is not kept for the next one
