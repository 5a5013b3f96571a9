"""tui/features/settings_keys.py: a key that would take a setting past its end is a note, not
an error toast (issue 24). The keys' table itself: tests/tui/test_keys.py and test_app.py."""

from __future__ import annotations

from core.settings import Settings
from tests.helpers.app import blur_input, ready, wait_for
from tests.helpers.app_shown import said

SIZE = (160, 45)


async def test_tv_at_its_ends_is_a_note_not_an_error(make_app) -> None:
    app = make_app(Settings(tv_budget=0.0))
    said(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        await blur_input(pilot)
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: bool(said(app)))
        assert said(app, "warning") == [] and said(app, "error") == []
        assert any("already 0" in m for m in said(app)) and app.settings.tv_budget == 0.0
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.settings.tv_budget == 0.05
