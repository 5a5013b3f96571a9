"""The Textual app: a chat driven by the speculative engine, with live per-round profiling panels.

The app never runs MLX: an EngineBridge thread does, and posts one message per round. The app
folds each round into RoundStats and a Transcript at once (cheap), and repaints at most once
per batch of queued rounds, so a fast engine never waits for the screen.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import Header, Input, Static, TabbedContent, TabPane

from core.drafting import registry
from core.errors import UserError
from core.events import RunSummary
from core.settings import MODES, POLICIES, RULES, Settings, SettingsError
from tui.bridge import (
    BenchFinished,
    BenchProgress,
    Calibrated,
    CalibrationProgress,
    ContextTrimmed,
    CurveInfo,
    EngineBridge,
    EngineFailed,
    ModelsLoaded,
    ModelsLoading,
    PairInfo,
    RoundCommitted,
    RunFinished,
    RunStarted,
    SessionFactory,
)
from tui.copies import CopyOrigin, PromptLayout, locate_copy
from tui.screens.modals import HelpScreen, ProfilePickerScreen, SaveProfileScreen
from tui.stats import RoundStats, SourceStats
from tui.widgets.chat import AssistantMessage, ChatView, Legend, UserMessage
from tui.widgets.footer import Footer  # Textual's, without its key leak
from tui.widgets.panels import (
    AcceptancePanel,
    KernelsPanel,
    ProfilePanel,
    RoundsPanel,
    RunRecord,
)

TV_GROUP = Binding.Group("TV", compact=True)
MAX_RUNS = 100  # runs of this session kept for comparing (the soak test found the list grew)
K_GROUP = Binding.Group("k", compact=True)


@dataclass(frozen=True)
class Key:
    """One user action: its bare key (input not focused), its while-typing form, its meaning."""

    action: str
    bare: str  # Textual key names, comma separated
    typing: str  # a modifier / F-key form that works while the input box has focus
    display: str
    label: str
    help: str
    show: bool = True
    group: Binding.Group | None = None


KEYS: tuple[Key, ...] = (
    Key("tv_step(-0.05)", "left_square_bracket", "f2", "[ F2", "TV−", "TV budget −0.05",
        group=TV_GROUP),
    Key("tv_step(0.05)", "right_square_bracket", "f3", "] F3", "TV+", "TV budget +0.05",
        group=TV_GROUP),
    Key("tv_step(-0.25)", "left_curly_bracket", "shift+f2", "{ ⇧F2", "TV−.25",
        "TV budget −0.25", show=False),
    Key("tv_step(0.25)", "right_curly_bracket", "shift+f3", "} ⇧F3", "TV+.25",
        "TV budget +0.25", show=False),
    Key("tv_set(0.0)", "0", "f4", "0 F4", "lossless", "TV budget 0 (lossless)", show=False),
    Key("tv_set(1.0)", "1", "shift+f4", "1 ⇧F4", "TV=1", "TV budget 1 (accept every draft)",
        show=False),
    Key("k_step(-1)", "minus", "f5", "- F5", "k−", "draft length −1", group=K_GROUP),
    Key("k_step(1)", "plus,equals_sign", "f6", "+ F6", "k+", "draft length +1", group=K_GROUP),
    Key("cycle_mode", "m", "alt+m", "m", "mode", "cycle mode: target-only, draft-only, speculative"),
    Key("cycle_rule", "a", "alt+a", "a", "rule", "cycle rule: greedy, lossless, mentored"),
    Key("cycle_policy", "o", "alt+o", "o", "policy", "cycle the draft-length policy"),
    Key("cycle_draft_source", "d", "alt+d", "d", "source",
        "cycle the draft source: model, lookup, hybrid"),
    Key("toggle_rejected", "r", "alt+r", "r", "rejected", "show rejected draft tokens"),
    Key("toggle_plots", "v", "alt+v", "v", "plots", "plots or numbers in the Kernels and "
        "Acceptance panels", show=False),
    Key("calibrate", "c", "alt+c", "c", "calibrate", "measure verify cost vs rows"),
    Key("bench", "b", "alt+b", "b", "bench", "benchmark protocol on the last prompt"),
    Key("switch_profile", "p", "alt+p", "p", "profiles", "switch to a saved profile"),
    Key("compare_runs", "x", "alt+x", "x", "compare", "compare two runs side by side (this "
        "session's and saved profiles)", show=False),
    Key("save_profile", "ctrl+s", "", "^s", "save", "save settings + recorded rounds as a profile"),
    Key("help", "question_mark", "f1", "? F1", "help", "keys and colours"),
)


def _bindings() -> list[Binding]:
    out = [
        Binding(
            ",".join(k for k in (key.bare, key.typing) if k),
            key.action,
            key.label,
            show=key.show,
            key_display=key.display,
            tooltip=key.help,
            group=key.group,
        )
        for key in KEYS
    ]
    out.append(Binding("escape", "cancel", "cancel", key_display="esc",
                       tooltip="cancel the generation; outside a run, leave the input box"))
    out.append(Binding("i", "focus_input", "type", show=False))
    return out


# Shown in the banner in speculative mode on MLX's CPU backend (docs/benchmarks/cpu.md).
CPU_NOTE = ("Speculation cannot pay on MLX's CPU backend, where verifying R rows costs about "
            "R target steps, so expect no speed-up here: the CPU is for checking correctness.")


def default_settings() -> Settings:
    """The first run's settings: hybrid drafting (free copies of whatever the chat repeats,
    the draft model elsewhere) with the cost-aware k, which drafts only where a measured
    verify cost says drafting pays (profiles/hybrid-cost-aware.toml)."""
    return Settings(draft_source="hybrid", policy="cost-aware")


PANES = (("rounds", "Rounds"), ("acceptance", "Acceptance"), ("kernels", "Kernels"),
         ("profile", "Profile"))


class SpecDecApp(App[int]):
    """Chat with the target while the draft proposes; see every round's cost and outcome."""

    CSS_PATH = "app.tcss"
    TITLE = "specdec-tui"
    BINDINGS = _bindings()

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
        self.profiles_dir = profiles_dir
        self._store = profile_store  # a core.profile.ProfileStore; made on first use otherwise
        self.profile_name: str | None = profile.name if profile is not None else None
        self._start_profile = profile
        self.info: PairInfo | None = None
        self.decode: Any = None
        self.curve: CurveInfo | None = None
        self.stats = RoundStats()
        self.sources = SourceStats()  # per draft source over the whole session
        self.layout: PromptLayout | None = None  # where the running turn's messages lie
        self.last_copy: CopyOrigin | None = None  # the session's last accepted copied run
        self.messages: list[dict[str, str]] = []
        self.runs: list[RunRecord] = []  # this session's latest MAX_RUNS runs
        self.run_count = 0  # every run so far, for their labels
        self.compare: tuple[RunRecord | None, RunRecord | None] = (None, None)
        self.run_id: int | None = None
        self.current: AssistantMessage | None = None
        self.last_run: tuple[list, RunSummary, Settings, str] | None = None
        self.models_loading = False
        self.calibrating = False
        self.calibration_label: str | None = None
        self.fallback_reason: str | None = None  # from the last RunSummary
        self.benchmarking = False
        self.show_plots = True  # the Kernels and Acceptance panels: plots, or their numbers
        self.flushes = 0
        self._flush_pending = False

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="⚡")
        yield Static(id="banner")
        yield Static(id="status")
        with Horizontal(id="main"):
            with Vertical(id="chat-column"):
                yield Legend(id="legend")
                yield ChatView(id="chat")
                yield Input(placeholder="Message the target… (enter sends, esc cancels / leaves "
                            "the box so single keys act)", id="prompt")
            with TabbedContent(id="panels", initial="rounds"):
                with TabPane("Rounds", id="rounds"):
                    yield RoundsPanel(id="rounds-panel")
                with TabPane("Acceptance", id="acceptance"):
                    yield AcceptancePanel(id="acceptance-panel")
                with TabPane("Kernels", id="kernels"):
                    yield KernelsPanel(id="kernels-panel")
                with TabPane("Profile", id="profile"):
                    yield ProfilePanel(id="profile-panel")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#banner", Static).display = False
        self.query_one(Legend).render_legend(self.show_rejected)
        self._show_settings()
        self._refresh_profiles()
        self.query_one(ProfilePanel).show_compare(None, None)
        self.query_one(ProfilePanel).show_bench(None, "")
        self.query_one(ProfilePanel).show_bench_results([])
        if self._start_profile is not None and self._start_profile.run is not None:
            self._show_recorded(self._start_profile)
        self.query_one("#prompt", Input).focus()
        self.bridge.start()
        self.bridge.load(self.settings.target, self.settings.draft)

    def on_unmount(self) -> None:
        self.bridge.close()

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
        prompts, whose brackets (`[settings]`, `[/]`) are text, never markup. Screens and
        widgets pass markup=True by default (Widget.notify), so `markup` is ignored here."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

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

    def _show_settings(self) -> None:
        s = self.settings
        text = Text()

        def item(label: str, value: str, style: str = "bold") -> None:
            text.append(f"{label} ", "dim")
            text.append(value, style)
            text.append("   ")

        text.append("● ", self._state_style())
        text.append(self._state_text(), "bold")
        text.append("   ")
        item("mode", s.mode, "bold magenta")
        item("source", s.draft_source)
        item("rule", s.effective_rule + (" (T=0)" if s.temperature == 0 and s.rule != "greedy"
                                         else ""))
        tv_style = "bold" if s.effective_rule == "mentored" else "dim strike"
        item("TV", f"{s.tv_budget:.2f}", tv_style)
        item("k", str(s.k))
        item("policy", s.policy)
        item("T", f"{s.temperature:g}")
        item("max", str(s.max_tokens))
        item("profile", self.profile_name or "-", "italic")
        self.query_one("#status", Static).update(text)
        if self.is_mounted:
            self.query_one(ProfilePanel).show_settings(s, self.profile_name)

    def _state_text(self) -> str:
        if self.models_loading:
            return "loading models…"
        if self.info is None:
            return "no models loaded"
        if self.run_id is not None:
            if self.calibration_label:  # a cost-aware run calibrating before its first round
                return f"calibrating before the first round: {self.calibration_label}"
            return f"generating: round {len(self.stats.rounds)}"
        if self.calibrating:
            return "calibrating…"
        if self.benchmarking:
            return "benchmarking…"
        return "ready"

    def _state_style(self) -> str:
        if self.info is None:
            return "red"
        return "yellow" if (self.run_id is not None or self.models_loading or self.calibrating
                            or self.benchmarking) else "green"

    @property
    def busy(self) -> bool:
        return self.run_id is not None or self.calibrating or self.benchmarking

    # -- key actions ----------------------------------------------------------------------------

    def action_tv_step(self, delta: float) -> None:
        self.apply(tv_budget=round(self.settings.tv_budget + delta, 4))

    def action_tv_set(self, value: float) -> None:
        self.apply(tv_budget=float(value))

    def action_k_step(self, delta: int) -> None:
        self.apply(k=self.settings.k + int(delta))

    def _cycle(self, name: str, choices: tuple[str, ...]) -> None:
        current = getattr(self.settings, name)
        nxt = choices[(choices.index(current) + 1) % len(choices)]
        if self.apply(**{name: nxt}):
            self.notify(f"{name} {nxt}", timeout=1.5)

    def action_cycle_mode(self) -> None:
        self._cycle("mode", MODES)

    def action_cycle_rule(self) -> None:
        self._cycle("rule", RULES)

    def action_cycle_policy(self) -> None:
        self._cycle("policy", POLICIES)

    def action_cycle_draft_source(self) -> None:
        self._cycle("draft_source", registry.names())

    def action_toggle_rejected(self) -> None:
        self.show_rejected = not self.show_rejected

    def action_toggle_plots(self) -> None:
        self.show_plots = not self.show_plots
        self.query_one(KernelsPanel).set_plots(self.show_plots)
        self.query_one(AcceptancePanel).set_plots(self.show_plots)

    def watch_show_rejected(self, show: bool) -> None:
        self.query_one(Legend).render_legend(show)
        for msg in self.query(AssistantMessage):
            msg.refresh_view(show, self.stats if msg is self.current else None)

    def action_cancel(self) -> None:
        if self.run_id is not None or self.benchmarking:
            if self.bridge.cancel():
                self.notify("cancelling after this round", timeout=2)
            return
        prompt = self.query_one("#prompt", Input)
        if prompt.has_focus:
            self.query_one(ChatView).focus()

    def action_focus_input(self) -> None:
        self.query_one("#prompt", Input).focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(help_content()))

    def action_calibrate(self) -> None:
        if not self._can_start("calibrate"):
            return
        self.calibrating = True
        self._show_settings()
        self.notify("calibrating verify cost vs rows: see the Kernels panel", timeout=2)
        self.show_panel("kernels")
        self.bridge.calibrate(self.settings)

    def action_bench(self) -> None:
        if not self._can_start("benchmark"):
            return
        prompt = self._last_prompt()
        if prompt is None:
            self.notify("Send a message first: the benchmark runs on the last prompt.",
                        severity="warning")
            return
        self.benchmarking = True
        self.query_one(ProfilePanel).show_bench(0.0, Text("starting…", "dim"))
        self.query_one(TabbedContent).active = "profile"
        self._show_settings()
        self.bridge.bench([{"role": "user", "content": prompt}], self.settings)

    def _can_start(self, what: str) -> bool:
        if self.info is None:
            self.notify(f"Cannot {what}: no models are loaded yet.", severity="warning")
            return False
        if self.busy:
            self.notify(f"Cannot {what} while the engine is busy (esc cancels a run).",
                        severity="warning")
            return False
        return True

    def _last_prompt(self) -> str | None:
        for m in reversed(self.messages):
            if m["role"] == "user":
                return m["content"]
        return None

    # -- profiles ----------------------------------------------------------------------------

    def store(self) -> Any:
        """The profile store: --profiles-dir (or the default folder) plus the shipped presets."""
        if self._store is None:
            from core.profile import ProfileStore

            folder = None if self.profiles_dir is None else str(self.profiles_dir)
            self._store = ProfileStore.default(folder)
        return self._store

    def _profile_names(self) -> list[str]:
        try:
            return self.store().names()
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return []

    def _refresh_profiles(self) -> None:
        self.query_one(ProfilePanel).show_profiles(self._profile_names(), self.profile_name)

    def action_save_profile(self) -> None:
        self.push_screen(SaveProfileScreen(self.profile_name or "my-profile"),
                         self._save_profile)

    def _save_profile(self, name: str | None) -> None:
        if not name:
            return
        try:
            saved = self.save_profile(name)
        except UserError as exc:
            self.notify(str(exc), title="not saved", severity="error")
            return
        self.profile_name = saved
        self._show_settings()
        self._refresh_profiles()
        note = " (name taken, saved under a free one)" if saved != name else ""
        self.notify(f"saved profile {saved}{note}", title="profile")

    def save_profile(self, name: str) -> str:
        """Write settings + the last run's rounds and summary; returns the name it got."""
        from core.profile import Profile, ProfileRecorder

        if self.last_run is None:
            profile = Profile(name, self.settings)
        else:
            rounds, summary, run_settings, prompt = self.last_run
            rec = ProfileRecorder(name, run_settings)
            for ev in rounds:
                rec.add(ev)
            rec.add(summary)
            env = dict(self.info.environment) if self.info is not None else {}
            profile = rec.profile(
                prompt=prompt,
                calibration=self.curve.raw if self.curve is not None else None,
                environment=env,
            )
            profile = dataclasses.replace(profile, settings=self.settings)
        store = self.store()
        # Saving under the active profile's own name updates it; any other taken name gets a
        # free variant, so a save never clobbers a profile the user did not mean.
        own = name == self.profile_name and store.toml_path(name).is_file()
        return store.save(profile, overwrite=own)

    def action_compare_runs(self) -> None:
        """Two runs side by side: this session's runs and the saved profiles, A and B."""
        from tui.screens.compare import CompareScreen, live_run

        env = dict(self.info.environment) if self.info is not None else {}
        live = [live_run(i, record, env) for i, record in enumerate(self.runs)]

        def key(record: RunRecord | None) -> str | None:
            if record is None:
                return None
            for i, run in enumerate(self.runs):
                if run is record:
                    return f"live:{i}"
            return f"profile:{record.label}"  # a recorded profile shown in the panel

        a, b = self.compare
        self.push_screen(CompareScreen(live, self.store(), key(a), key(b)))

    def action_switch_profile(self) -> None:
        self.push_screen(ProfilePickerScreen(self._profile_names(), self.profile_name),
                         self.switch_profile)

    def on_option_list_option_selected(self, event: Any) -> None:
        if event.option_list.id == "profile-list" and event.option.id:
            self.switch_profile(event.option.id)

    def switch_profile(self, name: str | None) -> None:
        """Load a saved profile: its settings become active, its recorded run fills the panels."""
        if not name:
            return
        try:
            profile = self.store().load(name)
        except UserError as exc:
            self.notify(str(exc), title="profile not loaded", severity="error")
            return
        old = self.settings
        self.profile_name = profile.name
        self.settings = profile.settings
        self._show_settings()
        self._refresh_profiles()
        if (profile.settings.target, profile.settings.draft) != (old.target, old.draft):
            if self.run_id is not None:
                self.bridge.cancel()
            self.bridge.load(profile.settings.target, profile.settings.draft)
        if profile.run is not None:
            self._show_recorded(profile)
        self.notify(f"switched to profile {profile.name}", title="profile", timeout=2)

    def _show_recorded(self, profile: Any) -> None:
        run = profile.run
        if self.run_id is None:
            self.stats = RoundStats.from_rounds(run.rounds, run.summary)
        if run.calibration:
            self.curve = curve_from_dict(run.calibration)
        record = RunRecord(profile.name, run.settings or profile.settings, run.summary,
                           self._decode_ids(run.summary.token_ids), run.summary.mean_tv)
        self.compare = (record, self.runs[-1] if self.runs else None)
        self.query_one(ProfilePanel).show_compare(*self.compare)
        self._refresh_panels(all_panels=True)

    def _decode_ids(self, ids: Iterable[int]) -> str:
        """A recorded run's text, when a tokenizer is loaded (a profile stores ids only)."""
        if self.decode is None or self.info is None:
            return ""
        keep = [i for i in ids if i not in self.info.eos_ids]
        try:
            return str(self.decode(keep))
        except Exception:  # ids from another vocabulary: show no text rather than fail
            return ""

    # -- chat ----------------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def send(self, event: Input.Submitted) -> None:
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
        event.input.clear()
        self.messages.append({"role": "user", "content": text})
        chat = self.query_one(ChatView)
        assistant = AssistantMessage(self.decode, self.info.eos_ids, self.info.target_name)
        chat.add(UserMessage(text), assistant)
        self.current = assistant
        self.stats = RoundStats()
        self.run_id = self.bridge.generate(self.messages, self.settings)
        self._show_settings()
        self.call_after_refresh(assistant.refresh_view, self.show_rejected, self.stats)
        chat.anchor()

    def on_run_started(self, message: RunStarted) -> None:
        if message.run_id == self.run_id:
            self.layout = PromptLayout(tuple(message.prompt_ids), tuple(message.spans),
                                       tuple(message.roles))

    def on_context_trimmed(self, message: ContextTrimmed) -> None:
        """The conversation outgrew the context: keep what the engine now sees, and say so."""
        if message.run_id != self.run_id:
            return
        self.messages = [dict(m) for m in message.kept]
        note = Static(Text(
            f"The conversation outgrew the model's {message.window:,}-token context, so its "
            f"{message.dropped} oldest messages were dropped: the model no longer sees them.",
            "italic yellow"), classes="context-note")  # fmt: skip
        chat = self.query_one(ChatView)
        if self.current is not None and self.current.parent is chat:
            chat.add(note, before=self.current)
        else:
            chat.add(note)

    def on_round_committed(self, message: RoundCommitted) -> None:
        if message.run_id != self.run_id or self.current is None:
            return
        ev = message.event
        # The engine reads the same live settings once per round; a plain target step of
        # speculative mode counts against each source's hit rate, a target-only round does not.
        live = self._live_settings
        speculative = bool(ev.source) or (
            live.mode == "speculative"  # the lookup needs no draft model to speculate
            and (self.info is None or self.info.speculation_ok or live.draft_source == "lookup")
        )
        self.stats.add(ev, speculative)
        self.sources.observe(ev, speculative)
        self.current.transcript.add_round(ev)
        if self.sources.last_copy is ev and ev.copied_from is not None:
            kept = sum(t.origin == "copied" for t in ev.tokens)
            self.last_copy = locate_copy(ev.copied_from, kept, self.layout,
                                         self.current.transcript.ids, self.decode)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            self.call_later(self._repaint)

    def _repaint(self) -> None:
        """One repaint for all rounds queued since the last one."""
        self._flush_pending = False
        self.flushes += 1
        if self.current is not None:
            self.current.refresh_view(self.show_rejected, self.stats)
        self._refresh_panels()
        self._show_settings()

    def on_run_finished(self, message: RunFinished) -> None:
        if message.run_id != self.run_id:
            return
        assistant = self.current
        self.run_id = None
        self.current = None
        summary = message.summary
        if assistant is not None:
            assistant.summary = summary
            assistant.finished = True
            if assistant.text or summary is not None:
                self.messages.append({"role": "assistant", "content": assistant.text})
            elif self.messages and self.messages[-1]["role"] == "user":
                self.messages.pop()  # nothing came back: the next turn must not follow it
        if summary is not None:
            self.stats.summary = summary
            self.fallback_reason = summary.fallback_reason
            self._show_banner()
            run_settings = self._live_settings
            prompt = self._last_prompt() or ""
            self.last_run = (list(self.stats.rounds), summary, run_settings, prompt)
            self.run_count += 1
            label = f"run {self.run_count}"
            record = RunRecord(label, run_settings, summary,
                               assistant.text if assistant else "", summary.mean_tv)
            self.runs.append(record)
            del self.runs[:-MAX_RUNS]  # a long session keeps its latest runs, not every one
            previous = self.compare[1] if self.compare[1] is not None else self.compare[0]
            self.compare = (previous, record)
            self.query_one(ProfilePanel).show_compare(*self.compare)
        if assistant is not None:
            assistant.refresh_view(self.show_rejected, self.stats)
        self._refresh_panels()
        self._show_settings()

    # -- engine lifecycle ------------------------------------------------------------------------

    def on_models_loading(self, message: ModelsLoading) -> None:
        self.models_loading = True
        self.info = None
        self.query_one(ChatView).loading = True
        self.sub_title = f"loading {message.target} ← {message.draft or 'no draft'}…"
        self._show_settings()

    def on_models_loaded(self, message: ModelsLoaded) -> None:
        self.models_loading = False
        self.info = message.info
        self.decode = message.decode
        self.query_one(ChatView).loading = False
        info = message.info
        draft = info.draft_name or "no draft"
        device = f" · {info.device}" if info.device else ""
        self.sub_title = f"{info.target_name} ← {draft} · {info.backend}{device}"
        self._show_banner()
        self._show_settings()
        for record in self.compare:
            if record is not None and not record.text:
                record.text = self._decode_ids(record.summary.token_ids)
        self.query_one(ProfilePanel).show_compare(*self.compare)
        self._refresh_panels(all_panels=True)

    def _show_banner(self) -> None:
        info = self.info
        notes: list[str] = []
        if info is not None and info.random_weights:
            notes.append("Random-weight model shapes: the text is noise; the timings are real.")
        if info is not None and not info.speculation_ok:
            reason = info.speculation_reason or "the pair cannot speculate"
            notes.append(f"Speculation is off, running target-only: {reason}.")
        elif self.fallback_reason:
            notes.append(f"The last run fell back to target-only: {self.fallback_reason}.")
        elif info is not None and info.backend == "cpu" and self.settings.mode == "speculative":
            notes.append(CPU_NOTE)
        banner = self.query_one("#banner", Static)
        banner.update(Text("  ".join(notes)))  # reasons quote model specs: text, not markup
        banner.display = bool(notes)

    def on_engine_failed(self, message: EngineFailed) -> None:
        titles = {"load": "could not load models", "generate": "generation failed",
                  "calibrate": "calibration failed", "bench": "benchmark failed"}
        self.notify(message.error, title=titles.get(message.task, message.task),
                    severity="error", timeout=8)
        if message.task == "load":
            self.models_loading = False
            self.query_one(ChatView).loading = False
            self.sub_title = "no models loaded"
        elif message.task == "calibrate":
            self.calibrating = False
            self.calibration_label = None
        elif message.task == "generate" and self.current is not None \
                and message.run_id == self.run_id:
            self.current.error = message.error
        self._show_settings()

    def on_calibration_progress(self, message: CalibrationProgress) -> None:
        self.calibration_label = f"{message.fraction:.0%} {message.label}"
        self.query_one(KernelsPanel).show(self.info, self.stats, self.curve,
                                          self.calibration_label)
        if self.run_id is not None:
            self._show_settings()  # the status line carries the progress of a run's calibration

    def on_calibrated(self, message: Calibrated) -> None:
        self.calibrating = False
        self.calibration_label = None
        self.curve = message.curve
        self.notify("calibration done: see the Kernels panel", timeout=2)
        self._show_settings()
        self._refresh_panels(all_panels=True)

    def on_bench_progress(self, message: BenchProgress) -> None:
        self.query_one(ProfilePanel).show_bench(message.fraction, Text(message.label, "dim"))

    def on_bench_finished(self, message: BenchFinished) -> None:
        self.benchmarking = False
        panel = self.query_one(ProfilePanel)
        if message.report is None:
            panel.show_bench(None, Text("benchmark stopped", "dim"))
        else:
            panel.show_bench(None, Text("done: protocol of core.bench on the last prompt", "dim"))
            panel.show_bench_results(list(message.report.results))
            if not message.report.results:
                panel.show_bench(None, Text(message.report.summary_text()))
            self.notify("benchmark done: see the Profile panel", timeout=3)
        self._show_settings()

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

    # -- command palette -----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for key in KEYS:
            name, _, arg = key.action.partition("(")
            method = getattr(self, f"action_{name}")
            callback = partial(method, _parse_arg(arg.rstrip(")"))) if arg else method
            forms = " / ".join(k for k in (key.display, key.typing) if k)
            yield SystemCommand(key.help.capitalize(), f"key: {forms}", callback)
        for pane_id, title in PANES:
            yield SystemCommand(f"Show the {title} panel", "side panel",
                                partial(self.show_panel, pane_id))


