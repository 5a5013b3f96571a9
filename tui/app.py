"""The Textual app: a chat driven by the speculative engine, with live per-round profiling panels.

The app never runs MLX: an EngineBridge thread does, and posts one message per round. The app
folds each round into RoundStats and a Transcript at once (cheap), and repaints at most once
per batch of queued rounds, so a fast engine never waits for the screen.

This module is the shell: the layout, the two reactives every feature reads (`settings`, and
`status`, from which the status line, the settings table and the banner are drawn), `apply`,
quitting, and the palette. What the app does comes by feature, each one module with its
actions, handlers and state (tui/features/): runs, calibration, bench, profiles, compare,
models, view and the settings keys; the seam they share is tui/features/base.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Header, Static, TabbedContent, TabPane

from core.io.user_text import shown
from core.settings import Settings, SettingsError, first_run_settings
from tui.bridge import EngineBridge, SessionFactory
from tui.features.bench import BenchFeature, BenchState
from tui.features.calibration import CalibrationFeature, CalibrationState, curve_from_dict
from tui.features.compare import CompareFeature, CompareState
from tui.features.models import ModelsFeature, ModelsState
from tui.features.profiles import ProfilesFeature, ProfilesState
from tui.features.runs import MAX_RUNS, RunsFeature, RunsState
from tui.features.settings_keys import SettingsKeys
from tui.features.view import ViewFeature, ViewState
from tui.keys import KEYS, MAIN_SCREEN_ONLY, PANES, bindings, help_content, parse_arg
from tui.screens.confirm_quit import ConfirmQuitScreen
from tui.status import CPU_NOTE, ProfileStatus, Status, banner_notes, status_line
from tui.widgets.acceptance import AcceptancePanel
from tui.widgets.chat import ChatView
from tui.widgets.composer import Composer
from tui.widgets.kernels import KernelsPanel
from tui.widgets.key_bar import KeyBar
from tui.widgets.legend import Legend
from tui.widgets.profile_panel import ProfilePanel
from tui.widgets.rounds import RoundsPanel

TYPING_PAUSE_S = 3.0  # the idle warm-up waits this long after a keystroke

# Importable from here as before the split (tests, tui.screenshot, core.cli).
__all__ = ["CPU_NOTE", "KEYS", "MAX_RUNS", "PANES", "SpecDecApp", "build_app",
           "curve_from_dict", "default_settings", "help_content", "run_app"]


def default_settings() -> Settings:
    """The first run's settings, shared with `chat`: core.settings.first_run_settings."""
    return first_run_settings()


