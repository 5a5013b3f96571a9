"""Plots for the side panels: the verify-cost curve (Kernels) and acceptance by position.

Drawn with textual-plot's PlotWidget (a native Textual widget on a high-resolution canvas, so
it follows the app's theme and snapshots like any other widget). The panels keep their tables:
the `v` key switches each panel between its plot and its numbers.

Each plot redraws only when what it shows changed, since the panels repaint once per batch of
rounds while a run streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual_plot import HiResMode, PlotWidget

from tui.engine_info import CurveInfo
from tui.stats import RoundStats

CURVE_STYLE = "dodger_blue1"
MEASURED_STYLE = "dark_orange"
PREDICTED_STYLE = "grey62"
CURRENT_STYLE = "bold yellow1"
ACCEPT_STYLE = "green3"
TABLE_HINT = "v (alt+v): the numbers instead of the plot"


class StaticPlot(PlotWidget, can_focus=False):
    """A PlotWidget that never takes focus (its + - r and arrow keys are the app's) and neither
    pans nor zooms: the panels show whole, small data sets."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, allow_pan_and_zoom=False)


def _ticks(values: list[int], most: int = 8) -> list[float]:
    """Integer ticks at the data, thinned to at most `most` so their labels never collide."""
    if not values:
        return []
    step = max(1, -(-len(values) // most))
    picked = values[::step]
    if picked[-1] != values[-1] and len(picked) < most:
        picked.append(values[-1])
    return [float(v) for v in picked]


S = TypeVar("S")


class PlotPanel(Vertical, Generic[S]):
    """A plot over its caption that redraws only when its series changed (the module says why)."""

    DEFAULT_CSS = """
    PlotPanel { height: auto; }
    PlotPanel .plot-caption { height: auto; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.series: S | None = None

    def compose(self) -> ComposeResult:
        yield StaticPlot(classes="plot")
        yield Static(classes="plot-caption")

    def _redraw(
        self, series: S | None, drawable: bool, empty: str
    ) -> tuple[StaticPlot, Static] | None:
        """The cleared plot and its caption for `series`; None when the series did not change or
        is not `drawable` (then the plot hides and the caption says `empty`)."""
        if series == self.series:
            return None
        self.series = series
        plot = self.query_one(StaticPlot)
        plot.clear()
        caption = self.query_one(".plot-caption", Static)
        plot.display = drawable
        if not drawable:
            caption.update(Text(empty, "dim"))
            return None
        return plot, caption


# --------------------------------------------------------------------------- verify cost curve


@dataclass(frozen=True)
class CurveSeries:
    """What the curve plot draws: verify ms per row count, the boundaries, this round's rows."""

    rows: tuple[int, ...]
    ms: tuple[float, ...]
    boundary: int | None  # measured: where cost per row drops
    predicted_boundary: int | None
    current: int | None  # this round's rows, when the curve measured them
    current_ms: float | None
    unmeasured_current: int | None = None  # this round's rows, when the curve did not


def curve_series(curve: CurveInfo, current_rows: int | None) -> CurveSeries:
    rows = tuple(sorted(curve.t_verify))
    ms = tuple(curve.t_verify[r] * 1e3 for r in rows)
    measured = current_rows is not None and current_rows in curve.t_verify
    return CurveSeries(
        rows=rows,
        ms=ms,
        boundary=curve.boundary,
        predicted_boundary=curve.predicted_boundary,
        current=current_rows if measured else None,
        current_ms=curve.t_verify[current_rows] * 1e3 if measured else None,  # type: ignore[index]
        unmeasured_current=None if measured else current_rows,
    )


def curve_caption(series: CurveSeries) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("⠒⠒ ", CURVE_STYLE)
    text.append("verify  ")
    if series.boundary is not None:
        text.append("│ ", MEASURED_STYLE)
        text.append(f"meas R={series.boundary}  ")
    if series.predicted_boundary is not None and series.predicted_boundary != series.boundary:
        text.append("│ ", PREDICTED_STYLE)
        text.append(f"pred R={series.predicted_boundary}  ")
    elif series.predicted_boundary is not None:
        text.append("(pred too)  ", "dim")
    if series.current is not None:
        text.append("◆ ", CURRENT_STYLE)
        ms = series.current_ms
        text.append(f"this round R={series.current} "
                    + (f"{ms:.0f}" if ms is not None and ms >= 100 else f"{ms:.3g}") + " ms")
    elif series.unmeasured_current is not None:
        text.append(f"this round R={series.unmeasured_current}: not measured", "dim")
    text.append("\n" + TABLE_HINT, "dim")
    return text


class CurvePlot(PlotPanel[CurveSeries]):
    """Verify cost against rows, the kernel boundary as a vertical line, this round marked."""

    DEFAULT_CSS = "CurvePlot StaticPlot { height: 14; }"

    def show(self, curve: CurveInfo | None, current_rows: int | None) -> None:
        series = curve_series(curve, current_rows) if curve is not None else None
        drawn = self._redraw(series, series is not None and bool(series.rows), "no curve yet")
        if drawn is None or series is None:
            return
        plot, caption = drawn
        plot.set_xlabel("rows verified R")
        plot.set_ylabel("ms")
        plot.set_xticks(_ticks(list(series.rows)))
        # Half a row of room each side and a tenth on top: points on the frame would hide.
        plot.set_xlimits(series.rows[0] - 0.5, series.rows[-1] + 0.5)
        plot.set_ylimits(0.0, max(series.ms) * 1.1 or 1.0)
        plot.plot(series.rows, series.ms, line_style=CURVE_STYLE, hires_mode=HiResMode.BRAILLE)
        if series.boundary is not None:
            plot.add_v_line(series.boundary, MEASURED_STYLE)
        pred = series.predicted_boundary
        if pred is not None and pred != series.boundary:
            plot.add_v_line(pred, PREDICTED_STYLE)
        if series.current is not None and series.current_ms is not None:
            plot.scatter([series.current], [series.current_ms], marker="◆",
                         marker_style=CURRENT_STYLE)  # fmt: skip
        caption.update(curve_caption(series))


# --------------------------------------------------------------------------- acceptance by position


@dataclass(frozen=True)
class PositionSeries:
    """Acceptance per draft position (1-based) and how many rounds reached each position."""

    positions: tuple[int, ...]
    rates: tuple[float, ...]
    reached: tuple[int, ...]


def position_series(stats: RoundStats) -> PositionSeries:
    rates = list(stats.per_position)
    reached = list(stats.reached[: len(rates)])
    reached += [0] * (len(rates) - len(reached))
    return PositionSeries(
        positions=tuple(range(1, len(rates) + 1)),
        rates=tuple(float(r or 0.0) for r in rates),
        reached=tuple(reached),
    )


class PositionPlot(PlotPanel[PositionSeries]):
    """Acceptance per draft position as bars on a 0-1 scale."""

    DEFAULT_CSS = "PositionPlot StaticPlot { height: 12; }"

    def show(self, stats: RoundStats) -> None:
        series = position_series(stats)
        drawn = self._redraw(series, bool(series.positions), "no speculative rounds yet")
        if drawn is None:
            return
        plot, caption = drawn
        plot.set_xlabel("draft position")
        plot.set_ylabel("accepted")
        plot.set_xticks([float(p) for p in series.positions])
        plot.set_yticks([0.0, 0.5, 1.0])
        plot.set_xlimits(0.4, len(series.positions) + 0.6)
        plot.set_ylimits(0.0, 1.0)
        plot.bar(series.positions, series.rates, width=0.6, bar_style=ACCEPT_STYLE,
                 hires_mode=HiResMode.HALFBLOCK)  # fmt: skip
        caption.update(Text(
            "rounds reaching each position: "
            + "  ".join(f"{p}:{n}" for p, n in zip(series.positions, series.reached, strict=True))
            + "\n",
            no_wrap=True, overflow="ellipsis",
        ).append(TABLE_HINT, "dim"))  # fmt: skip
