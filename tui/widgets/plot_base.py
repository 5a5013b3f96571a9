"""What the side panels' plots share: a PlotWidget that never takes focus, a panel that redraws
only on a change, their styles and ticks (tui/widgets/curve_plot.py, position_plot.py,
prediction.py draw on it).

Drawn with textual-plot's PlotWidget (a native Textual widget on a high-resolution canvas, so
it follows the app's theme and snapshots like any other widget). The panels keep their tables:
the `v` key switches each panel between its plot and its numbers.

Each plot redraws only when what it shows changed, since the panels repaint once per batch of
rounds while a run streams.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from textual_plot import PlotWidget

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


def data_ticks(values: list[int], most: int = 8) -> list[float]:
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
