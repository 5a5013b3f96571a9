"""Pilot tests of the app on the scripted engine: keys, chat, cancel, errors, profiles."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from textual.widgets import DataTable, Input, OptionList, Static, TabbedContent

from core.profile import Profile, ProfileStore
from core.settings import MAX_K, Settings
from tests.helpers.app import WORDS, Script, blur_input, chat, ready, summarize, wait_for
from tests.helpers.app_shown import app_with, notices, toasts
from tests.helpers.app_turns import send_until
from tests.helpers.edited_run import spoil_run
from tests.helpers.typing_keys import TYPING_CASES
from tui.app import CPU_NOTE, default_settings
from tui.screens.help import HelpScreen
from tui.screens.profile_picker import ProfilePickerScreen
from tui.screens.save_profile import SaveProfileScreen
from tui.transcript import ORIGIN_STYLES, REJECTED, REJECTED_COPY
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.composer import Composer
from tui.widgets.kernels import KernelsPanel
from tui.widgets.legend import Legend
from tui.widgets.rounds import RoundsPanel

SIZE = (160, 45)
# Rounds of a run that only a cancel ends (1,000 s at ROUND_S a round): a test that acts while
# it runs must not find it over on a slow or loaded machine, where the app lags the engine.
FOREVER = 10_000
# The scripted engine's pause between those rounds. Not less: the app takes ~25 ms on this CPU
# to show a round, and Textual's pilot (press, pause) waits until the app is idle, so at 0.02 s
# a round the app was never idle and each such test ran 4-10 s to see a handful of rounds.
ROUND_S = 0.1


# ---------------------------------------------------------------------------------- chat


async def test_chat_streams_rounds_coloured_by_origin(make_app, script: Script) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot, "Write a scene.")
        msg = app.query_one(AssistantMessage)
        origins = {p.origin for p in msg.transcript.pieces}
        assert {"accepted", "corrected", "bonus"} <= origins
        summary = app.runs_state.runs[-1].summary
        assert summary.tokens == app.runs_state.stats.tokens == 20 + 8  # accepted + one per round
        # every committed id is in the text, none of the rejected ones is unless asked for
        assert msg.text == "".join(p.text for p in msg.transcript.pieces if p.origin != REJECTED)
        footer = str(msg._footer.render())
        assert "28 tok" in footer and "tok/s" in footer and "TTFT" in footer and "acc" in footer
        assert app.runs_state.messages[-1] == {"role": "assistant", "content": msg.text}
        # repaints are batched: never more than one per round
        assert 1 <= app.runs_state.flushes <= summary.rounds


async def test_multi_turn_sends_the_whole_conversation(make_app, script: Script) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot, "first")
        await chat(pilot, "second")
        roles = [m["role"] for m in script.prompts[-1]]
        assert roles == ["user", "assistant", "user"]
        assert script.prompts[-1][1]["content"] == app.runs_state.runs[0].text
        assert len(app.query(AssistantMessage)) == 2


async def test_enter_while_generating_is_refused(make_app, script: Script) -> None:
    script.rounds, script.delay_s = FOREVER, ROUND_S
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "one", lambda: len(app.runs_state.stats.rounds) >= 2)
        app.query_one("#prompt", Composer).value = "two"
        await pilot.press("enter")
        assert any("busy" in w for w in notices(app, "warning"))
        assert script.calls.count("generate") == 1
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.run_id is None)


async def test_rejected_toggle_shows_struck_drafts(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        msg = app.query_one(AssistantMessage)
        hidden = msg.transcript.render(show_rejected=False)
        assert not any(span.style.strike for span in hidden.spans)
        await blur_input(pilot)
        await pilot.press("r")
        assert app.show_rejected
        shown = msg._body.render()
        assert any(getattr(span.style, "strike", False) for span in shown.spans)
        assert len(shown.plain) > len(hidden.plain)


# ---------------------------------------------------------------------------------- keys

KEY_CASES = [
    # (keys pressed, field, expected) from the default Settings (tv 0, k 4, speculative, ...)
    (["right_square_bracket"], "tv_budget", 0.05),
    (["right_square_bracket", "right_square_bracket", "left_square_bracket"], "tv_budget", 0.05),
    (["right_curly_bracket"], "tv_budget", 0.25),
    (["right_curly_bracket", "right_square_bracket", "left_curly_bracket"], "tv_budget", 0.05),
    (["1"], "tv_budget", 1.0),
    (["1", "0"], "tv_budget", 0.0),
    (["plus"], "k", 5),
    (["equals_sign"], "k", 5),
    (["minus"], "k", 3),
    (["m"], "mode", "target-only"),
    (["m", "m"], "mode", "draft-only"),
    (["m", "m", "m"], "mode", "speculative"),
    (["a"], "rule", "greedy"),
    (["a", "a"], "rule", "lossless"),
    (["o"], "policy", "acceptance-rate"),
    (["o", "o"], "policy", "accepted-length"),
    (["d"], "draft_source", "lookup"),
    (["d", "d"], "draft_source", "hybrid"),
    (["d", "d", "d"], "draft_source", "tree"),
    (["d", "d", "d", "d"], "draft_source", "model"),
]


@pytest.mark.parametrize(("keys", "field", "expected"), KEY_CASES)
async def test_bare_keys_change_settings(make_app, keys, field, expected) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await blur_input(pilot)
        await pilot.press(*keys)
        assert getattr(app.settings, field) == pytest.approx(expected)
        # the change is shown at once, in the status line and the Profile panel
        status = str(app.query_one("#status", Static).render())
        shown = f"{expected:.2f}" if field == "tv_budget" else str(expected)
        assert shown in status
        table = app.query_one("#settings-table", DataTable)
        values = {}
        for i in range(table.row_count):
            cells = [str(c) for c in table.get_row_at(i)]
            values.update({cells[0]: cells[1], cells[2]: cells[3]})
        assert values[field] == str(getattr(app.settings, field))




@pytest.mark.parametrize(("key", "field", "expected"), TYPING_CASES)
async def test_typing_forms_act_while_the_input_has_focus(make_app, key, field, expected) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        prompt = app.query_one("#prompt", Composer)
        assert prompt.has_focus
        await pilot.press(key)
        assert getattr(app.settings, field) == pytest.approx(expected)
        assert prompt.value == ""


async def test_typing_forms_of_toggles(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("alt+r")
        assert app.show_rejected
        await pilot.press("f3", "f3", "f2")
        assert app.settings.tv_budget == pytest.approx(0.05)
        await pilot.press("shift+f4", "f7", "f4")
        assert app.settings.tv_budget == 0.0


async def test_printable_keys_type_when_the_input_has_focus(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("right_square_bracket", "m", "1", "plus")
        assert app.query_one("#prompt", Composer).value == "]m1+"
        assert app.settings == Settings()


async def test_out_of_range_key_notifies_and_keeps_state(make_app) -> None:
    app = make_app(Settings(k=MAX_K, k_max=MAX_K, tv_budget=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await blur_input(pilot)
        await pilot.press("left_square_bracket", "plus")
        assert app.settings.tv_budget == 0.0 and app.settings.k == MAX_K
        # TV's step stops at 0 with a note, not a warning (issue 24: tests/tui/features/test_settings_keys.py)
        assert not any("tv_budget" in w for w in notices(app, "warning"))
        assert any("k must be" in w for w in notices(app, "warning"))


async def test_keys_apply_from_the_next_round(make_app, script: Script) -> None:
    script.rounds, script.delay_s = FOREVER, ROUND_S
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "go", lambda: len(script.seen) >= 2)
        await pilot.press("f6", "f3")  # k 5, TV 0.05 while the run goes on
        seen_at_press = len(script.seen)
        await wait_for(pilot, lambda: len(script.seen) >= seen_at_press + 3)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.run_id is None)
        assert script.seen[0].k == 4 and script.seen[0].tv_budget == 0.0
        assert script.seen[-1].k == 5 and script.seen[-1].tv_budget == pytest.approx(0.05)
        assert app.runs_state.stats.rounds[-1].proposed == 5  # the round shows the new k


async def test_help_and_palette(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await blur_input(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "Cycle mode: target-only, draft-only, speculative" in commands
        commands["TV budget +0.25"].callback()
        assert app.settings.tv_budget == 0.25
        commands["Cycle the draft source: model, lookup, hybrid, tree"].callback()
        assert app.settings.draft_source == "lookup"
        commands["Show the Kernels panel"].callback()
        assert app.query_one(TabbedContent).active == "kernels"
        # a palette-only action says so, never an empty `key:`
        assert all(c.help.strip() not in ("key:", "key: ") for c in commands.values())
        assert commands["Show the Kernels panel"].help == "palette only (no key)"


def test_help_lists_palette_only_actions_as_such() -> None:
    """Five palette-only actions read "ctrl+p ctrl+p", as if that key did each of them."""
    from rich.console import Console

    from tui.keys import help_content

    console = Console(width=120, record=True)
    console.print(help_content())
    lines = console.export_text().splitlines()
    assert sum("ctrl+p" in line for line in lines if "command palette" not in line and
               "Every action" not in line) == 0, [ln for ln in lines if "ctrl+p" in ln]
    assert sum(line.lstrip().startswith("palette only") for line in lines) == 5


# ---------------------------------------------------------------------------------- engine


async def test_escape_cancels_a_running_generation(make_app, script: Script) -> None:
    script.rounds, script.delay_s = FOREVER, ROUND_S
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "go on forever", lambda: len(app.runs_state.stats.rounds) >= 3)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.run_id is None)  # the run alone would take 1,000 s
        summary = app.runs_state.runs[-1].summary
        assert summary.stop_reason == "cancelled"
        assert summary.rounds < FOREVER
        assert "cancelled" in str(app.query_one(AssistantMessage)._footer.render())
        # the app keeps working: the next turn runs to the end
        script.rounds, script.delay_s = 3, 0.0
        await chat(pilot, "again")
        assert app.runs_state.runs[-1].summary.stop_reason == "length"


async def test_engine_error_notifies_and_app_keeps_running(make_app, script: Script) -> None:
    script.fail_after = 2
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "break", lambda: bool(notices(app, "error")) and app.run_id is None)
        assert "scripted engine failure" in notices(app, "error")[0]
        assert "error" in str(app.query_one(AssistantMessage)._footer.render())
        assert app.bridge.alive
        script.fail_after = None
        await chat(pilot, "again")
        assert app.runs_state.runs[-1].summary.tokens > 0


async def test_loading_indicator_while_the_pair_loads(make_app, script: Script) -> None:
    from tui.widgets.chat import ChatView

    script.load_gate = threading.Event()  # the pair loads when the test says, not after a delay
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.models_loading)
        assert app.query_one(ChatView).loading
        assert "loading models" in str(app.query_one("#status", Static).render())
        await send_until(pilot, "too early",
                         lambda: any("not loaded yet" in w for w in notices(app, "warning")))
        assert app.models_loading and "generate" not in script.calls
        script.load_gate.set()
        await ready(pilot)
        assert not app.query_one(ChatView).loading
        assert "ready" in str(app.query_one("#status", Static).render())


async def test_model_load_error_notifies(make_app, script: Script) -> None:
    script.fail_load = True
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: bool(notices(app, "error")))
        assert "no model at default" in notices(app, "error")[0]
        assert app.info is None and app.is_running
        app.query_one("#prompt", Composer).value = "hello"
        await pilot.press("enter")
        assert any("No models" in w for w in notices(app, "warning"))


async def test_banner_for_random_weights_and_fallback(make_app, script: Script) -> None:
    script.random_weights, script.speculation_ok = True, False
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        banner = app.query_one("#banner", Static)
        assert banner.display
        text = str(banner.render())
        assert "noise" in text and "target-only" in text and "rewound" in text


async def test_banner_when_a_run_fell_back(make_app, script: Script) -> None:
    script.fallback_reason = "the draft cache wrapped its sliding window"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert not app.query_one("#banner", Static).display
        await chat(pilot)
        banner = app.query_one("#banner", Static)
        assert banner.display and "sliding window" in str(banner.render())


async def test_header_names_pair_and_backend(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert "SmolLM2-135M (fake)" in app.sub_title
        assert "self:bits=3 (fake)" in app.sub_title and "metal" in app.sub_title
        assert not app.query_one("#banner", Static).display


async def test_first_cost_aware_run_calibrates_with_progress_first(make_app, script: Script) -> None:
    """A cost-aware run with no curve calibrates on the engine thread before generating, with
    its progress and curve posted to the UI, instead of waiting silently inside the engine."""
    # The calibration holds after its first step until the test has seen the progress: with a
    # delay instead, a loaded machine's app could handle the progress and the curve in one go.
    script.needs_curve, script.calibrate_gate = True, threading.Event()
    app = make_app(Settings(policy="cost-aware"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "hello",
                         lambda: "first turn waits on the calibration" in app._state_text())
        assert "first use, auto: 1 rows" in app._state_text()
        assert script.calls == ["calibrate"] and app.curve is None  # nothing generated yet
        script.calibrate_gate.set()
        await wait_for(pilot, lambda: app.curve is not None)
        assert script.calls[:2] == ["calibrate", "generate"]
        assert app.calibration_label is None  # cleared once the curve arrived
    script.calls.clear()
    script.needs_curve = False
    app = make_app(Settings(policy="fixed"))
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        assert script.calls == ["generate"] and app.curve is None


async def test_calibrate_fills_the_kernels_panel(make_app, script: Script) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        await blur_input(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: app.curve is not None)
        assert script.calls.count("calibrate") == 1
        app.show_panel("kernels")
        await pilot.pause()
        panel = app.query_one(KernelsPanel)
        curve = panel.query_one("#curve-table", DataTable)
        assert curve.row_count == 9
        marks = [str(curve.get_row_at(i)[5]) for i in range(curve.row_count)]
        assert marks.index("◀ meas+pred") == 7  # R = 8
        assert str(curve.get_row_at(7)[3]) == "qmm_sm80"
        shapes = panel.query_one("#shape-table", DataTable)
        assert shapes.row_count == 2 and "qmv" in str(shapes.get_row_at(0)[3])


async def test_bench_progress_and_report(make_app, script: Script) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        await pilot.press("f9")
        # "bench" in calls: the key was handled (press may return first on a loaded machine)
        await wait_for(pilot, lambda: "bench" in script.calls and not app.benchmarking)
        assert app.query_one(TabbedContent).active == "profile"
        table = app.query_one("#bench-table", DataTable)
        assert table.row_count == 2
        assert [str(c) for c in table.get_row_at(1)] == ["Fixed-4, TV=0", "62%", "1.60", "1.25x",
                                                        "0.000", "1.50x", "0.90"]
        assert [str(c) for c in table.get_row_at(0)][-2:] == ["-", "-"]  # target-only


async def test_escape_cancels_the_benchmark(make_app, script: Script) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        # 4 requests of 60 s each, unless cancelled: only the escape can end it in time, on a
        # machine of any speed (the fake's wait returns at the cancel)
        script.delay_s = 60.0
        await pilot.press("f9")
        await wait_for(pilot, lambda: "request" in str(
            app.query_one("#bench-result", Static).render()))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.benchmarking)
        assert "stopped" in str(app.query_one("#bench-result", Static).render())
        assert app.query_one("#bench-table", DataTable).row_count == 0


# ---------------------------------------------------------------------------------- profiles


async def test_ctrl_s_writes_a_profile_that_loads_back(make_app, profiles) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        await pilot.press("f3")  # TV 0.05 after the run: saved as the profile's settings
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, SaveProfileScreen)
        name_box = app.screen.query_one(Input)
        name_box.value = "moon-run"
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, SaveProfileScreen)
        assert (profiles / "moon-run.toml").is_file()
        assert (profiles / "moon-run.run.json").is_file()
        loaded = ProfileStore(profiles).load("moon-run")
        assert loaded.settings == app.settings
        assert loaded.settings.tv_budget == pytest.approx(0.05)
        assert loaded.run is not None
        assert len(loaded.run.rounds) == app.runs_state.runs[-1].summary.rounds
        assert loaded.run.summary == app.runs_state.runs[-1].summary
        assert loaded.run.prompt == "Write a scene."
        assert app.profile_name == "moon-run"


def _saved(profiles, name: str, settings: Settings, rounds: int) -> None:  # noqa: ANN001
    """A profile with a recorded run of `rounds` scripted rounds, written through the store."""
    import threading

    from core.events import RoundEvent
    from core.profile import ProfileRecorder
    from tests.helpers.app import FakeSession

    session = FakeSession(Script(rounds=rounds), "default", "self:bits=3")
    rec = ProfileRecorder(name, settings)
    for item in session.generate([1], settings, threading.Event(), lambda: settings):
        rec.add(item)
        assert isinstance(item, RoundEvent) or item.rounds == rounds
    ProfileStore(profiles).save(rec.profile(prompt="stored", environment={"backend": "cpu"}))


async def test_switching_profiles_changes_settings_and_panels(make_app, profiles) -> None:
    _saved(profiles, "wide", Settings(k=6, tv_budget=0.5, rule="mentored"), rounds=5)
    ProfileStore(profiles).save(Profile("plain", Settings(mode="target-only")))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        assert len(app.runs_state.stats.rounds) == 8
        await blur_input(pilot)
        await pilot.press("p")
        assert isinstance(app.screen, ProfilePickerScreen)
        picker = app.screen.query_one(OptionList)
        names = [picker.get_option_at_index(i).id for i in range(picker.option_count)]
        shown = {n: str(picker.get_option_at_index(i).prompt) for i, n in enumerate(names)}
        assert shown["wide"].rstrip().endswith("yours"), shown  # which are yours, which shipped
        picker.highlighted = names.index("wide")
        await pilot.press("enter")
        await pilot.pause()
        assert app.settings.k == 6 and app.settings.tv_budget == 0.5
        assert app.profile_name == "wide"
        # the panels now show the profile's recorded run
        assert len(app.runs_state.stats.rounds) == 5
        bars = str(app.query_one(RoundsPanel).query_one("#round-bars", Static).render())
        assert len(bars.strip().splitlines()) == 5
        compare = app.query_one("#compare-table", DataTable)
        assert [str(c.label) for c in compare.ordered_columns][1:] == ["wide", "run 1"]
        assert "profile wide" in str(app.query_one("#profile-name", Static).render())
        assert "stored" not in str(app.query_one("#text-a", Static).render())  # text, not prompt
        # and back to another one through the panel's list
        app.switch_profile("plain")
        await pilot.pause()
        assert app.settings.mode == "target-only" and app.profile_name == "plain"


async def test_start_with_a_profile(make_app, profiles) -> None:
    _saved(profiles, "start", Settings(k=2, policy="acceptance-rate"), rounds=3)
    profile = ProfileStore(profiles).load("start")
    app = make_app(profile.settings, profile=profile)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.settings.k == 2 and app.profile_name == "start"
        assert len(app.runs_state.stats.rounds) == 3


def test_summarize_matches_rounds() -> None:
    """The fake's summary is what the panels compare; keep it honest."""
    import threading

    from tests.helpers.app import FakeSession, fake_models

    s = Settings(k=4)
    items = list(FakeSession(Script(rounds=8), "t", "d").generate([1], s, threading.Event(),
                                                                   lambda: s))
    rounds, summary = items[:-1], items[-1]
    assert summary == dataclasses.replace(summarize(rounds, s, "length", 1),
                                          models=fake_models("t", "d"))
    assert summary.accepted == sum(min(a, 4) for a in (2, 4, 0, 3, 4, 1, 2, 4))


