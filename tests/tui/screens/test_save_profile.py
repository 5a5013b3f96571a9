"""tui/screens/save_profile.py: a name core.profile refuses keeps the dialog up with its
sentence, whole (wrapped, never cut) and as text (a bracketed name is never markup)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Input

from tests.helpers.app import Script, ready
from tests.helpers.app_shown import app_with, plain
from tui.screens.save_profile import SaveProfileScreen

SIZE = (160, 45)


async def submit(pilot: Pilot, name: str) -> Screen:
    """Open the dialog (ctrl+s), submit `name`, and return the screen then on top."""
    await ready(pilot)
    await pilot.press("ctrl+s")
    pilot.app.screen.query_one(Input).value = name
    await pilot.press("enter")
    await pilot.pause()
    return pilot.app.screen


async def test_save_refuses_a_bad_name_in_the_modal(make_app, profiles: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await submit(pilot, "../escape")
        assert isinstance(screen, SaveProfileScreen)  # refused: the dialog stays
        assert "not allowed" in str(screen.query_one("#save-error").render())
        await pilot.press("escape")
        assert not list(profiles.iterdir())


async def test_the_save_dialog_shows_its_whole_sentence(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await submit(pilot, "x.toml")
        assert isinstance(screen, SaveProfileScreen)  # refused: the dialog stays
        error = screen.query_one("#save-error")
        box = screen.query_one("#save-box")
        assert error.size.height >= 2 and error.size.width <= box.content_region.width
        lines = [strip.text for strip in error.render_lines(error.region.reset_offset)]
        assert "use 'x'." in " ".join(" ".join(lines).split())


async def test_the_save_modal_shows_a_bracketed_name_in_its_error(profiles: Path) -> None:
    app = app_with(Script(), profiles)
    async with app.run_test(size=SIZE) as pilot:
        screen = await submit(pilot, "a[/]b")
        assert isinstance(screen, SaveProfileScreen)  # refused: the dialog stays
        assert "'a[/]b'" in plain(screen.query_one("#save-error"))
