"""The benchmark protocol on the last prompt (`b`), as SpecDecApp's feature
(tui/features/base.py): started, its progress in the Profile panel and the status line, its
table when done (core.bench's rows, the seed's table in small)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.widgets import TabbedContent

from tui.features.base import Feature
from tui.messages import BenchFinished, BenchProgress
from tui.status import BenchStatus
from tui.widgets.profile_panel import ProfilePanel


@dataclass
class BenchState:
    """The last benchmark's rows (core.bench results), as the Profile panel shows them."""

    results: list[Any] = field(default_factory=list)


class BenchFeature(Feature):
    """`b`, and the bridge's bench messages."""

    bench_state: BenchState

    @property
    def benchmarking(self) -> bool:
        return self.status.bench.running

    def action_bench(self) -> None:
        if not self.can_start("benchmark"):
            return
        prompt = self.runs_state.last_prompt()
        if prompt is None:
            self.notify("Send a message first: the benchmark runs on the last prompt.",
                        severity="warning")
            return
        self.set_status(bench=BenchStatus(running=True))
        self.query_one(ProfilePanel).show_bench(0.0, Text("starting…", "dim"))
        self.query_one(TabbedContent).active = "profile"
        self.bridge.bench([{"role": "user", "content": prompt}], self.settings)

    def on_bench_progress(self, message: BenchProgress) -> None:
        self.query_one(ProfilePanel).show_bench(message.fraction, Text(message.label, "dim"))
        # The status line too: the panel's bar sat below the Profile tab's fold for 5 minutes.
        self.set_status(bench=BenchStatus(self.status.bench.running,
                                          f"{message.fraction:.0%} {message.label}"))

    def on_bench_finished(self, message: BenchFinished) -> None:
        self.set_status(bench=BenchStatus())
        panel = self.query_one(ProfilePanel)
        if message.report is None:
            panel.show_bench(None, Text("benchmark stopped", "dim"))
            return
        self.bench_state.results = list(message.report.results)
        panel.show_bench(None, Text("done: protocol of core.bench on the last prompt", "dim"))
        panel.show_bench_results(self.bench_state.results)
        if not message.report.results:
            panel.show_bench(None, Text(message.report.summary_text()))
        self.notify("benchmark done: see the Profile panel", timeout=3)
