"""SVG snapshots of the main screen and each panel, fed by the scripted engine's fixed numbers.

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the SVGs in tests/tui/__snapshots__/ before committing them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from core.settings import Settings
from tests.helpers.app import chat, ready, wait_for

BIG = (160, 45)
SMALL = (100, 30)


def steady(app) -> None:  # noqa: ANN001
    """No blinking cursor, no toasts: the same pixels on every run."""
    for screen in app.screen_stack:  # the composer under a modal blinks too
        for box in [*screen.query(Input), *screen.query(TextArea)]:
            box.cursor_blink = False
    app.clear_notifications()


def after_chat(*then: Callable[[Pilot], Awaitable[None]]) -> Callable[[Pilot], Awaitable[None]]:
    async def run_before(pilot: Pilot) -> None:
        for box in [*pilot.app.query(Input), *pilot.app.query(TextArea)]:
            box.cursor_blink = False
        await chat(pilot, "Write a short scene in a lunar greenhouse.")
        for step in then:
            await step(pilot)
        steady(pilot.app)
        await pilot.pause()

    return run_before


def panel(name: str) -> Callable[[Pilot], Awaitable[None]]:
    async def show(pilot: Pilot) -> None:
        pilot.app.show_panel(name)
        await pilot.pause()
        await pilot.pause()

    return show


async def calibrate(pilot: Pilot) -> None:
    app = pilot.app
    app.action_calibrate()
    await wait_for(pilot, lambda: app.curve is not None)


async def rejected_on(pilot: Pilot) -> None:
    pilot.app.action_toggle_rejected()
    await pilot.pause()


def test_main_screen_rounds(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=BIG, run_before=after_chat())


def test_acceptance_panel(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=BIG, run_before=after_chat(panel("acceptance")))


def test_acceptance_panel_hybrid_sources(snap_compare, make_app) -> None:
    """Lookup and model rows, and the message the last copy came from."""
    assert snap_compare(make_app(Settings(draft_source="hybrid")), terminal_size=BIG,
                        run_before=after_chat(rejected_on, panel("acceptance")))


def test_kernels_panel_with_curve(snap_compare, make_app) -> None:
    assert snap_compare(
        make_app(), terminal_size=BIG, run_before=after_chat(calibrate, panel("kernels"))
    )


def test_profile_panel(snap_compare, make_app) -> None:
    async def second_run(pilot: Pilot) -> None:
        pilot.app.apply(tv_budget=0.5, k=6)
        await chat(pilot, "Again, looser.")

    assert snap_compare(
        make_app(), terminal_size=BIG, run_before=after_chat(second_run, panel("profile"))
    )


def test_rejected_tokens_shown(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=BIG, run_before=after_chat(rejected_on))


def test_small_terminal(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=SMALL, run_before=after_chat())


def test_banner_and_target_only(snap_compare, make_app, script) -> None:  # noqa: ANN001
    script.random_weights, script.speculation_ok = True, False
    assert snap_compare(
        make_app(Settings(mode="target-only")), terminal_size=BIG, run_before=after_chat()
    )


def test_help_screen(snap_compare, make_app) -> None:
    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        steady(pilot.app)  # before the help takes the focus: the composer's cursor stays put
        pilot.app.action_help()
        await pilot.pause()
        steady(pilot.app)

    assert snap_compare(make_app(), terminal_size=BIG, run_before=run_before)


async def numbers(pilot: Pilot) -> None:
    """`v`: the Kernels and Acceptance panels show their numbers instead of their plots."""
    pilot.app.action_toggle_plots()
    await pilot.pause()


def test_kernels_panel_numbers(snap_compare, make_app) -> None:
    assert snap_compare(
        make_app(), terminal_size=BIG, run_before=after_chat(calibrate, numbers, panel("kernels"))
    )


def test_acceptance_panel_numbers(snap_compare, make_app) -> None:
    assert snap_compare(
        make_app(), terminal_size=BIG, run_before=after_chat(numbers, panel("acceptance"))
    )


def test_compare_screen(snap_compare, make_app) -> None:
    async def compare(pilot: Pilot) -> None:
        app = pilot.app
        app.save_profile("tight")
        app.apply(tv_budget=0.5, k=6)
        await chat(pilot, "Again, looser.")
        app.action_compare_runs()
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=BIG, run_before=after_chat(compare))


# 80x24 (issue 29): the panels once vanished there and the status line and key bar were cut.
TERMINAL = (80, 24)
WIDE = (200, 50)


def test_80x24_chat(snap_compare, make_app) -> None:
    """One view at a time: the chat, the status line wrapped, the whole key bar."""
    assert snap_compare(make_app(), terminal_size=TERMINAL, run_before=after_chat())


def test_80x24_panel_by_ctrl_t(snap_compare, make_app) -> None:
    """ctrl+t shows the Rounds panel over the whole width."""
    async def rounds(pilot: Pilot) -> None:
        await pilot.press("ctrl+t")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=TERMINAL, run_before=after_chat(rounds))


def test_200x50(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=WIDE, run_before=after_chat())


def test_80x24_pasted_function(snap_compare, make_app) -> None:
    """A pasted 40-line function in the composer: grown to its cap, scrolled to the end."""
    from tests.helpers.app import FUNCTION, REQUEST

    async def paste(pilot: Pilot) -> None:
        box = pilot.app.query_one("#prompt")
        box.value = FUNCTION + "\n" + REQUEST
        await pilot.pause()

    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        await paste(pilot)
        steady(pilot.app)
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=TERMINAL, run_before=run_before)