async def test_command_line_profile_then_model_overrides(profiles, script: Script) -> None:
    import argparse

    from tests.helpers.app import FakeSession
    from tui.app import build_app

    _saved(profiles, "cli", Settings(k=3, tv_budget=0.75, draft="self:bits=4"), rounds=2)
    args = argparse.Namespace(target="shape:qwen2.5-7b", draft=None, profile="cli",
                              profiles_dir=str(profiles))
    seen: list[tuple[str, str | None]] = []

    def factory(target: str, draft: str | None) -> FakeSession:
        seen.append((target, draft))
        return FakeSession(script, target, draft)

    app = build_app(args, factory)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.settings.k == 3 and app.settings.tv_budget == 0.75
        assert seen == [("shape:qwen2.5-7b", "self:bits=4")]
        assert app.profile_name == "cli"


def test_command_line_unknown_profile_is_one_sentence(profiles) -> None:
    import argparse

    from core.errors import UserError
    from tui.app import build_app

    args = argparse.Namespace(target=None, draft=None, profile="nope",
                              profiles_dir=str(profiles))
    with pytest.raises(UserError, match="no profile named 'nope'"):
        build_app(args)


async def test_a_start_profile_whose_run_is_edited_opens_with_its_settings(profiles) -> None:
    import argparse

    from tests.helpers.app import FakeSession
    from tui.app import build_app

    spoil_run(profiles, "bad", "nan timing")
    args = argparse.Namespace(profile=str(profiles / "bad.toml"), profiles_dir=str(profiles),
                              target=None, draft=None)
    app = build_app(args, lambda target, draft: FakeSession(Script(), target, draft))
    assert app.profiles_state.start_notices and "bad.run.json" in app.profiles_state.start_notices[0]
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: "was not loaded" in toasts(app))
        assert app.profile_name == "bad" and app.is_running


