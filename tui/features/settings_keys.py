"""The keys that change a setting (TV, k, mode, rule, policy, source, temperature, max tokens),
rejected drafts shown or not, help and the last sweep's
frontier, as SpecDecApp's feature (tui/features/base.py). Every change goes through the
shell's `apply`, validated; the status line follows the settings reactive."""

from __future__ import annotations

from core.drafting import registry
from core.settings import MAX_K, MODES, POLICIES, RULES
from tui.features.base import Feature
from tui.keys import help_content
from tui.screens.help import HelpScreen
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.legend import Legend


class SettingsKeys(Feature):
    """`action_*` for the settings rows of tui.keys.KEYS."""

    # Values a key steps through; the palette's entries are the same actions (tui.keys.KEYS).
    TEMPERATURES = (0.0, 0.3, 0.7, 1.0)
    MAX_TOKENS = (64, 128, 256, 512, 1024)

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

    def action_toggle_rejected(self) -> None:
        self.show_rejected = not self.show_rejected

    def watch_show_rejected(self, show: bool) -> None:
        self.query_one(Legend).render_legend(show)
        for msg in self.query(AssistantMessage):
            runs = self.runs_state
            msg.refresh_view(show, runs.stats if msg is runs.current else None)

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
                                     str(last_sweep_path())))
