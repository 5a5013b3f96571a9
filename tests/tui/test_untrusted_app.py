"""The app shows what users wrote as text (never markup), and a chat that outgrows the context
drops its oldest turns, saying so, or stops with a sentence."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.text import Text
from textual.widgets import Input, Static
from textual.widgets._toast import Toast

from core.profile import ProfileStore
from core.settings import Settings
from tests.helpers.app import GATE_S, FakeSession, Script, chat, ready, wait_for
from tui.app import SpecDecApp
from tui.screens.save_profile import SaveProfileScreen
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.composer import Composer
from tui.widgets.profile_panel import ProfilePanel
from tui.widgets.user_message import UserMessage

SIZE = (160, 45)
MARKUP = "uses [/] and [/red] and [gpu]"


def plain(widget: object) -> str:
    rendered = widget.render()  # type: ignore[attr-defined]
    return getattr(rendered, "plain", str(rendered))


def app_with(script: Script, profiles: Path, settings: Settings | None = None,
             **info_changes: object) -> SpecDecApp:  # fmt: skip
    """An app on the scripted engine whose pair info carries `info_changes`."""

    def factory(target: str, draft: str | None) -> FakeSession:
        session = FakeSession(script, target, draft)
        session.info = dataclasses.replace(session.info, **info_changes)
        return session

    return SpecDecApp(settings or Settings(), factory, profiles_dir=profiles,
                      profile_store=ProfileStore(profiles, presets=None))  # fmt: skip


async def test_an_error_keeps_its_brackets(profiles: Path) -> None:
    (profiles / "broken.toml").write_text('schema = 2\ndescription = "no table"\n')
    app = app_with(Script(), profiles)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        app.switch_profile("broken")

        def shown() -> str:
            return " ".join(plain(t) for t in app.screen.query(Toast))

        # until a toast is up, instead of assuming two pauses are enough on any machine
        await wait_for(pilot, lambda: "profile not loaded" in shown())
        assert "[settings]" in shown(), shown()  # markup used to eat it
        app.screen.notify("a screen's [/] too")  # Widget.notify passes markup=True itself
        await wait_for(pilot, lambda: "too" in shown())
        assert "a screen's [/] too" in shown(), shown()


async def test_profile_text_and_model_names_with_brackets_never_crash(profiles: Path) -> None:
    (profiles / "odd.toml").write_text(
        f'schema = 2\ndescription = "{MARKUP}"\n[settings]\ntarget = "shape:x[/]"\n'
        'draft = "[/red]"\n'
    )
    script = Script()
    app = app_with(script, profiles, target_name="Smol[/]LM [gpu]", speculation_ok=False,
                   speculation_reason="the draft [/red] is odd")  # fmt: skip
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


async def test_the_save_modal_shows_a_bracketed_name_in_its_error(profiles: Path) -> None:
    app = app_with(Script(), profiles)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+s")
        app.screen.query_one(Input).value = "a[/]b"
        await pilot.press("enter")
        assert isinstance(app.screen, SaveProfileScreen)
        assert "'a[/]b'" in plain(app.screen.query_one("#save-error"))


# --------------------------------------------------------------------------- the context window


def windowed(script: Script, window: int):  # noqa: ANN201
    """A scripted session with a context window (the fake's prompt is one id per message)."""

    def factory(target: str, draft: str | None) -> FakeSession:
        session = FakeSession(script, target, draft)
        session.context_window = window  # type: ignore[attr-defined]
        return session

    return factory


async def test_a_long_chat_drops_its_oldest_turns_and_says_so(profiles: Path) -> None:
    script = Script(rounds=2)
    settings = Settings(max_tokens=8)
    app = SpecDecApp(settings, windowed(script, 8 + 5), profiles_dir=profiles,
                     profile_store=ProfileStore(profiles, presets=None))  # fmt: skip
    async with app.run_test(size=SIZE) as pilot:
        for i in range(5):
            await chat(pilot, f"turn {i}")
            assert len(script.prompts[-1]) <= 5  # what the engine saw fits 13 - 8
            assert script.prompts[-1][-1]["content"] == f"turn {i}"
        # one note, at the latest trim, with the running count (not one more note a turn):
        # five turns in 5 ids: 4 messages dropped in all
        notes = [plain(n) for n in app.query(".context-note")]
        assert len(notes) == 1 and app.dropped_messages == 4, (notes, app.dropped_messages)
        assert f"so far its {app.dropped_messages} oldest messages were dropped" in notes[0]
        assert app.messages[:-1] == script.prompts[-1]  # the app keeps what the engine sees
        assert app.messages[-1]["role"] == "assistant"


async def test_a_message_that_cannot_fit_stops_with_a_sentence(profiles: Path) -> None:
    script = Script(rounds=2)
    app = SpecDecApp(Settings(max_tokens=8), windowed(script, 8), profiles_dir=profiles,
                     profile_store=ProfileStore(profiles, presets=None))  # fmt: skip
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.query_one("#prompt", Composer).value = "too long for this model"
        await pilot.press("enter")

        def errors() -> list[str]:
            return [n.message for n in app._notifications if n.severity == "error"]

        # the error, not just run_id None: that holds too while the enter key is still queued
        await wait_for(pilot, lambda: bool(errors()) and app.run_id is None)
        assert any("context window of 8 tokens" in e for e in errors()), errors()
        assert "generate" not in script.calls and app.messages == []


def test_text_helpers_are_plain() -> None:
    assert Text(MARKUP).plain == MARKUP


async def test_a_warning_while_loading_reaches_the_user(profiles: Path) -> None:
    """Core warns through logging where it has no terminal of its own (a damaged cached
    default model fetched again): the app shows it, brackets and all, and stops listening
    once the load is over."""
    import logging

    said = "The cached default model /x/[m].gguf is damaged (its sha256 is not the pinned one)"

    def factory(target: str, draft: str | None) -> FakeSession:
        logging.getLogger("core.models.fetch").warning(said)
        return FakeSession(Script(), target, draft)

    app = SpecDecApp(Settings(), factory, profiles_dir=profiles,
                     profile_store=ProfileStore(profiles, presets=None))  # fmt: skip
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: any(n.message == said for n in app._notifications))
        assert [n.severity for n in app._notifications if n.message == said] == ["warning"]
        logging.getLogger("core.models.fetch").warning("after the load")
        await pilot.pause()
        assert not any(n.message == "after the load" for n in app._notifications)
        assert not any(type(h).__name__ == "_Forward" for h in logging.getLogger("core").handlers)


