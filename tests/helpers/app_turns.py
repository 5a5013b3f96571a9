"""A turn sent the way a user sends it, then held at the moment a test acts on: its first
rounds streaming, a calibration under way, a refusal said. (tests.helpers.app.chat waits for
a turn's end instead.)"""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot

from tests.helpers.app import chat, wait_for
from tui.widgets.composer import Composer


async def send_until(pilot: Pilot, text: str, until: Callable[[], bool]) -> None:
    """Type `text` into the message box, press Enter, and let the app run until `until` holds.

    It does not wait for the models first (a test may send while they load: use
    tests.helpers.app.ready before it where they must be loaded)."""
    pilot.app.query_one("#prompt", Composer).value = text
    await pilot.press("enter")
    await wait_for(pilot, until)


async def calibrated_kernels(pilot: Pilot) -> None:
    """A turn chatted, then `c`'s calibration done and the Kernels panel shown: where the
    curve's plot, table and the speedup view have a curve and a round to draw."""
    app = pilot.app
    await chat(pilot)
    app.action_calibrate()  # type: ignore[attr-defined]
    await wait_for(pilot, lambda: app.curve is not None)  # type: ignore[attr-defined]
    app.show_panel("kernels")  # type: ignore[attr-defined]
    await pilot.pause()
