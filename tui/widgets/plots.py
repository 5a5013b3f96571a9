"""The side panels' plots, importable from one place: one widget a file in
tui/widgets/curve_plot.py (Kernels), position_plot.py (Acceptance), and their shared base in
plot_base.py.

Drawn with textual-plot's PlotWidget (a native Textual widget on a high-resolution canvas, so
it follows the app's theme and snapshots like any other widget). The panels keep their tables:
the `v` key switches each panel between its plot and its numbers.
"""

from __future__ import annotations

from tui.widgets.curve_plot import CurvePlot, CurveSeries, curve_caption, curve_series
from tui.widgets.plot_base import PlotPanel, StaticPlot
from tui.widgets.position_plot import PositionPlot, PositionSeries, position_series

__all__ = ["CurvePlot", "CurveSeries", "PlotPanel", "PositionPlot", "PositionSeries",
           "StaticPlot", "curve_caption", "curve_series", "position_series"]
