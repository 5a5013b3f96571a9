"""The status line and the banner: what the app waits on, for how long, and why speculation
is off; mixed into SpecDecApp (tui/app.py).

One place that turns the app's state (a run, a calibration, a bench, a compile, an idle
warm-up) into the sentence at the top, so a turn that waits says on what: a first turn once
said "generating: round 0" through 100 s of prefill.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from tui.widgets.profile_panel import ProfilePanel

# Shown in the banner in speculative mode on MLX's CPU backend (docs/benchmarks/cpu.md).
CPU_NOTE = ("Speculation cannot pay on MLX's CPU backend, where verifying R rows costs about "
            "R target steps, so expect no speed-up here: the CPU is for checking correctness.")


class StatusLine:
    """The status line (`_show_settings`, redrawn once a second while something runs by
    `_tick`) and the banner (`_show_banner`) of SpecDecApp."""

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
        item("profile", self._profile_label(), "italic")
        self.query_one("#status", Static).update(text)
        if self.is_mounted:
            self.query_one(ProfilePanel).show_settings(s, self.profile_name, self.info)

    def _profile_label(self) -> str:
        """The profile's name, with " (modified)" once a key changed what it set."""
        if self.profile_name is None:
            return "-"
        base = self.profile_settings
        modified = base is not None and self.settings.replace(
            target=base.target, draft=base.draft) != base  # fmt: skip
        return self.profile_name + (" (modified)" if modified else "")

    def _tick(self) -> None:
        """Once a second while something runs: the status line's elapsed times move on."""
        if self.busy and (self.waiting or self.calibration_label or self.benchmarking):
            self._show_settings()

    @staticmethod
    def _since(start: float | None) -> str:
        if start is None:
            return ""
        s = int(time.monotonic() - start)
        return f" · {s} s" if s < 120 else f" · {s // 60} min {s % 60:02d} s"

    def _state_text(self) -> str:
        """What the app (a turn) waits on, and for how long: a first turn once said
        "generating: round 0" through 100 s of prefill."""
        if self.compiling:  # a first use stalled on GPU kernel compilation: never looks hung
            return self.compiling
        if self.models_loading:
            return "loading models…"
        if self.info is None:
            return "no models loaded"
        if self.run_id is not None:
            if self.calibration_label:  # a cost-aware run calibrating before its first round
                return (f"first turn waits on the calibration: {self.calibration_label}"
                        + self._since(self.turn_started))
            if self.waiting is not None:
                return f"{self.waiting[0]}…" + self._since(self.waiting[1])
            return f"generating: round {len(self.stats.rounds)}"
        if self.calibrating:
            return (f"calibrating: {self.calibration_label or 'starting'}"
                    + self._since(self.calibration_since))
        if self.benchmarking:
            return f"benchmarking: {self.bench_label or 'starting'}"
        if self.idle_warming:  # the engine compiles the rest while the user types
            return f"ready · {self.idle_warming}"
        return "ready"

    def _state_style(self) -> str:
        if self.compiling:
            return "yellow"
        if self.info is None:
            return "red"
        return "yellow" if (self.run_id is not None or self.models_loading or self.calibrating
                            or self.benchmarking) else "green"

    @property
    def busy(self) -> bool:
        return self.run_id is not None or self.calibrating or self.benchmarking

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