class SpecDecApp(RunsFeature, CalibrationFeature, BenchFeature, ProfilesFeature, CompareFeature,
                 ModelsFeature, ViewFeature, SettingsKeys, App[int]):
    """Chat with the target while the draft proposes; see every round's cost and outcome."""

    CSS_PATH = "app.tcss"
    TITLE = "specdec-tui"
    BINDINGS = bindings()

    settings: var[Settings] = var(Settings, init=False)
    status: var[Status] = var(Status, init=False)
    show_rejected: var[bool] = var(False, init=False)

    def __init__(
        self,
        settings: Settings | None = None,
        session_factory: SessionFactory | None = None,
        *,
        profiles_dir: str | Path | None = None,
        profile: Any = None,
        profile_store: Any = None,
    ) -> None:
        """`session_factory` builds the engine session on the engine thread (real by default)."""
        super().__init__()
        if session_factory is None:
            from tui.session import MLXSession

            session_factory = MLXSession
        start = settings or (profile.settings if profile is not None else default_settings())
        self.live_settings = start  # read by the engine thread once per round
        self.set_reactive(SpecDecApp.settings, start)
        # The settings the named profile had when switched to or saved: the status line marks
        # the name modified once they differ (it kept "profile ux-run1" after every change).
        named = ProfileStatus(profile.name, start) if profile is not None else ProfileStatus()
        self.set_reactive(SpecDecApp.status, Status(profile=named))
        self.bridge = EngineBridge(self, session_factory, lambda: self.live_settings)
        self._quit_timer: Any = None  # set while ctrl+q waits for the engine's round to end
        self._banner_from: tuple[Any, ...] | None = None  # what the banner was drawn from
        # One state object a feature (tui/features/).
        self.runs_state = RunsState()
        self.models_state = ModelsState()
        self.calibration_state = CalibrationState()
        self.bench_state = BenchState()
        self.compare_state = CompareState()
        self.view_state = ViewState()
        self.profiles_state = ProfilesState(profiles_dir=profiles_dir, store=profile_store,
                                            start_profile=profile)

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="⚡")
        yield Static(id="banner")
        yield Static(id="status")
        with Horizontal(id="main"):
            with Vertical(id="chat-column"):
                yield Legend(id="legend")
                yield ChatView(id="chat")
                yield Composer(placeholder="Message the target… enter sends, ctrl+j new line",
                               id="prompt")
            with TabbedContent(id="panels", initial="rounds"):
                with TabPane("Rounds", id="rounds"):
                    yield RoundsPanel(id="rounds-panel")
                with TabPane("Acceptance", id="acceptance"):
                    yield AcceptancePanel(id="acceptance-panel")
                with TabPane("Kernels", id="kernels"):
                    yield KernelsPanel(id="kernels-panel")
                with TabPane("Profile", id="profile"):
                    yield ProfilePanel(id="profile-panel")
        yield KeyBar(id="keybar")

    def on_mount(self) -> None:
        self.query_one("#banner", Static).display = False
        self.query_one(Legend).render_legend(self.show_rejected)
        self._draw_status()
        panel = self.query_one(ProfilePanel)
        panel.show_compare(None, None)
        panel.show_bench(None, "")
        panel.show_bench_results([])
        self.mount_profiles()  # the list, unreadable files, --profile's recorded run
        self.query_one("#prompt", Composer).focus()
        self.set_interval(1.0, self._tick)
        self.bridge.start()
        self.bridge.load(self.settings.target, self.settings.draft)

    def on_unmount(self) -> None:
        self.bridge.close()  # at once when ctrl+q already stopped it; else after its round

    async def action_quit(self) -> None:
        """ctrl+q: the engine stops at its round boundary (a command queued is dropped), then
        the app exits; never while MLX runs on the engine thread (an exit mid-round crashes
        MLX). The exit comes on a later tick, so a save confirmed just before runs."""
        if self._quit_timer is not None:
            self.notify("Still stopping: the engine ends its round first.", title="quit")
            return
        unsent = self.query_one("#prompt", Composer).text
        if unsent.strip() and not isinstance(self.screen, ConfirmQuitScreen):
            lines = len(unsent.strip("\n").splitlines())
            self.push_screen(ConfirmQuitScreen(lines), self._quit_confirmed)
            return
        self._stop_and_quit()

    def _quit_confirmed(self, quit_: bool | None) -> None:
        if quit_:
            self._stop_and_quit()

    def _stop_and_quit(self) -> None:
        kind = self.bridge.busy_with
        self.bridge.request_close()
        if not self.stopping_prefill() and kind is not None:  # a prefill: the status says so
            self.notify(f"Quitting after the {kind} under way stops.", title="quit")
        self._quit_timer = self.set_interval(0.05, self._exit_when_stopped)

    def _exit_when_stopped(self) -> None:
        if self.bridge.stopped:
            self._quit_timer.stop()
            self.exit()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The keys' actions only on the main screen: their priority bindings would otherwise
        reach past a modal (F5 in the save dialog changing k behind it)."""
        return not (action in MAIN_SCREEN_ONLY and len(self.screen_stack) > 1)

    # -- settings and status -----------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A notification, always plain text: messages quote profile files, model specs and
        prompts, whose brackets (`[settings]`, `[/]`) are text, never markup, and whose
        escapes are removed (core/io/user_text.py). Screens and
        widgets pass markup=True by default (Widget.notify), so `markup` is ignored here."""
        super().notify(shown(message), title=shown(title), severity=severity, timeout=timeout,
                       markup=False)  # and never a terminal escape from a file it quotes

    def apply(self, **changes: Any) -> bool:
        """Validated change from the next round on; an out-of-range value leaves state as it was."""
        try:
            new = self.settings.replace(**changes)
        except SettingsError as exc:
            self.notify(str(exc), title="setting unchanged", severity="warning")
            return False
        self.settings = new
        return True

    def watch_settings(self, settings: Settings) -> None:
        self.live_settings = settings
        self._draw_status()

    def watch_status(self, status: Status) -> None:
        self._draw_status()

    def _draw_status(self) -> None:
        """The status line, the Profile panel's settings and the banner, from the reactives."""
        if not self.is_mounted:
            return
        s = self.settings
        self.query_one("#status", Static).update(status_line(self.status, s))
        self.query_one(ProfilePanel).show_settings(s, self.status.profile.name, self.info)
        # the banner: the pair, the last run's fall-back and the mode (the CPU sentence)
        drawn_from = (self.info, self.status.run.fallback_reason, s.mode)
        if drawn_from != self._banner_from:
            self._banner_from = drawn_from
            notes = banner_notes(self.info, self.status.run.fallback_reason, s)
            banner = self.query_one("#banner", Static)
            banner.update(Text("  ".join(notes)))  # reasons quote model specs: text, not markup
            banner.display = bool(notes)

    def _tick(self) -> None:
        """Once a second while something runs: the status line's elapsed times move on."""
        if self.status.timed:
            self._draw_status()

    def _state_text(self) -> str:
        """What the status line says the app waits on (tui.status.Status.text)."""
        return self.status.text()

    # -- chat and palette --------------------------------------------------------------------

    @on(Composer.Submitted, "#prompt")
    def send(self, event: Composer.Submitted) -> None:
        self.send_prompt(event.composer, event.value)  # tui/features/runs.py

    @on(Composer.Changed, "#prompt")
    def typing(self, event: Composer.Changed) -> None:
        """A keystroke in the message box: the idle warm-up starts no size for a while, so
        the UI is not competing with it for the CPU (what the status line promises)."""
        self.bridge.pause_idle(TYPING_PAUSE_S)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for key in KEYS:
            name, _, arg = key.action.partition("(")
            method = getattr(self, f"action_{name}")
            callback = partial(method, parse_arg(arg.rstrip(")"))) if arg else method
            forms = " / ".join(k for k in (key.bare_display, key.typing_display) if k)
            title = key.help[:1].upper() + key.help[1:]  # "TV budget", not "Tv budget"
            yield SystemCommand(title, f"key: {forms}" if forms else "palette only (no key)",
                                callback)


def build_app(args: argparse.Namespace, session_factory: SessionFactory | None = None) -> SpecDecApp:
    """The app for the command line: settings from --profile NAME[:key=value,...], then the
    setting flags on top (core/flags.py: chat's and the bench's)."""
    from core.flags import command_settings

    profile, settings, skipped = command_settings(args, default_settings())
    profiles_dir = getattr(args, "profiles_dir", None)
    app = SpecDecApp(settings, session_factory, profiles_dir=profiles_dir, profile=profile)
    if skipped is not None:
        app.profiles_state.start_notices.append(skipped)
    return app


def run_app(args: argparse.Namespace) -> int:
    """Entry point from core.cli (the real engine; a bad --profile raises a UserError)."""
    if getattr(args, "special_tokens_in_text", False):  # the process's one session reads it
        from tui.session import MLXSession

        MLXSession.specials_in_text = True
    result = build_app(args).run()
    return int(result or 0)
