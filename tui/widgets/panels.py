"""The side panels: where a round's time goes, what the target accepted, which kernel ran, profiles.

Each panel redraws from ready numbers (RoundStats, PairInfo, CurveInfo) in one call, so the
app can refresh only the visible one once per flush of rounds.
"""

from __future__ import annotations

import dataclasses
from itertools import zip_longest
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import (
    Button,
    DataTable,
    Label,
    OptionList,
    ProgressBar,
    Sparkline,
    Static,
)
from textual.widgets.option_list import Option

from core.cost.guard import guard_lines
from core.events import RunSummary, phase_label
from core.io.user_text import shown
from core.settings import Settings
from tui.copies import CopyOrigin
from tui.engine_info import CurveInfo, PairInfo
from tui.stats import SHOWN_PHASES, RoundStats, SourceRow, SourceStats
from tui.widgets.plots import CurvePlot, PositionPlot
from tui.widgets.prediction import SpeedupPlot

PHASE_COLOURS = {
    "draft": "orchid",
    "verify": "dodger_blue1",
    "sample": "green3",
    "cache": "gold1",
    "comm": "dark_orange",
    "other": "grey50",
}
BAR = "█"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _num(value: float | None, fmt: str = "{:.3g}") -> str:
    return "-" if value is None else fmt.format(value)


def phase_legend(phases: tuple[str, ...] | None = None) -> Text:
    """The bars' colours by phase; with comm shown (a sharded run) verify and comm are
    labelled as compute and priced (core.events.SHARDED_LABELS)."""
    text = Text()
    shown = phases if phases is not None else RoundStats().phases_shown()
    for p in shown:
        text.append(BAR + BAR + " ", PHASE_COLOURS[p])
        text.append(phase_label(p, "comm" in shown) + "  ")
    return text


def round_bars(stats: RoundStats, count: int, width: int) -> Text:
    """One line per recent round: a bar split by phase, scaled to the slowest shown round."""
    recent = stats.rounds[-count:]
    out = Text(no_wrap=True, overflow="crop")
    if not recent:
        out.append("no rounds yet: send a message", "dim")
        return out
    longest = max(ev.timings.total for ev in recent) or 1.0
    for n, ev in enumerate(recent):
        if n:
            out.append("\n")
        out.append(f"{ev.index:>4} ", "dim")
        cells = max(1, round(width * ev.timings.total / longest))
        if ev.traced:
            used = 0
            parts = [(p, getattr(ev.timings, p)) for p in SHOWN_PHASES]
            for i, (p, secs) in enumerate(parts):
                share = secs / ev.timings.total if ev.timings.total else 0.0
                n_cells = cells - used if i == len(parts) - 1 else round(cells * share)
                n_cells = max(0, min(n_cells, cells - used))
                out.append(BAR * n_cells, PHASE_COLOURS[p])
                used += n_cells
        else:
            out.append("░" * cells, "grey50")
        out.append(" " * (width - cells + 1))
        out.append(f"{ev.timings.total * 1e3:6.1f}ms", "bold")
        out.append(f" R{ev.rows:<2} +{len(ev.tokens)}", "dim")
    return out


class RoundsPanel(VerticalScroll):
    """Per-round stacked phase bars and current / average / peak per phase (asitop style)."""

    BAR_ROUNDS = 12

    def compose(self) -> ComposeResult:
        yield Static(phase_legend(), classes="legend")
        yield Static(id="round-bars")
        yield DataTable(id="phase-table", cursor_type="none", zebra_stripes=True)
        yield Static(id="rounds-note", classes="note")

    def on_mount(self) -> None:
        table = self.query_one("#phase-table", DataTable)
        table.add_columns("phase", "now ms", "avg ms", "peak ms", "share")
        self.show(RoundStats())

    def show(self, stats: RoundStats) -> None:
        # index (5) + bar + " 123.4ms R5  +3" (16) + scrollbar
        width = max(10, self.size.width - 23) if self.size.width else 30
        self.query_one("#round-bars", Static).update(round_bars(stats, self.BAR_ROUNDS, width))
        self.query_one(".legend", Static).update(phase_legend(stats.phases_shown()))
        table = self.query_one("#phase-table", DataTable)
        table.clear()
        shown = stats.phases_shown()
        for p in shown:
            st = stats.phases[p]
            table.add_row(
                Text(phase_label(p, "comm" in shown), PHASE_COLOURS[p]),
                _ms(st.current if st.count else None),
                _ms(st.avg if st.count else None),
                _ms(st.peak if st.count else None),
                _pct(stats.share(p) if st.count else None),
            )
        tot = stats.phases["total"]
        table.add_row(
            Text("round", "bold"),
            _ms(tot.current if tot.count else None),
            _ms(tot.avg if tot.count else None),
            _ms(tot.peak if tot.count else None),
            "100%" if tot.count else "-",
        )
        note = "traced: a barrier per phase splits the time"
        if "comm" in shown:  # a sharded run's: its collectives are priced, not waited for
            note += "; comm (priced): each collective at its size's probed cost"
        if stats.rounds and not stats.traced:
            note = "untraced: only the round total is known"
        if stats.summary is not None:  # the measured guard's decisions (core.cost.guard)
            note = "\n".join([note, *guard_lines(stats.summary.per_source)])
        self.query_one("#rounds-note", Static).update(Text(note, "dim"))


