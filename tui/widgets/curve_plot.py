"""The Kernels panel's plot: verify cost against rows, the kernel boundary as a vertical line,
this round's rows marked (drawn on tui/widgets/plot_base.py)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual_plot import HiResMode

from tui.engine_info import CurveInfo
from tui.widgets.plot_base import (
    CURRENT_STYLE,
    CURVE_STYLE,
    MEASURED_STYLE,
    PREDICTED_STYLE,
    TABLE_HINT,
    PlotPanel,
    data_ticks,
)


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
        plot.set_xticks(data_ticks(list(series.rows)))
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
                         marker_style=CURRENT_STYLE)
        caption.update(curve_caption(series))