async def test_a_compile_at_load_shows_in_the_status_line_until_done(profiles: Path) -> None:
    """A first use that stalls on GPU kernel compilation (core.runtime.warmup's watch, as the real
    session's warm-up runs it while loading) is said at once: a notification and the status
    line, then the final "compiled in N s". The load holds until the status line showed it."""
    import threading

    from core.runtime.compile_watch import CompileWatch

    shown = threading.Event()

    def factory(target: str, draft: str | None) -> FakeSession:
        with CompileWatch("fake [model]", threshold_s=0.05, interval_s=60.0):
            assert shown.wait(GATE_S)
        return FakeSession(Script(), target, draft)

    app = SpecDecApp(Settings(), factory, profiles_dir=profiles,
                     profile_store=ProfileStore(profiles, presets=None))  # fmt: skip
    said = "compiling GPU kernels for fake [model]: first use on this machine"

    def status() -> str:
        return str(app.query_one("#status", Static).render())

    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: said in status())
        assert [n.severity for n in app._notifications if n.message == said] == ["warning"]
        shown.set()
        await ready(pilot)
        await wait_for(pilot, lambda: any(n.message.startswith("compiled GPU kernels for fake "
                                                               "[model] in ")
                                          for n in app._notifications))  # fmt: skip
        assert app.compiling is None and said not in status() and "ready" in status()


