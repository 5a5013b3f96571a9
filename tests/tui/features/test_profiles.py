"""tui/features/profiles.py with files others may have written (issues 24, 32): a hostile
profile is skipped with a notice, a profile's text and model names are shown as text (never
markup), and an edited run file is a notification, never a traceback."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from core.profile import Profile, ProfileStore
from core.settings import Settings
from tests.helpers.app import FakeSession, Script, chat, ready, wait_for
from tests.helpers.app_shown import app_on, app_with, plain, said, toasts
from tests.helpers.edited_run import EDITS, spoil_run
from tui.screens.compare import CompareScreen
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.profile_panel import ProfilePanel
from tui.widgets.user_message import UserMessage

SIZE = (160, 45)
MARKUP = "uses [/] and [/red] and [gpu]"


async def test_the_app_starts_with_hostile_profile_files_and_says_so(profiles: Path) -> None:
    (profiles / "deep.toml").write_text("schema = 2\n[settings]\nk = " + "[" * 500 + "]" * 500)
    (profiles / "big.toml").write_text('schema = 2\ndescription = "' + "x" * (2 << 20) + '"\n')
    (profiles / "good.toml").write_text("schema = 2\n[settings]\nk = 3\n")

    def factory(target: str, draft: str | None) -> FakeSession:
        return FakeSession(Script(), target, draft)

    app = app_on(factory, profiles)
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


def test_text_helpers_are_plain() -> None:
    assert Text(MARKUP).plain == MARKUP


async def test_profile_text_and_model_names_with_brackets_never_crash(profiles: Path) -> None:
    (profiles / "odd.toml").write_text(
        f'schema = 2\ndescription = "{MARKUP}"\n[settings]\ntarget = "shape:x[/]"\n'
        'draft = "[/red]"\n'
    )
    script = Script()
    app = app_with(script, profiles, target_name="Smol[/]LM [gpu]", speculation_ok=False,
                   speculation_reason="the draft [/red] is odd")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.switch_profile("odd")
        await pilot.pause()
        # it names other models: the question quotes them as text, never markup
        question = str(app.screen.query_one(Static).render())
        assert "shape:x[/]" in question and "[/red]" in question, question
        await pilot.press("enter")  # load them
        # the new pair's info, not the old one still shown until the engine thread says loading
        await wait_for(pilot, lambda: app.info is not None and app.info.target_spec == "shape:x[/]")
        assert app.settings.target == "shape:x[/]"
        app.show_panel("profile")
        await pilot.pause()
        panel = app.query_one(ProfilePanel)
        assert plain(panel.query_one("#profile-name", Static)) == "active settings: profile odd"
        assert app.info.target_spec == "shape:x[/]" and app.info.draft_spec == "[/red]"
        assert "[/red]" in plain(app.query_one("#banner", Static))
        await chat(pilot, "[bold]hello[/] [gpu]")
        assert app.query_one(AssistantMessage)._border_title.plain == "Smol[/]LM [gpu]"
        assert plain(app.query_one(UserMessage)) == "[bold]hello[/] [gpu]"


async def test_an_edited_run_is_a_notification_never_a_traceback(profiles: Path) -> None:
    for i, edit in enumerate(EDITS):
        spoil_run(profiles, f"bad{i}", edit)
    ProfileStore(profiles, presets=None).save(Profile("good", Settings()))
    app = app_with(Script(), profiles)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        for i in range(len(EDITS)):  # `p`: switching to it
            app.switch_profile(f"bad{i}")
            await wait_for(pilot, lambda i=i: f"bad{i}.run.json is corrupt" in toasts(app))
            assert app.profile_name is None  # nothing switched
        app.clear_notifications()
        app.push_screen(CompareScreen([], app.store(), "profile:bad0", "profile:good"))  # `x`
        await wait_for(pilot, lambda: "bad0.run.json" in toasts(app)
                       and "profile not loaded" in toasts(app))
        assert app.is_running and app.return_code is None


async def test_ctrl_s_then_enter_on_the_active_profile_keeps_its_description(make_app,
                                                                             profiles) -> None:
    """ctrl+s then Enter on the prefilled name of the active profile rewrote its TOML with
    `description = ""`: the hand-written description was lost."""
    from tests.helpers.terminal import send
    from tui.screens.save_profile import SaveProfileScreen

    store = ProfileStore(profiles, presets=None)
    store.save(Profile("mine", Settings(k=3), "written by hand: keep TV low on code"))
    app = make_app(Settings(k=5), profile=store.load("mine"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, "\x13")  # ctrl+s
        await wait_for(pilot, lambda: isinstance(app.screen, SaveProfileScreen))
        await send(pilot, "\r")
        await wait_for(pilot, lambda: not isinstance(app.screen, SaveProfileScreen))
    again = store.load("mine")
    assert again.settings.k == 5 and again.description == "written by hand: keep TV low on code"
