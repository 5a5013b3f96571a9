"""The Kernels panel: which kernel each weight shape ran for the rows verified, and the curve.

It redraws from ready numbers (PairInfo, RoundStats, CurveInfo) in one call, so the app can
refresh only the visible panel once per flush of rounds.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Label, Static

from tui.engine_info import CurveInfo, PairInfo
from tui.stats import RoundStats
from tui.widgets.cells import BAR
from tui.widgets.curve_plot import CurvePlot
from tui.widgets.prediction import SpeedupPlot


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


def step_text(stats: RoundStats) -> Text:
    """The last run's forward (eager or compiled, core/primitives/compiled.py), the graphs its
    compiled forwards traced, and why a model ran eager under the compiled step."""
    summary = stats.summary
    text = Text("\nstep ", "dim")
    if summary is None:
        text.append("-", "bold")
        return text
    text.append(summary.step, "bold")
    text.append(f"   {summary.graphs} graphs compiled", "dim")
    for role, why in sorted(summary.eager_because.items()):
        text.append(f"\n{role} runs eager: {why}", "yellow")
    return text


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
        text.append_text(step_text(stats))
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
