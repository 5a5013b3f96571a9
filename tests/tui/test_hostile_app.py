"""Issue 24 in the app: Esc stops every long operation the app starts (and says when it cannot
stop at once), a hostile file in the profiles folder is skipped with a notice, and the keys
and dialogs end in a sentence, not an error toast or a cut one."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.widgets import Input

from core.profile import ProfileStore
from core.settings import Settings
from tests.helpers.app import Script, blur_input, ready, wait_for
from tui.app import SpecDecApp
from tui.screens.save_profile import SaveProfileScreen
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.composer import Composer

SIZE = (160, 45)


def said(app: SpecDecApp, severity: str | None = None) -> list[str]:
    """Every notification so far, expired or not (a loaded machine outlives a 2 s toast)."""
    if not hasattr(app, "said"):
        app.said = []  # type: ignore[attr-defined]
        real = app.notify

        def notify(message: str, **kw: object) -> None:
            app.said.append((message, kw.get("severity", "information")))  # type: ignore[attr-defined]
            real(message, **kw)  # type: ignore[arg-type]

        app.notify = notify  # type: ignore[method-assign]
    return [m for m, sev in app.said if severity is None or sev == severity]  # type: ignore[attr-defined]


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
                                          for m in said(app)))  # fmt: skip
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
        app.query_one("#prompt", Composer).value = "hello"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "first turn waits on the calibration" in app._state_text())
        await pilot.press("escape")
        await wait_for(pilot, lambda: any("stops after the forward under way" in m
                                          for m in said(app)))  # fmt: skip
        script.calibrate_gate.set()
        await wait_for(pilot, lambda: app.run_id is None)
        # it used to go on to the first round and report "cancelled · TTFT ..."
        assert script.calls == ["calibrate"] and app.curve is None
        footer = app.query_one(AssistantMessage).footer_text(None).plain
        assert "first-use calibration" in footer and "TTFT" not in footer, footer
        assert app.messages == []  # the unanswered turn is not kept for the next one


async def test_the_app_starts_with_hostile_profile_files_and_says_so(profiles: Path) -> None:
    from tests.helpers.app import FakeSession

    (profiles / "deep.toml").write_text("schema = 2\n[settings]\nk = " + "[" * 500 + "]" * 500)
    (profiles / "big.toml").write_text('schema = 2\ndescription = "' + "x" * (2 << 20) + '"\n')
    (profiles / "good.toml").write_text("schema = 2\n[settings]\nk = 3\n")

    def factory(target: str, draft: str | None) -> FakeSession:
        return FakeSession(Script(), target, draft)

    app = SpecDecApp(Settings(), factory, profiles_dir=profiles,
                     profile_store=ProfileStore(profiles, presets=None))  # fmt: skip
    said(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        warnings = said(app, "warning")
        assert any("Skipped profile deep" in w and "more than 32 deep" in w for w in warnings)
        assert any("Skipped profile big" in w and "larger than 1 MiB" in w for w in warnings)
        assert app._profile_names() == ["good"]
        app.switch_profile("good")
        await pilot.pause()
        assert app.settings.k == 3


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


async def test_the_save_dialog_shows_its_whole_sentence(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+s")
        app.screen.query_one(Input).value = "x.toml"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, SaveProfileScreen)
        error = app.screen.query_one("#save-error")
        box = app.screen.query_one("#save-box")
        assert error.size.height >= 2 and error.size.width <= box.content_region.width
        lines = [strip.text for strip in error.render_lines(error.region.reset_offset)]
        assert "use 'x'." in " ".join(" ".join(lines).split())
