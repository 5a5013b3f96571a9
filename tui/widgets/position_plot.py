"""The Acceptance panel's plot: acceptance per draft position as bars on a 0-1 scale, with how
many rounds reached each position (drawn on tui/widgets/plot_base.py)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual_plot import HiResMode

from tui.stats import RoundStats
from tui.widgets.plot_base import ACCEPT_STYLE, TABLE_HINT, PlotPanel


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
                 hires_mode=HiResMode.HALFBLOCK)
        caption.update(Text(
            "rounds reaching each position: "
            + "  ".join(f"{p}:{n}" for p, n in zip(series.positions, series.reached, strict=True))
            + "\n",
            no_wrap=True, overflow="ellipsis",
        ).append(TABLE_HINT, "dim"))
