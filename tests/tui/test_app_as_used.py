"""The app as people use it (issue 29): presets that keep the loaded models, first turns
told as they are, progress in the status line, temperature and max-tokens keys, one view at a
time on a narrow terminal. On the scripted engine (tests/helpers/app.py), with a faked clock
where a time is asserted."""

from __future__ import annotations

import dataclasses
import threading

from textual.widgets import Static, TabbedContent

from core.profile import Profile, ProfileStore
from core.settings import Settings
from tests.helpers.app import FakeSession, Script, chat, hold, ready, wait_for
from tests.helpers.app_shown import notices
from tests.helpers.app_turns import send_until
from tests.helpers.terminal import ESC, send
from tui.screens.confirm_reload import ConfirmReloadScreen
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.composer import Composer

SIZE = (160, 45)
# A loaded pair that is not the default (the scripted engine takes any spec; the real one
# builds these random-weight shapes).
QWEN = Settings(target="shape:qwen2.5-0.5b,layers=2", draft="shape:qwen2.5-0.5b,layers=1")


def status(app) -> str:  # noqa: ANN001
    return str(app.query_one("#status", Static).render())


# ------------------------------------------------------------------- presets keep the models


async def test_a_preset_keeps_the_loaded_pair(make_app, script: Script, profiles) -> None:
    """Every shipped preset says target "default": that means what is loaded, not SmolLM2."""
    ProfileStore(profiles).save(Profile("lookup", Settings(draft_source="lookup",
                                                           policy="cost-aware", k_max=32)))
    app = make_app(QWEN)
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot, "def f(xs): return xs")
        assert script.loads == [(QWEN.target, QWEN.draft)]
        app.switch_profile("lookup")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmReloadScreen)
        assert app.settings.draft_source == "lookup" and app.settings.k_max == 32
        assert (app.settings.target, app.settings.draft) == (QWEN.target, QWEN.draft)
        await chat(pilot, "again")  # the next turn runs on the same pair, never reloaded
        assert script.loads == [(QWEN.target, QWEN.draft)]
        assert app.info.target_spec == QWEN.target


async def test_a_profile_naming_other_models_asks_before_reloading(make_app, script: Script,
                                                                   profiles) -> None:
    other = Settings(target="shape:llama-3.2-1b,layers=2", draft="self:bits=3", k=6)
    ProfileStore(profiles).save(Profile("llama", other))
    app = make_app(QWEN)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.switch_profile("llama")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmReloadScreen)
        await pilot.press("k")  # keep the loaded models: only the settings change
        await pilot.pause()
        assert app.settings.k == 6 and app.settings.target == QWEN.target
        assert script.loads == [(QWEN.target, QWEN.draft)]
        app.switch_profile("llama")
        await pilot.pause()
        await pilot.press("enter")  # load them
        await wait_for(pilot, lambda: len(script.loads) == 2 and app.info is not None)
        assert script.loads[-1] == (other.target, other.draft)
        assert app.settings.target == other.target


async def test_the_profile_name_is_marked_modified(make_app, profiles) -> None:
    ProfileStore(profiles).save(Profile("tight", Settings(k=3)))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.switch_profile("tight")
        await pilot.pause()
        assert "profile tight" in status(app) and "modified" not in status(app)
        await pilot.press("f6")  # k 4: no longer what the profile says
        assert "tight (modified)" in status(app)
        await pilot.press("f5")
        assert "modified" not in status(app)


# ------------------------------------------------------------------- first turns, progress


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_first_turn_counts_from_enter_with_the_calibration_on_its_own_line(
        make_app, script: Script) -> None:
    """A first cost-aware turn calibrates before its first round: TTFT and E2E from Enter
    include it (they reported 62 s for a 7-minute wait), and a line names it."""
    script.needs_curve, script.calibrate_gate = True, threading.Event()
    app = make_app(Settings(policy="cost-aware"))
    clock = FakeClock()
    app.bridge.clock = clock
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "hello",
                         lambda: "first turn waits on the calibration: 11%" in status(app))
        clock.now += 270.0  # the calibration takes 4.5 minutes
        script.calibrate_gate.set()
        await wait_for(pilot, lambda: app.run_id is None and bool(app.runs_state.runs))
        msg = app.query_one(AssistantMessage)
        footer = msg.footer_text(None).plain
        summary = app.runs_state.runs[-1].summary
        assert f"TTFT {summary.ttft_s + 270:.2f}s" in footer
        assert f"E2E {summary.e2e_s + 270:.2f}s" in footer
        assert "calibrated the verify cost for 270.0s before the first round" in footer


async def test_the_status_says_a_turn_waits_on_its_prefill(make_app, script: Script) -> None:
    script.prefill_gate = threading.Event()
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "a long prompt",
                         lambda: "prefilling 1 prompt tokens" in status(app))
        assert "round" not in status(app)
        script.prefill_gate.set()
        await wait_for(pilot, lambda: app.run_id is None)
        assert "prefilling" not in status(app)


