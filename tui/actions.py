"""The key actions on settings and engine tasks, mixed into SpecDecApp (tui/app.py)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Input, TabbedContent

from core.drafting import registry
from core.settings import MAX_K, MODES, POLICIES, RULES
from tui.keys import help_content
from tui.screens.modals import HelpScreen
from tui.widgets.chat import AssistantMessage, ChatView, Legend
from tui.widgets.panels import AcceptancePanel, KernelsPanel, ProfilePanel


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
        prompt = self.query_one("#prompt", Input)
        if prompt.has_focus:
            self.query_one(ChatView).focus()

    def action_focus_input(self) -> None:
        self.query_one("#prompt", Input).focus()

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