# --------------------------------------------------------------------------- edited run files


def _spoiled(profiles: Path, name: str, edit: str) -> None:
    """Save `name` with a recorded run, then edit its run file the ways issue 32 found."""
    import json

    from core.profile import Profile
    from tests.helpers.profile import SEED, make_run

    ProfileStore(profiles, presets=None).save(Profile(name, SEED, "", make_run()))
    path = profiles / f"{name}.run.json"
    doc = json.loads(path.read_text())
    if edit == "string phase_s":
        doc["summary"]["phase_s"] = "fast"
    elif edit == "nan timing":
        doc["rounds"][0]["timings"]["verify"] = float("nan")
    elif edit == "null e2e":
        doc["summary"]["e2e_s"] = None
    elif edit == "string tokens":
        doc["summary"]["tokens"] = "9"
    path.write_text(json.dumps(doc))


def _toasts(app: SpecDecApp) -> str:
    return " ".join(plain(t) for t in app.screen.query(Toast))


async def test_an_edited_run_is_a_notification_never_a_traceback(profiles: Path) -> None:
    from core.profile import Profile
    from tui.screens.compare import CompareScreen

    edits = ["string phase_s", "nan timing", "null e2e", "string tokens"]
    for i, edit in enumerate(edits):
        _spoiled(profiles, f"bad{i}", edit)
    ProfileStore(profiles, presets=None).save(Profile("good", Settings()))
    app = app_with(Script(), profiles)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        for i in range(len(edits)):  # `p`: switching to it
            app.switch_profile(f"bad{i}")
            await wait_for(pilot, lambda i=i: f"bad{i}.run.json is corrupt" in _toasts(app))
            assert app.profile_name is None  # nothing switched
        app.clear_notifications()
        app.push_screen(CompareScreen([], app.store(), "profile:bad0", "profile:good"))  # `x`
        await wait_for(pilot, lambda: "bad0.run.json" in _toasts(app)
                       and "profile not loaded" in _toasts(app))  # fmt: skip
        assert app.is_running and app.return_code is None


async def test_a_start_profile_whose_run_is_edited_opens_with_its_settings(profiles: Path) -> None:
    import argparse

    from tests.helpers.app import FakeSession as Fake
    from tui.app import build_app

    _spoiled(profiles, "bad", "nan timing")
    args = argparse.Namespace(profile=str(profiles / "bad.toml"), profiles_dir=str(profiles),
                              target=None, draft=None)  # fmt: skip
    app = build_app(args, lambda target, draft: Fake(Script(), target, draft))
    assert app.start_notices and "bad.run.json" in app.start_notices[0]
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: "was not loaded" in _toasts(app))
        assert app.profile_name == "bad" and app.is_running


async def test_escapes_in_a_recorded_run_never_reach_the_screen(profiles: Path) -> None:
    from core.profile import Profile
    from tui.screens.compare import model_rows, profile_run, result_rows, settings_rows

    esc = "\u001b]52;c;aGVsbG8=\u0007"
    store = ProfileStore(profiles, presets=None)
    from tests.helpers.profile import make_run

    run = make_run()
    run = dataclasses.replace(run, environment={**run.environment, "device_name": f"cpu{esc}",
                                                "specdec_tui": f"0.1{esc}"},
                              settings=Settings(target=f"shape:tiny{esc}"))  # fmt: skip
    store.save(Profile("esc", Settings(target=f"shape:tiny{esc}"), "", run))
    a = profile_run(store.load("esc"))
    cells = [*settings_rows(a, a), *result_rows(a, a), *model_rows(a, a)]
    text = " ".join(c.plain for row in cells for c in row if isinstance(c, Text))
    assert "cpu" in text and "shape:tiny" in text and "\x1b" not in text and "\x07" not in text
    app = app_with(Script(), profiles)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        app.notify(f"quoted {esc}file")
        await wait_for(pilot, lambda: "quoted" in _toasts(app))
        assert "\x1b" not in _toasts(app)
