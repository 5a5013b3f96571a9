"""The Profile panel: active settings, two runs side by side, the saved profiles, the benchmark.

It redraws from ready values (Settings, PairInfo, RunRecord) in one call, so the app can
refresh only the visible panel once per flush of rounds.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Label, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from core.bench.fmt import num, ratio
from core.events import phase_shares
from core.io.user_text import shown
from core.settings import Settings
from tui.engine_info import PairInfo
from tui.records import RunRecord
from tui.widgets.cells import fmt_pct

SETTING_KEYS = ("mode", "rule", "tv_budget", "k", "policy", "k_min", "k_max", "temperature",
                "top_p", "repetition_penalty", "seed", "max_tokens", "traced", "bonus",
                "dispatch", "verify_attention", "draft_source", "lookup_min_match")


def compare_rows(a: RunRecord | None, b: RunRecord | None) -> list[tuple[str, str, str]]:
    """E2E, acceptance, phase split and quality of two runs, side by side."""

    def col(r: RunRecord | None, f: Any) -> str:
        if r is None:
            return "-"
        try:
            return f(r)
        except (TypeError, ValueError, ZeroDivisionError):
            return "-"

    def phase_share(p: str) -> Any:
        def get(r: RunRecord) -> str:
            shares = phase_shares(r.summary.phase_s, r.summary.traced)
            return fmt_pct(None if shares is None else shares[p])

        return get

    spec: list[tuple[str, Any]] = [
        ("settings", lambda r: f"{r.settings.mode[:4]} {r.settings.rule[:4]} "
                               f"TV{r.settings.tv_budget:g} k{r.settings.k}"),
        ("E2E s", lambda r: f"{r.summary.e2e_s:.2f}"),
        ("tokens", lambda r: str(r.summary.tokens)),
        ("decode tok/s", lambda r: f"{r.summary.decode_tok_s:.1f}" if r.summary.decode_tok_s
                                   else "-"),
        ("TTFT s", lambda r: f"{r.summary.ttft_s:.2f}"),
        ("acceptance", lambda r: fmt_pct(r.summary.acceptance)),
        ("mean acc len", lambda r: num(r.summary.mean_accepted_length, ".2f")),
        *((f"{p} share", phase_share(p)) for p in ("draft", "verify", "sample", "cache")),
        ("mean TV (quality)", lambda r: num(r.summary.mean_tv, ".3f")),
    ]
    return [(name, col(a, f), col(b, f)) for name, f in spec]


def models_text(info: PairInfo | None) -> Text:
    """The loaded models in full (core/models/identify.py) and the code that runs them."""
    from core.identity import describe_models
    from core.version import version_text

    if info is None:
        return Text("models: none loaded", "dim")
    text = Text()
    if info.models is None:  # a session that cannot say (identities unknown): the specs alone
        described = {"target": f"{info.target_spec} (identity unknown)",
                     "draft": f"{info.draft_spec or 'none'} (identity unknown)"}
    else:
        described = describe_models(info.models)
    for role, line in described.items():
        text.append(f"{role:<7}", "dim")
        text.append(shown(line) + "\n")  # a spec is what the user typed: Text, never markup
    text.append(shown(version_text(info.environment)), "dim")
    return text


class ProfilePanel(VerticalScroll):
    """Active settings, two runs compared side by side, the saved profiles, the benchmark."""

    def compose(self) -> ComposeResult:
        yield Static(id="profile-name", classes="section")
        yield DataTable(id="settings-table", cursor_type="none", show_header=False)
        yield Static(id="profile-models")
        yield Label("compare runs (A: previous or profile, B: latest)", classes="section")
        yield Button("any two runs side by side (x)", id="open-compare", compact=True)
        yield DataTable(id="compare-table", cursor_type="none")
        with Horizontal(id="compare-text"):
            yield Static(id="text-a", classes="run-text")
            yield Static(id="text-b", classes="run-text")
        yield Label("saved profiles (enter switches, p anywhere)", classes="section")
        yield OptionList(id="profile-list")
        yield Label("benchmark (b)", classes="section", id="bench-label")
        yield ProgressBar(total=1.0, id="bench-progress", show_eta=False)
        yield Static(id="bench-result")
        yield DataTable(id="bench-table", cursor_type="none")

    def on_mount(self) -> None:
        self.query_one("#settings-table", DataTable).add_columns("setting", "value", "", "")

    class CompareAsked(Message):
        """The panel's button asks for any two runs side by side (the app's compare feature,
        tui/features/compare.py, opens them): the panel posts, it never calls the app."""

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "open-compare":
            event.stop()
            self.post_message(self.CompareAsked())

    def show_settings(
        self, settings: Settings, profile_name: str | None, info: PairInfo | None = None
    ) -> None:
        # Called on every repaint (once per batch of rounds): rebuild only on a change, since
        # refilling the table costs a relayout of the panel.
        if getattr(self, "_shown_settings", None) == (settings, profile_name, info):
            return
        self._shown_settings = (settings, profile_name, info)
        self.query_one("#profile-models", Static).update(models_text(info))
        name = profile_name or "(unsaved)"
        # Names, model specs and string settings come from files a user wrote: Text, not markup.
        self.query_one("#profile-name", Static).update(Text(f"active settings: profile {name}"))
        table = self.query_one("#settings-table", DataTable)
        table.clear()
        half = (len(SETTING_KEYS) + 1) // 2
        for left, right in zip_longest(SETTING_KEYS[:half], SETTING_KEYS[half:], fillvalue=""):
            row = [left, shown(getattr(settings, left))]  # a profile file's strings
            row += [right, shown(getattr(settings, right))] if right else ["", ""]
            table.add_row(*(Text(c, "dim") if i % 2 == 0 else Text(c) for i, c in enumerate(row)))

    def show_profiles(self, names: list[str], active: str | None) -> None:
        options = self.query_one("#profile-list", OptionList)
        options.clear_options()
        for name in names:
            mark = "● " if name == active else "  "
            options.add_option(Option(Text(mark + name), id=name))
        if not names:
            options.add_option(Option("no saved profiles: ctrl+s saves one", disabled=True))

    def show_compare(self, a: RunRecord | None, b: RunRecord | None) -> None:
        table = self.query_one("#compare-table", DataTable)
        table.clear(columns=True)
        table.add_columns("metric", Text(a.label if a else "A"), Text(b.label if b else "B"))
        for row in compare_rows(a, b):
            table.add_row(*row)
        for box, run in (("#text-a", a), ("#text-b", b)):
            text = Text()
            if run is not None:
                text.append(shown(run.label) + "\n", "bold")
                body = run.text.strip()
                text.append(body[:300] + ("…" if len(body) > 300 else ""))
            self.query_one(box, Static).update(text)

    def show_bench(self, fraction: float | None, text: Text | str) -> None:
        bar = self.query_one("#bench-progress", ProgressBar)
        bar.display = fraction is not None
        if fraction is not None:
            bar.update(progress=fraction)
        self.query_one("#bench-result", Static).update(text)

    def show_bench_results(self, results: list[Any]) -> None:
        """core.bench results: one row per setting, the seed's table in small."""
        table = self.query_one("#bench-table", DataTable)
        table.clear(columns=True)
        table.display = bool(results)
        if not results:
            return
        table.add_columns("setting", "accept", "median E2E s", "vs target", "mean TV",
                          "predicted", "efficiency")
        for r in results:
            median = getattr(r, "median_e2e_s", None)
            speed = getattr(r, "speedup_vs_target", None)
            table.add_row(
                Text(str(getattr(r, "name", "?"))),
                fmt_pct(getattr(r, "acceptance", None)),
                num(median, ".2f"),
                ratio(speed),
                num(getattr(r, "mean_tv", None), ".3f"),
                # core.cost.prediction's speedup for this row, and measured (decode) over it
                ratio(getattr(r, "predicted_speedup", None)),
                num(getattr(r, "efficiency", None), ".2f"),
            )
