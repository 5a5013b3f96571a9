"""The profile picker (tui/screens/profile_picker.py) says which entries are shipped presets
and which are the user's own saves (`p` listed them alike)."""

from __future__ import annotations

from textual.app import App
from textual.widgets import OptionList

from tui.screens.profile_picker import ProfilePickerScreen


async def test_each_entry_says_preset_or_yours() -> None:
    app: App = App()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(ProfilePickerScreen(["mine", "target-only"], "mine",
                                            frozenset({"target-only"})))
        await pilot.pause()
        picker = app.screen.query_one(OptionList)
        shown = [str(picker.get_option_at_index(i).prompt) for i in range(picker.option_count)]
        assert shown[0].rstrip().endswith("yours") and shown[0].startswith("● mine")
        assert shown[1].rstrip().endswith("preset")


async def test_the_key_line_stays_on_an_80x24_screen() -> None:
    """Fourteen presets pushed `enter switches · esc cancels` below the screen's edge."""
    from textual.widgets import Label

    app: App = App(css_path=str(__import__("tui").__path__[0] + "/app.tcss"))
    async with app.run_test(size=(80, 24)) as pilot:
        names = [f"profile-{i}" for i in range(20)]
        app.push_screen(ProfilePickerScreen(names, None, frozenset(names[:14])))
        await pilot.pause()
        hint = app.screen.query_one(".hint", Label)
        box = app.screen.query_one("#picker-box")
        assert hint.region.bottom <= box.region.bottom - 2, (hint.region, box.region)  # in the box