def position_bars(stats: RoundStats, width: int = 24) -> Text:
    """Acceptance per draft position: the later a position, the more it depends on luck."""
    out = Text(no_wrap=True, overflow="crop")
    rates = stats.per_position
    if not rates:
        out.append("no speculative rounds yet", "dim")
        return out
    for i, rate in enumerate(rates):
        if i:
            out.append("\n")
        out.append(f"pos {i + 1:>2} ")
        cells = round(width * (rate or 0.0))
        out.append(BAR * cells, "green3")
        out.append("·" * (width - cells), "grey35")
        out.append(f" {_pct(rate):>4}  n={stats.reached[i]}", "dim")
    return out


SOURCE_STYLES = {"model": "green3", "lookup": "medium_turquoise", "none": "grey70"}


def source_cells(row: SourceRow) -> tuple[Text | str, ...]:
    """One row of the per-source table: proposals per round, hit rate, accepted length, rate."""
    name = "target step" if row.name == "none" else row.name
    return (
        Text(name, SOURCE_STYLES.get(row.name, "bold")),
        str(row.rounds),
        _num(row.drafts_per_round, "{:.1f}"),
        _pct(row.hit_rate),
        _num(row.mean_accepted_length, "{:.2f}"),
        _pct(row.acceptance),
    )


def copy_origin_text(origin: CopyOrigin | None) -> Text:
    """Where the last accepted copied run came from: the message, and a few of its words."""
    if origin is None:
        return Text("no copied tokens accepted yet (d cycles the draft source)", "dim")
    out = Text()
    out.append("last accepted copy ", "dim")
    out.append(f"{origin.length} token{'s' if origin.length != 1 else ''}", "bold")
    out.append(" from ", "dim")
    out.append(origin.where(), "bold")
    out.append(f", token {origin.offset}\n", "dim")
    if origin.before or origin.text:
        out.append("  …" + origin.before.replace("\n", "⏎"), "dim")
        out.append(origin.text.replace("\n", "⏎"), "bold medium_turquoise")
        out.append("…", "dim")
    return out


class AcceptancePanel(VerticalScroll):
    """Acceptance rate, per-position acceptance, mean accepted length, and k over time."""

    def compose(self) -> ComposeResult:
        yield Static(id="acc-summary")
        yield Label("per draft source, this session", classes="section")
        yield DataTable(id="source-table", cursor_type="none", zebra_stripes=True)
        yield Static(id="copy-origin")
        yield Label("acceptance by draft position", classes="section")
        yield Static(id="acc-positions")
        yield PositionPlot(id="acc-plot")
        yield Label("k proposed per round", classes="section")
        yield Sparkline([], id="k-spark")
        yield Label("accepted per round", classes="section")
        yield Sparkline([], id="accepted-spark")

    def on_mount(self) -> None:
        sources = self.query_one("#source-table", DataTable)
        sources.add_columns("source", "rounds", "k/round", "hit rate", "acc len", "accept")
        sources.tooltip = ("k/round: drafts proposed per round it proposed in; hit rate: its "
                           "rounds over the speculative-mode rounds; acc len: drafts kept per "
                           "round; accept: kept over proposed. Target steps: rounds where no "
                           "source had anything to propose.")
        self.set_plots(True)
        self.show(RoundStats())

    def set_plots(self, on: bool) -> None:
        """Acceptance by position as a bar plot, or as numbered bars (the `v` key)."""
        self.query_one("#acc-positions").display = not on
        self.query_one("#acc-plot").display = on

    def show(self, stats: RoundStats, sources: SourceStats | None = None,
             last_copy: CopyOrigin | None = None) -> None:
        """`sources`: the session's per-source counts (default: this run's)."""
        table = self.query_one("#source-table", DataTable)
        table.clear()
        rows = (sources if sources is not None else stats.sources).rows()
        for row in rows:
            table.add_row(*source_cells(row))
        table.display = bool(rows)
        self.query_one("#copy-origin", Static).update(copy_origin_text(last_copy))
        s = stats.summary
        acc = s.acceptance if s is not None and s.acceptance is not None else stats.acceptance
        mal = stats.mean_accepted_length
        if s is not None and s.mean_accepted_length is not None:
            mal = s.mean_accepted_length
        text = Text()
        text.append("acceptance ", "dim")
        text.append(_pct(acc), "bold green3")
        text.append(f"   ({stats.accepted}/{stats.proposed} drafts)\n", "dim")
        text.append("mean accepted length ", "dim")
        text.append(_num(mal, "{:.2f}"), "bold")
        text.append("   tokens/round ", "dim")
        text.append(_num(stats.tokens_per_round, "{:.2f}"), "bold")
        text.append("\nmean TV(π, p) ", "dim")
        text.append(_num(s.mean_tv if s is not None else stats.mean_tv, "{:.3f}"), "bold")
        last = stats.last
        if last is not None:
            text.append(f"   last round k={last.proposed} kept {last.accepted}", "dim")
        self.query_one("#acc-summary", Static).update(text)
        self.query_one("#acc-positions", Static).update(position_bars(stats))
        self.query_one(PositionPlot).show(stats)
        self.query_one("#k-spark", Sparkline).data = [float(k) for k in stats.k_history[-80:]]
        self.query_one("#accepted-spark", Sparkline).data = [
            float(a) for a in stats.accepted_history[-80:]
        ]