async def test_an_error_keeps_its_brackets(profiles) -> None:
    """SpecDecApp.notify shows text, never markup: a profile's error quotes `[settings]`, and a
    screen's notify (which passes markup=True itself) is text too."""
    (profiles / "broken.toml").write_text('schema = 2\ndescription = "no table"\n')
    app = app_with(Script(), profiles)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        app.switch_profile("broken")
        # until a toast is up, instead of assuming two pauses are enough on any machine
        await wait_for(pilot, lambda: "profile not loaded" in toasts(app))
        assert "[settings]" in toasts(app), toasts(app)  # markup used to eat it
        app.screen.notify("a screen's [/] too")  # Widget.notify passes markup=True itself
        await wait_for(pilot, lambda: "too" in toasts(app))
        assert "a screen's [/] too" in toasts(app), toasts(app)


async def test_a_notification_never_shows_a_terminal_escape(make_app) -> None:
    """A notice quoting a file others wrote (a recorded run's environment) drops the OSC 52
    escape that would set the terminal's clipboard."""
    app = make_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await ready(pilot)
        app.notify("quoted \u001b]52;c;aGVsbG8=\u0007file")
        await wait_for(pilot, lambda: "quoted" in toasts(app))
        assert "\x1b" not in toasts(app)


# ---------------------------------------------------------------------------------- draft sources


