"""The key actions on settings and engine tasks, mixed into SpecDecApp (tui/app.py)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import TabbedContent

from core.drafting import registry
from core.settings import MAX_K, MODES, POLICIES, RULES
from tui.keys import PANES, VIEWS, help_content
from tui.screens.modals import HelpScreen
from tui.widgets.acceptance import AcceptancePanel
from tui.widgets.chat import AssistantMessage, ChatView, Legend
from tui.widgets.composer import Composer
from tui.widgets.kernels import KernelsPanel
from tui.widgets.profile_panel import ProfilePanel


class SettingsActions:
    """`action_*` for the keys in tui.keys.KEYS: settings changes, cancel, calibrate, bench."""

    def action_tv_step(self, delta: float) -> None:
        """A step stops at the ends of [0, 1] and says so (`[` at 0 was an error toast)."""
        tv = min(max(round(self.settings.tv_budget + delta, 4), 0.0), 1.0)
        if tv == self.settings.tv_budget:
            end = "0 (lossless)" if tv == 0.0 else "1 (accept every draft)"
            self.notify(f"TV budget is already {end}.", timeout=1.5)
            return
        self.apply(tv_budget=tv)

    def action_tv_set(self, value: float) -> None:
        self.apply(tv_budget=float(value))

    def action_k_step(self, delta: int) -> None:
        """k up past k_max takes k_max with it (k may not exceed k_max), up to MAX_K."""
        k = self.settings.k + int(delta)
        if k > self.settings.k_max and k <= MAX_K:
            self.apply(k=k, k_max=k)
        else:
            self.apply(k=k)

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
        if self.run_id is not None or self.benchmarking or self.calibrating:
            if self.bridge.cancel():
                # A calibration's forward cannot be cut short: say so, not nothing.
                measuring = self.calibrating or (self.run_id is not None
                                                 and self.calibration_label is not None)
                self.notify("cancelling the calibration: it stops after the forward under way"
                            if measuring else "cancelling after this round", timeout=3)
            return
        prompt = self.query_one("#prompt", Composer)
        if prompt.has_focus:
            self.query_one(ChatView).focus()

    def action_focus_input(self) -> None:
        if self.view != "chat":
            self.action_show_view("chat")
        self.query_one("#prompt", Composer).focus()

    # Values a key steps through; the palette's entries are the same actions (tui.keys.KEYS).
    TEMPERATURES = (0.0, 0.3, 0.7, 1.0)
    MAX_TOKENS = (64, 128, 256, 512, 1024)

    def action_cycle_temperature(self) -> None:
        """The next temperature above the current one (0 after the last): T was fixed at
        start, and only a profile could change it."""
        t = self.settings.temperature
        nxt = next((v for v in self.TEMPERATURES if v > t + 1e-9), self.TEMPERATURES[0])
        if self.apply(temperature=nxt):
            self.notify(f"temperature {nxt:g}" + (" (greedy)" if nxt == 0 else ""), timeout=1.5)

    def action_cycle_max_tokens(self) -> None:
        n = self.settings.max_tokens
        nxt = next((v for v in self.MAX_TOKENS if v > n), self.MAX_TOKENS[0])
        if self.apply(max_tokens=nxt):
            self.notify(f"max tokens {nxt}", timeout=1.5)

    def action_next_view(self) -> None:
        """ctrl+t: the next panel tab; below NARROW columns the chat is one of the views."""
        if self.narrow:
            self.action_show_view(VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)])
            return
        panes = [pane for pane, _ in PANES]
        active = self.query_one(TabbedContent).active
        nxt = panes[(panes.index(active) + 1) % len(panes)] if active in panes else panes[0]
        self.show_panel(nxt)

    def action_show_view(self, view: str) -> None:
        """The chat or one panel (the palette, and ctrl+t in turn); side by side both stay, below NARROW columns the
        chosen one fills the screen."""
        self.view = view
        if view == "chat":
            self._lay_out()
            self.query_one("#prompt", Composer).focus()
            return
        self.query_one(TabbedContent).active = view
        self._lay_out()
        if self.narrow:  # the message box is hidden: single keys act on the panel shown
            self.screen.set_focus(None)
        self._refresh_panels()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(help_content()))

    def action_sweep_frontier(self) -> None:
        """The last `specdec-tui sweep` (core/sweep/last.py) as a table; its recommendation
        (or any row) becomes the settings, through `apply` like every key."""
        from core.errors import UserError
        from core.sweep.last import last_sweep_path, read_sweep
        from tui.screens.sweep import SweepScreen

        try:
            data = read_sweep()
        except UserError as exc:
            self.notify(str(exc), title="no sweep", severity="warning")
            return
        self.push_screen(SweepScreen(data, lambda s: bool(self.apply(**s)),
                                     str(last_sweep_path())))  # fmt: skip

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