def curve_rows(curve: CurveInfo, current_rows: int | None, families: dict[int, str] | None = None,
               width: int = 10) -> list[tuple]:
    """Rows of the calibration table: R, ms, ms/row, kernel, bar; boundaries and current R marked.

    Cost per row is what separates proposal length from kernel choice: it falls where a
    matrix kernel takes over, and stays flat while verification runs row by row.
    """
    rows = sorted(curve.t_verify)
    peak = max(curve.t_verify.values(), default=0.0) or 1.0
    out = []
    for r in rows:
        t = curve.t_verify[r]
        style = "bold reverse" if r == current_rows else ""
        marks = []
        if curve.boundary is not None and r == curve.boundary:
            marks.append("meas")
        if curve.predicted_boundary is not None and r == curve.predicted_boundary:
            marks.append("pred")
        kernel = curve.kernels.get(r) or (families or {}).get(r, "")
        bar = Text(BAR * max(1, round(width * t / peak)), "dodger_blue1")
        out.append(
            (
                Text(str(r), style),
                Text(f"{t * 1e3:.2f}", style),
                Text(f"{t * 1e3 / r:.2f}", style),
                Text(kernel, "dim"),
                bar,
                Text("◀ " + "+".join(marks) if marks else "", "bold dark_orange"),
            )
        )
    return out


class KernelsPanel(VerticalScroll):
    """Rows verified this round, the predicted kernel per weight shape, and the measured curve."""

    def compose(self) -> ComposeResult:
        yield Static(id="kernel-now")
        yield DataTable(id="shape-table", cursor_type="none", zebra_stripes=True)
        yield Label("verify cost vs rows", classes="section")
        yield Static(id="curve-note")
        yield DataTable(id="curve-table", cursor_type="none")
        yield CurvePlot(id="curve-plot")
        yield Label("speedup vs k: predicted (core.cost.prediction) and measured", classes="section")
        yield SpeedupPlot(id="speedup-plot")

    def on_mount(self) -> None:
        self.query_one("#shape-table", DataTable).add_columns("weights", "K x N", "layers",
                                                              "kernel")
        self.query_one("#curve-table", DataTable).add_columns("R", "ms", "ms/row", "kernel",
                                                              "cost", "")
        self.set_plots(True)
        self.show(None, RoundStats(), None)

    def set_plots(self, on: bool) -> None:
        """The curve as a plot, or its numbers as a table (the `v` key)."""
        self.query_one("#curve-table").display = not on
        self.query_one("#curve-plot").display = on
        self.query_one(SpeedupPlot).set_plots(on)

    def show(self, info: PairInfo | None, stats: RoundStats, curve: CurveInfo | None,
             progress: str | None = None) -> None:
        last = stats.last
        rows = last.rows if last is not None else None
        text = Text()
        text.append("rows verified ", "dim")
        text.append(str(rows) if rows is not None else "-", "bold")
        family = ""
        if last is not None and last.kernel:
            family = last.kernel
        elif info is not None and rows is not None:
            family = info.families.get(rows, "")
        text.append("   kernel ", "dim")
        text.append(family or "-", "bold dodger_blue1")
        if info is not None:
            text.append(f"   {info.backend}", "dim")
            pb = info.predicted_boundary
            text.append("\n◀ pred: ", "dim")
            text.append(f"matrix kernels from R={pb}" if pb else "no kernel switch by rows "
                        "on this backend", "bold" if pb else "dim")
        self.query_one("#kernel-now", Static).update(text)
        table = self.query_one("#shape-table", DataTable)
        table.clear()
        if info is not None and rows is not None:
            for sk in info.kernels.get(rows, ()):
                table.add_row(Text(sk.name), Text(sk.shape), str(sk.count), Text(sk.kernel))
        curve_table = self.query_one("#curve-table", DataTable)
        curve_table.clear()
        self.query_one(CurvePlot).show(curve, rows)
        self.query_one(SpeedupPlot).show(curve, stats)
        note = self.query_one("#curve-note", Static)
        if progress is not None:
            note.update(Text(f"calibrating: {progress}", "yellow"))
        if curve is None:
            if progress is None:
                note.update(Text("not measured yet: press c (alt+c) to calibrate", "dim"))
            return
        if progress is None:
            measured = (f"◀ meas: cost per row drops from R={curve.boundary}" if curve.boundary
                        else "no measured boundary (cost per row never drops)")
            draft = (f"   draft step {curve.draft_step_s * 1e3:.1f} ms"
                     if curve.draft_step_s else "")
            kept = (f"   kept from {curve.kept_at} (c: measure again)"
                    if getattr(curve, "kept_at", None) else "")
            note.update(Text(measured + draft + kept, "dim"))
        families = info.families if info is not None else None
        for row in curve_rows(curve, rows, families):
            curve_table.add_row(*row)