async def test_d_switches_the_draft_source_from_the_next_round(make_app, script: Script) -> None:
    script.rounds, script.delay_s = FOREVER, ROUND_S
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "go", lambda: len(script.seen) >= 2)
        await pilot.press("alt+d")  # while typing: model -> lookup
        seen_at_press = len(script.seen)
        await wait_for(pilot, lambda: len(script.seen) >= seen_at_press + 6)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.run_id is None)
        assert script.seen[0].draft_source == "model"
        assert script.seen[-1].draft_source == "lookup"  # the engine read the new source
        sources = {ev.source for ev in app.runs_state.stats.rounds}
        assert {"model", "lookup"} <= sources
        assert "lookup" in str(app.query_one("#status", Static).render())


def colour(origin: str) -> tuple[int, int, int]:
    return tuple(ORIGIN_STYLES[origin].color.get_truecolor())


def shown_colours(msg: AssistantMessage, struck: bool = False) -> set[tuple[int, int, int]]:
    """The colours on screen in a message's body (struck through ones, or the others)."""
    return {tuple(span.style.foreground.rgb) for span in msg._body.render().spans
            if bool(span.style.strike) == struck and span.style.foreground is not None}


async def test_copied_tokens_have_their_own_colour(make_app) -> None:
    app = make_app(Settings(draft_source="hybrid"))
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        msg = app.query_one(AssistantMessage)
        origins = [p.origin for p in msg.transcript.pieces]
        assert "copied" in origins and "accepted" in origins
        assert colour("copied") != colour("accepted")
        assert {colour("copied"), colour("accepted")} <= shown_colours(msg)
        await blur_input(pilot)
        await pilot.press("r")
        # the fake's lookup rounds 1 and 4 and model rounds 2, 3 and 6 threw drafts away
        assert shown_colours(msg, struck=True) == {colour(REJECTED), colour(REJECTED_COPY)}
        legend = str(app.query_one(Legend).render())
        assert "copied" in legend and "copy" in legend
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_text = "".join(seg.text for seg in app.console.render(app.screen._content))
        assert "copied" in help_text and "cycle the draft source" in help_text


