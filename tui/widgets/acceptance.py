"""The Acceptance panel: what the target accepted, per draft source and per draft position.

It redraws from ready numbers (RoundStats, SourceStats) in one call, so the app can refresh
only the visible panel once per flush of rounds.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Label, Sparkline, Static

from core.bench.fmt import num
from tui.copies import CopyOrigin
from tui.stats import RoundStats, SourceRow, SourceStats
from tui.widgets.cells import BAR, fmt_pct
from tui.widgets.position_plot import PositionPlot


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
        out.append(f" {fmt_pct(rate):>4}  n={stats.reached[i]}", "dim")
    return out


SOURCE_STYLES = {"model": "green3", "lookup": "medium_turquoise", "tree": "cyan", "none": "grey70"}


def source_cells(row: SourceRow) -> tuple[Text | str, ...]:
    """One row of the per-source table: proposals per round, hit rate, accepted length, rate."""
    name = "target step" if row.name == "none" else row.name
    return (
        Text(name, SOURCE_STYLES.get(row.name, "bold")),
        str(row.rounds),
        num(row.drafts_per_round, ".1f"),
        fmt_pct(row.hit_rate),
        num(row.mean_accepted_length, ".2f"),
        fmt_pct(row.acceptance),
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
        text.append(fmt_pct(acc), "bold green3")
        text.append(f"   ({stats.accepted}/{stats.proposed} drafts)\n", "dim")
        text.append("mean accepted length ", "dim")
        text.append(num(mal, ".2f"), "bold")
        text.append("   tokens/round ", "dim")
        text.append(num(stats.tokens_per_round, ".2f"), "bold")
        text.append("\nmean TV(π, p) ", "dim")
        text.append(num(s.mean_tv if s is not None else stats.mean_tv, ".3f"), "bold")
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