async def test_the_prefill_counts_only_what_the_cache_does_not_hold(make_app, script: Script) -> None:
    """A second turn's prefill feeds only its new tokens: the status counted the whole
    conversation ("prefilling 927 prompt tokens" for a cache that held most of it)."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await chat(pilot, "first")
        script.prefill_gate = threading.Event()
        await send_until(pilot, "second", lambda: "prefilling" in status(app))
        assert "prefilling 2 new prompt tokens (1 cached)" in status(app), status(app)
        script.prefill_gate.set()
        await wait_for(pilot, lambda: app.run_id is None)


async def test_esc_during_a_long_prefill_cancels_the_turn_and_keeps_the_message(
        make_app, script: Script) -> None:
    """A pasted file's prefill took 30 s on this CPU and Esc waited for all of it: now the
    prefill stops between its chunks (core/primitives/cached_model.py `prefill`). Esc as a
    terminal sends it: the turn ends cancelled with no round, the toast says the prefill
    stops, the message stays in the chat, and the next turn runs."""
    script.prefill_gate = threading.Event()  # a prefill that lasts until cancelled
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "def f():\n    return 1", lambda: "prefilling" in status(app))
        await send(pilot, ESC)
        await wait_for(pilot, lambda: app.run_id is None)
        summary = app.runs_state.runs[-1].summary
        assert summary.stop_reason == "cancelled" and summary.rounds == 0
        footer = app.query_one(AssistantMessage).footer_text(None).plain
        assert "TTFT -" in footer and "cancelled" in footer  # no token: no time to it
        assert any("the prefill stops after its chunk under way" in n
                   for n in notices(app, "information"))
        assert app.runs_state.messages[0] == {"role": "user", "content": "def f():\n    return 1"}
        script.prefill_gate.set()
        await chat(pilot, "again")
        assert app.runs_state.runs[-1].summary.stop_reason == "length"


async def test_calibration_and_bench_progress_in_the_status_line(make_app,
                                                                 script: Script) -> None:
    script.calibrate_gate = threading.Event()
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot)
        app.action_calibrate()
        await wait_for(pilot, lambda: "calibrating: 11% auto: 1 rows" in status(app))
        script.calibrate_gate.set()
        await wait_for(pilot, lambda: not app.calibrating)
        script.bench_gate = threading.Event()
        app.action_bench()
        await wait_for(pilot, lambda: "benchmarking: 25% request 2/4" in status(app))
        script.bench_gate.set()
        await wait_for(pilot, lambda: not app.benchmarking)
        assert "ready" in status(app)


# ------------------------------------------------------------------- temperature, max tokens


async def test_temperature_and_max_tokens_keys_and_palette(make_app) -> None:
    app = make_app(Settings(temperature=0.7, max_tokens=256))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("escape")
        await pilot.press("t")
        assert app.settings.temperature == 1.0 and "T 1" in status(app)
        await pilot.press("t")
        assert app.settings.temperature == 0.0
        await pilot.press("n")
        assert app.settings.max_tokens == 512 and "max 512" in status(app)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Cycle the temperature: 0 (greedy), 0.3, 0.7, 1"].callback()
        assert app.settings.temperature == 0.3
        commands["Cycle max tokens a message: 64, 128, 256, 512, 1024"].callback()
        assert app.settings.max_tokens == 1024


# ------------------------------------------------------------------- 80x24


async def test_a_narrow_terminal_shows_one_view_switched_by_ctrl_t(make_app) -> None:
    """At 80 columns the chat (40) and the panels (44) do not fit: the panels vanished with
    no hint. Now one view fills the screen and ctrl+t goes chat, Rounds, ... Profile, chat."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await chat(pilot)
        chat_column, panels = app.query_one("#chat-column"), app.query_one("#panels")
        assert chat_column.display and chat_column.size.width >= 76 and panels.size.width == 0
        seen = []
        for _ in range(5):
            await pilot.press("ctrl+t")
            await pilot.pause()
            seen.append(app.view_state.view)
            if app.view_state.view != "chat":
                assert panels.size.width >= 76 and chat_column.size.width == 0
                assert app.query_one(TabbedContent).active == app.view_state.view
        assert seen == ["rounds", "acceptance", "kernels", "profile", "chat"]
        assert chat_column.size.width >= 76 and app.query_one("#prompt", Composer).has_focus
        # everything stays on the screen: the key bar's last line is the screen's last
        keybar = app.query_one("#keybar")
        assert keybar.region.bottom == 24 and keybar.region.width == 80
        text = str(keybar.render())
        assert all(len(line) <= 78 for line in text.splitlines())
        assert "F1 help" in text and "^q quit" in text
        # the header: the pair alone, long GGUF names cut in their middle, the backend kept
        app.info = dataclasses.replace(app.info, target_name="SmolLM2-135M-Instruct Q4_1",
                                       draft_name="SmolLM2-135M-Instruct Q4_1 · 4-bit g32",
                                       device="AMD EPYC 7763 64-Core Processor")
        title = app._narrow_title(f"{app.info.target_name} ← {app.info.draft_name} · metal · "
                                  "AMD EPYC 7763 64-Core Processor")
        assert len(title) <= 80 - 18 and " · metal · AMD EPYC" in title, title
        assert title.startswith("SmolLM2") and "←" in title
        # and as drawn: the header's title ends with the device, not with "…"
        from textual.widgets._header import HeaderTitle

        app.sub_title = f"{app.info.target_name} ← {app.info.draft_name} · metal · AMD"
        await pilot.pause()
        drawn = str(app.query_one(HeaderTitle).render()).strip()
        assert drawn == app._narrow_title(app.sub_title) and " · metal · AMD EPYC" in drawn
        assert app.query_one(HeaderTitle).size.width >= len(drawn), drawn