def _source_rows(app) -> dict[str, list[str]]:  # noqa: ANN001
    table = app.query_one("#source-table", DataTable)
    rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
    return {r[0]: r[1:] for r in rows}


async def test_acceptance_panel_per_source_and_where_the_copy_came_from(
    make_app, script: Script
) -> None:
    script.rounds = 6  # the last copy is round 5's, taken from this answer's own tokens
    app = make_app(Settings(draft_source="hybrid"))
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot, "first")
        app.show_panel("acceptance")
        await pilot.pause()
        # hybrid: lookup copies in rounds 0, 1, 4, 5 (kept 4, 3, 1, 4 of 4), the model drafts
        # in rounds 2, 3 (kept 0, 3 of 4); columns: rounds, drafts/round, hit rate, mean
        # accepted length, acceptance
        assert _source_rows(app) == {
            "lookup": ["4", "4.0", "67%", "3.00", "75%"],
            "model": ["2", "4.0", "33%", "1.50", "38%"],
        }
        origin = str(app.query_one("#copy-origin", Static).render())
        assert "4 tokens from this answer, token 1" in origin
        # second turn, copying from the user's new message (3rd of the conversation)
        script.rounds = 5
        await chat(pilot, "second")
        await pilot.pause()
        assert app.runs_state.last_copy is not None and app.runs_state.last_copy.where() == "your message 3"
        word = WORDS[1 + len("second") % 20]
        origin = str(app.query_one("#copy-origin", Static).render())
        assert "1 token from your message 3, token 0" in origin and word in origin
        # the table counts the whole session: 4 + 3 lookup rounds, 2 + 2 model rounds
        rows = _source_rows(app)
        assert rows["lookup"][0] == "7" and rows["model"][0] == "4"