def _parse_arg(arg: str) -> float | int:
    return float(arg) if "." in arg else int(arg)


def help_content() -> RenderableType:
    """The help screen: every key, its while-typing form, and the colours."""
    from rich.console import Group
    from rich.table import Table

    from tui.transcript import ORIGIN_HELP, ORIGIN_STYLES

    intro = Text.from_markup(
        "[bold]specdec-tui keys[/bold]\n"
        "Single keys act when the input box is [bold]not[/bold] focused (esc leaves it, "
        "[bold]i[/bold] returns). The F-key / alt forms work while typing. Changes apply from "
        "the next round and show at once. Every action is also in the palette (ctrl+p).\n"
    )
    keys = Table(box=None, padding=(0, 2), header_style="bold")
    keys.add_column("key", style="bold yellow")
    keys.add_column("while typing", style="yellow")
    keys.add_column("does")
    for key in KEYS:
        bare = key.display.split(" ")[0]
        keys.add_row(bare, key.typing or bare, key.help)
    keys.add_row("esc", "esc", "cancel the running generation (or leave the input box)")
    keys.add_row("i", "", "back to the input box")
    keys.add_row("ctrl+p", "ctrl+p", "command palette")
    keys.add_row("ctrl+q", "ctrl+q", "quit")
    colours = Table(box=None, padding=(0, 2), title="colours", title_justify="left",
                    title_style="bold", show_header=False)
    colours.add_column()
    colours.add_column()
    for origin, what in ORIGIN_HELP.items():
        colours.add_row(Text(origin, ORIGIN_STYLES[origin]), what)
    return Group(intro, keys, Text(""), colours)


def curve_from_dict(data: dict[str, Any]) -> CurveInfo | None:
    """A stored calibration back into a CurveInfo (via core.dispatch when it can)."""
    try:
        from core.dispatch import VerifyCostCurve
        from tui.session import curve_info

        return curve_info(VerifyCostCurve.from_dict(data))
    except Exception:  # a profile from another version: show no curve rather than fail
        return None


def build_app(args: argparse.Namespace, session_factory: SessionFactory | None = None) -> SpecDecApp:
    """The app for the command line: settings from --profile, then --target/--draft on top."""
    from core.profile import load_profile

    profile = None
    settings = default_settings()
    profiles_dir = getattr(args, "profiles_dir", None)
    if getattr(args, "profile", None):
        profile = load_profile(args.profile, profiles_dir)
        settings = profile.settings
    overrides = {k: getattr(args, k) for k in ("target", "draft") if getattr(args, k, None)}
    if overrides:
        settings = settings.replace(**overrides)
    return SpecDecApp(settings, session_factory, profiles_dir=profiles_dir, profile=profile)


def run_app(args: argparse.Namespace) -> int:
    """Entry point from core.cli (the real engine; a bad --profile raises a UserError)."""
    result = build_app(args).run()
    return int(result or 0)
