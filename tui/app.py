"""The Textual app: a chat driven by the speculative engine, with live per-round profiling panels.

The app never runs MLX: an EngineBridge thread does, and posts one message per round. The app
folds each round into RoundStats and a Transcript at once (cheap), and repaints at most once
per batch of queued rounds, so a fast engine never waits for the screen. Its parts: the keys
(tui/keys.py), their actions (tui/actions.py, tui/profiles.py) and the engine's messages
(tui/engine_events.py) and the status line (tui/status.py) are mixins; this module holds the
state, the layout and the chat.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Header, Static, TabbedContent, TabPane

from core.events import RunSummary
from core.io.user_text import shown
from core.settings import Settings, SettingsError, first_run_settings, flag_changes, with_flags
from tui.actions import SettingsActions
from tui.bridge import EngineBridge, SessionFactory
from tui.copies import CopyOrigin, PromptLayout
from tui.engine_events import MAX_RUNS, EngineEvents
from tui.engine_info import CurveInfo, PairInfo
from tui.keys import (
    KEYS,
    MAIN_SCREEN_ONLY,
    NARROW,
    PANES,
    bindings,
    help_content,
    key_bar,
    parse_arg,
)
from tui.ordering import RunSequencer
from tui.profiles import ProfileActions, curve_from_dict
from tui.records import RunRecord
from tui.stats import RoundStats, SourceStats
from tui.status import CPU_NOTE, StatusLine
from tui.widgets.acceptance import AcceptancePanel
from tui.widgets.chat import AssistantMessage, ChatView, Legend, UserMessage
from tui.widgets.composer import Composer
from tui.widgets.kernels import KernelsPanel
from tui.widgets.profile_panel import ProfilePanel
from tui.widgets.rounds import RoundsPanel

# Importable from here as before the split (tests, tui.screenshot, core.cli).
__all__ = ["CPU_NOTE", "KEYS", "MAX_RUNS", "PANES", "SpecDecApp", "build_app",
           "curve_from_dict", "default_settings", "help_content", "run_app"]


def default_settings() -> Settings:
    """The first run's settings, shared with `chat`: core.settings.first_run_settings."""
    return first_run_settings()


class KeyBar(Static):
    """The key bar: the keys that work while typing, wrapped to the screen's width (Textual's
    Footer scrolled sideways and cut them at 80 columns, and glued grouped keys together)."""

    def on_mount(self) -> None:
        # The first Resize can arrive before the screen's layout settles: wrapped then, the
        # bar kept one line at 80x24 until the terminal was resized. Fit again once laid out.
        self.call_after_refresh(self._fit)

    def on_resize(self, event: events.Resize) -> None:
        self.update(key_bar(max(event.size.width - 2, 20)))
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        self.update(key_bar(max(self.size.width - 2, 20)))