async def test_lookup_alone_counts_target_steps_against_its_hit_rate(make_app) -> None:
    app = make_app(Settings(draft_source="lookup"))
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        app.show_panel("acceptance")
        await pilot.pause()
        rows = _source_rows(app)
        assert list(rows) == ["lookup", "target step"]
        assert rows["lookup"][:3] == ["4", "4.0", "50%"]
        assert rows["target step"][:3] == ["4", "-", "50%"]
        msg = app.query_one(AssistantMessage)
        assert {p.origin for p in msg.transcript.pieces} >= {"copied", "target"}
        assert "accepted" not in {p.origin for p in msg.transcript.pieces}


async def test_cpu_backend_says_speculation_cannot_pay(make_app, script: Script) -> None:
    script.backend = "cpu"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        banner = app.query_one("#banner", Static)
        assert banner.display
        text = str(banner.render())
        assert text == CPU_NOTE and "cannot pay" in text and text.count(". ") == 0
        await blur_input(pilot)
        await pilot.press("m")  # target-only: nothing to say
        assert not banner.display
        await pilot.press("m", "m")  # back to speculative
        assert banner.display


def test_first_run_defaults_to_hybrid_cost_aware_drafting() -> None:
    import argparse

    from tui.app import build_app

    args = argparse.Namespace(target=None, draft=None, profile=None, profiles_dir=None)
    app = build_app(args)
    assert (app.settings.draft_source, app.settings.policy) == ("hybrid", "cost-aware")
    # k reaches 32 (docs/benchmarks/never-slower.md, finding 7): the calibration's row plan
    # (core/dispatch/row_plan.py) made its first start affordable; Settings() stays at 8
    assert (app.settings.k_min, app.settings.k_max) == (1, 32) and Settings().k_max == 8
    assert app.settings == default_settings()


async def test_a_saved_run_carries_its_own_time_not_the_sessions(make_app, profiles) -> None:
    """`profiles show` gave a run the time its session loaded the models."""
    from datetime import UTC, datetime, timedelta

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.info.environment["timestamp"] = "2000-01-01T00:00:00+00:00"  # the load's
        await chat(pilot, "first")
        assert app.save_profile("timed") == "timed"
    stamp = ProfileStore(profiles).load("timed").run.environment["timestamp"]
    assert datetime.now(UTC) - datetime.fromisoformat(stamp) < timedelta(minutes=5), stamp