async def test_tabs_switch_by_keys_at_any_width(make_app) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        tabs = app.query_one(TabbedContent)
        order = []
        for _ in range(4):
            await pilot.press("ctrl+t")
            order.append(tabs.active)
        assert order == ["acceptance", "kernels", "profile", "rounds"]
        assert app.query_one("#chat-column").display  # side by side: the chat stays
        assert app.query_one("#prompt", Composer).has_focus


# ------------------------------------------------------------------- compare: a mode change


async def test_compare_names_a_mode_change_as_one(make_app) -> None:
    """Speculative against target-only: the same models, another mode (it once said "they
    ran different models (draft)")."""
    from tui.screens.compare import CompareScreen

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot, "first")
        app.apply(mode="target-only")
        await chat(pilot, "second")
        app.action_compare_runs()
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        note = " ".join(str(app.screen.query_one("#compare-note").render()).split())
        assert "a mode change: run 1 (this session) ran speculative, run 2 (this session) " \
               "target-only" in note, note
        assert "different models" not in note


async def test_esc_in_a_prefill_says_it_stops_after_this_chunk(make_app, script: Script) -> None:
    """The status kept saying "prefilling" for the 29 s Esc waited: the turn's prefill now
    comes in chunks of about a second (a PacedCancel) and the status says it is stopping."""
    script.prefill_gate, script.prefill_ignores_cancel = threading.Event(), True
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "a long paste", lambda: "prefilling" in status(app))
        assert type(script.cancels[-1]).__name__ == "PacedCancel"
        await send(pilot, ESC)
        await wait_for(pilot, lambda: "stopping after this chunk" in status(app))
        await wait_for(pilot, lambda: "· 1 s" in status(app))  # the seconds since esc
        script.prefill_gate.set()  # the chunk under way ends
        await wait_for(pilot, lambda: app.run_id is None)
        assert app.runs_state.runs[-1].summary.stop_reason == "cancelled"


async def test_ctrl_q_with_an_unsent_message_asks_first(make_app) -> None:
    """A 30-line paste was dropped on ctrl+q without a word."""
    from tui.screens.confirm_quit import ConfirmQuitScreen

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        composer = app.query_one("#prompt", Composer)
        composer.insert("line one\nline two\nline three")
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmQuitScreen)
        assert "(3 lines)" in str(app.screen.query_one(Static).render())
        await send(pilot, ESC)
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmQuitScreen) and app.is_running
        assert composer.text == "line one\nline two\nline three"  # kept
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.is_running)


async def test_the_status_says_a_turn_warms_its_first_kernels_before_its_prefill(
        script: Script, profiles) -> None:  # noqa: ANN001
    """27 s of a first turn said "prefilling 32 prompt tokens": most of it warmed the kernels
    of the first rounds (MLXSession.generate), which the status now names."""
    gate = threading.Event()

    class Warming(FakeSession):
        def generate(self, prompt_ids, settings, cancel, settings_source):  # noqa: ANN001, ANN201
            hold(gate)  # the first rounds' warm-up, before the generator starts
            return super().generate(prompt_ids, settings, cancel, settings_source)

    from tests.helpers.app_shown import app_on

    app = app_on(lambda t, d: Warming(script, t, d), profiles)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send_until(pilot, "hi", lambda: "warming the kernels" in status(app))
        gate.set()
        await wait_for(pilot, lambda: app.run_id is None)


async def test_a_keystroke_pauses_the_idle_warm_up(make_app) -> None:
    import time

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.bridge._idle_paused_until < time.monotonic()
        await pilot.press("h")
        await pilot.pause()
        assert app.bridge._idle_paused_until > time.monotonic() + 1.0  # "stops when you type"