class SpecDecApp(SettingsActions, ProfileActions, EngineEvents, StatusLine, App[int]):
    """Chat with the target while the draft proposes; see every round's cost and outcome."""

    CSS_PATH = "app.tcss"
    TITLE = "specdec-tui"
    BINDINGS = bindings()

    settings: var[Settings] = var(Settings, init=False)
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
        self._live_settings = start  # read by the engine thread once per round
        self.set_reactive(SpecDecApp.settings, start)
        self.bridge = EngineBridge(self, session_factory, lambda: self._live_settings)
        self._quit_timer: Any = None  # set while ctrl+q waits for the engine's round to end
        self.profiles_dir = profiles_dir
        self._store = profile_store  # a core.profile.ProfileStore; made on first use otherwise
        self.profile_name: str | None = profile.name if profile is not None else None
        # The settings the named profile had when switched to or saved: the status line marks
        # the name modified once they differ (it kept "profile ux-run1" after every change).
        self.profile_settings: Settings | None = start if profile is not None else None
        self._start_profile = profile
        self.start_notices: list[str] = []  # said once mounted (a --profile run not loaded)
        self.info: PairInfo | None = None
        self.decode: Any = None
        self.curve: CurveInfo | None = None
        self.stats = RoundStats()
        self.sources = SourceStats()  # per draft source over the whole session
        self.layout: PromptLayout | None = None  # where the running turn's messages lie
        self.last_copy: CopyOrigin | None = None  # the session's last accepted copied run
        self.messages: list[dict[str, str]] = []
        self.dropped_messages = 0  # the chat's oldest messages the model no longer sees
        self.runs: list[RunRecord] = []  # this session's latest MAX_RUNS runs
        self.run_count = 0  # every run so far, for their labels
        self.compare: tuple[RunRecord | None, RunRecord | None] = (None, None)
        self.run_id: int | None = None
        self.sequencer = RunSequencer()  # a run's messages folded in the engine's order
        self.current: AssistantMessage | None = None
        # rounds, summary, the first round's settings, prompt, (round, changed fields) after it
        self.last_run: tuple[list, RunSummary, Settings, str, tuple] | None = None
        self.models_loading = False
        self.calibrating = False
        self.calibration_label: str | None = None
        self.compiling: str | None = None  # a first use compiling GPU kernels: its latest line
        self.idle_warming: str | None = None  # the idle warm-up's progress, until all are warm
        self.fallback_reason: str | None = None  # from the last RunSummary
        self.benchmarking = False
        self.show_plots = True  # the Kernels and Acceptance panels: plots, or their numbers
        self.flushes = 0
        self._flush_pending = False
        # What a turn waits on before its first round (the prefill), and since when; the
        # calibration's start and the bench's progress: the status line says each, timed.
        self.waiting: tuple[str, float] | None = None
        self.turn_started: float | None = None
        self.calibration_since: float | None = None
        self.bench_label: str | None = None
        self._laid_out_narrow = False
        self.view = "chat"  # below NARROW columns: what fills the screen (chat or a panel)

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
        self._show_settings()
        self._refresh_profiles()
        self.note_unreadable_profiles()
        self.query_one(ProfilePanel).show_compare(None, None)
        self.query_one(ProfilePanel).show_bench(None, "")
        self.query_one(ProfilePanel).show_bench_results([])
        if self._start_profile is not None and self._start_profile.run is not None:
            self._show_recorded(self._start_profile)
        self.query_one("#prompt", Composer).focus()
        self.set_interval(1.0, self._tick)
        self.bridge.start()
        self.bridge.load(self.settings.target, self.settings.draft)

    def on_unmount(self) -> None:
        self.bridge.close()  # at once when ctrl+q already stopped it; else after its round

    async def action_quit(self) -> None:
        """ctrl+q: the engine stops at its round boundary (a command queued is dropped), then
        the app exits; never while MLX runs on the engine thread (issue 32, row 14: 3 crashes
        in 10 tries). The exit comes on a later tick, so a save confirmed just before runs."""
        if self._quit_timer is not None:
            self.notify("Still stopping: the engine ends its round first.", title="quit")
            return
        kind = self.bridge.busy_with
        self.bridge.request_close()
        if kind is not None:
            self.notify(f"Quitting after the {kind} under way stops.", title="quit")
        self._quit_timer = self.set_interval(0.05, self._exit_when_stopped)

    def _exit_when_stopped(self) -> None:
        if self.bridge.stopped:
            self._quit_timer.stop()
            self.exit()

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out(event.size.width)

    @property
    def narrow(self) -> bool:
        """Laid out one view at a time (below NARROW columns, as of the last resize)."""
        return self._laid_out_narrow

    def _lay_out(self, width: int | None = None) -> None:
        """Side by side when both fit; else only the chosen view, the other a key away."""
        if not self.is_mounted:
            return
        narrow = (self.size.width if width is None else width) < NARROW
        self._laid_out_narrow = narrow
        main = self.query_one("#main")
        main.set_class(narrow, "narrow")
        from textual.widgets._header import HeaderTitle

        header = self.query_one(Header)  # format_title reads the width: say it again
        for title in header.query(HeaderTitle):
            title.update(header.format_title())
        main.set_class(narrow and self.view != "chat", "show-panels")

    def format_title(self, title: str, sub_title: str) -> Content:
        """The header is one line: "specdec-tui — target ← draft · backend · device" was cut
        at 80 columns, so below NARROW columns it is the pair alone."""
        if sub_title and self._laid_out_narrow:
            return Content(self._narrow_title(sub_title))
        return super().format_title(title, sub_title)

    def _narrow_title(self, sub_title: str) -> str:
        """target ← draft · backend in the header's room, long names cut in their middle
        (the device is in the Profile panel): a GGUF's own names are 40 characters."""
        info = self.info
        room = self.size.width - 12  # the header's icon and margins
        if info is None or len(sub_title) <= room:
            return sub_title
        target, draft = info.target_name, info.draft_name or "no draft"
        each = max((room - len(" ←  · ") - len(info.backend)) // 2, 8)

        def cut(name: str) -> str:
            if len(name) <= each:
                return name
            head = (each - 1) // 2
            return name[:head] + "…" + name[len(name) - (each - 1 - head):]

        return f"{cut(target)} ← {cut(draft)} · {info.backend}"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The keys' actions only on the main screen: their priority bindings would otherwise
        reach past a modal (F5 in the save dialog changing k behind it)."""
        return not (action in MAIN_SCREEN_ONLY and len(self.screen_stack) > 1)

    # -- settings -------------------------------------------------------------------------------

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
        self._live_settings = settings
        self._show_settings()
        if self.is_mounted:
            self._show_banner()  # the CPU sentence depends on the mode

    # -- chat ----------------------------------------------------------------------------------

    @on(Composer.Submitted, "#prompt")
    def send(self, event: Composer.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.info is None:
            self.notify("The models are not loaded yet." if self.models_loading else
                        "No models are loaded; see the error above.", severity="warning")
            return
        if self.busy:
            self.notify("The engine is busy; esc cancels the running generation.",
                        severity="warning")
            return
        event.composer.clear()
        self.messages.append({"role": "user", "content": text})
        chat = self.query_one(ChatView)
        assistant = AssistantMessage(self.decode, self.info.eos_ids, self.info.target_name)
        chat.add(UserMessage(text), assistant)
        self.current = assistant
        self.stats = RoundStats()
        self.turn_started = time.monotonic()
        self.waiting = ("waiting for the engine", self.turn_started)
        self.run_id = self.bridge.generate(self.messages, self.settings)
        self._show_settings()
        self.call_after_refresh(assistant.refresh_view, self.show_rejected, self.stats)
        chat.anchor()

    # -- panels -------------------------------------------------------------------------------

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.call_after_refresh(self._refresh_panels)

    def _refresh_panels(self, all_panels: bool = False) -> None:
        """Redraw the visible panel (or all): hidden ones catch up when their tab opens."""
        if not self.is_mounted:
            return
        active = self.query_one(TabbedContent).active
        if all_panels or active == "rounds":
            self.query_one(RoundsPanel).show(self.stats)
        if all_panels or active == "acceptance":
            self.query_one(AcceptancePanel).show(self.stats, self.sources, self.last_copy)
        if all_panels or active == "kernels":
            self.query_one(KernelsPanel).show(self.info, self.stats, self.curve,
                                              self.calibration_label)

    def show_panel(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane
        if self.view != "chat":
            self.view = pane
            self._lay_out()
        self._refresh_panels()  # drawn now from the state as it is, not after the next refresh

    # -- command palette -----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for key in KEYS:
            name, _, arg = key.action.partition("(")
            method = getattr(self, f"action_{name}")
            callback = partial(method, parse_arg(arg.rstrip(")"))) if arg else method
            forms = " / ".join(k for k in (key.bare_display, key.typing_display) if k)
            title = key.help[:1].upper() + key.help[1:]  # "TV budget", not "Tv budget"
            yield SystemCommand(title, f"key: {forms}", callback)


def build_app(args: argparse.Namespace, session_factory: SessionFactory | None = None) -> SpecDecApp:
    """The app for the command line: settings from --profile, then --target/--draft on top."""
    from core.profile import ProfileError, load_profile

    profile, skipped = None, None
    settings = default_settings()
    profiles_dir = getattr(args, "profiles_dir", None)
    if getattr(args, "profile", None):
        try:
            profile = load_profile(args.profile, profiles_dir)
        except ProfileError as exc:  # its settings may still be good: open with them, say why
            profile = load_profile(args.profile, profiles_dir, with_run=False)  # else: exit 2
            skipped = f"The recorded run of {profile.name} was not loaded: {exc}"
        settings = profile.settings
    settings = with_flags(settings, flag_changes(args))  # --target, --draft: the app's flags
    app = SpecDecApp(settings, session_factory, profiles_dir=profiles_dir, profile=profile)
    if skipped is not None:
        app.start_notices.append(skipped)
    return app


def run_app(args: argparse.Namespace) -> int:
    """Entry point from core.cli (the real engine; a bad --profile raises a UserError)."""
    if getattr(args, "special_tokens_in_text", False):  # the process's one session reads it
        from tui.session import MLXSession

        MLXSession.specials_in_text = True
    result = build_app(args).run()
    return int(result or 0)