SETTING_KEYS = ("mode", "rule", "tv_budget", "k", "policy", "k_min", "k_max", "temperature",
                "top_p", "repetition_penalty", "seed", "max_tokens", "traced", "bonus",
                "dispatch", "verify_attention", "draft_source", "lookup_min_match")


@dataclasses.dataclass
class RunRecord:
    """A finished run as the Profile panel compares it."""

    label: str
    settings: Settings
    summary: RunSummary
    text: str = ""
    quality: float | None = None  # mean TV(pi, p) realised; lower is closer to the target


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
            total = sum(r.summary.phase_s.values())
            if not r.summary.traced or not total:
                return "-"
            return f"{r.summary.phase_s.get(p, 0.0) / total:.0%}"

        return get

    spec: list[tuple[str, Any]] = [
        ("settings", lambda r: f"{r.settings.mode[:4]} {r.settings.rule[:4]} "
                               f"TV{r.settings.tv_budget:g} k{r.settings.k}"),
        ("E2E s", lambda r: f"{r.summary.e2e_s:.2f}"),
        ("tokens", lambda r: str(r.summary.tokens)),
        ("decode tok/s", lambda r: f"{r.summary.decode_tok_s:.1f}" if r.summary.decode_tok_s
                                   else "-"),
        ("TTFT s", lambda r: f"{r.summary.ttft_s:.2f}"),
        ("acceptance", lambda r: _pct(r.summary.acceptance)),
        ("mean acc len", lambda r: _num(r.summary.mean_accepted_length, "{:.2f}")),
        *((f"{p} share", phase_share(p)) for p in ("draft", "verify", "sample", "cache")),
        ("mean TV (quality)", lambda r: _num(r.summary.mean_tv, "{:.3f}")),
    ]
    return [(name, col(a, f), col(b, f)) for name, f in spec]


def models_text(info: PairInfo | None) -> Text:
    """The loaded models in full (core/models/identify.py) and the code that runs them."""
    from core.identity import describe_models
    from core.runtime.version import version_text

    if info is None:
        return Text("models: none loaded", "dim")
    text = Text()
    if info.models is None:  # a session that cannot say (identities unknown): the specs alone
        described = {"target": f"{info.target_spec} (identity unknown)",
                     "draft": f"{info.draft_spec or 'none'} (identity unknown)"}  # fmt: skip
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

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "open-compare":
            event.stop()
            self.app.action_compare_runs()  # type: ignore[attr-defined]

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
                          "predicted", "efficiency")  # fmt: skip
        for r in results:
            median = getattr(r, "median_e2e_s", None)
            speed = getattr(r, "speedup_vs_target", None)
            table.add_row(
                Text(str(getattr(r, "name", "?"))),
                _pct(getattr(r, "acceptance", None)),
                _num(median, "{:.2f}"),
                _num(speed, "{:.2f}x"),
                _num(getattr(r, "mean_tv", None), "{:.3f}"),
                # core.cost.prediction's speedup for this row, and measured (decode) over it
                _num(getattr(r, "predicted_speedup", None), "{:.2f}x"),
                _num(getattr(r, "efficiency", None), "{:.2f}"),
            )
