"""What every side panel shares: the phase colours, the bar glyph and its number cells.

One place so the Rounds panel, the compare screen and the rest colour a phase and write a
missing number ("-") alike: the cells are core.bench.fmt's `num` (the one "-" rule, shared with
the bench's reports) in the panels' two formats.
"""

from __future__ import annotations

from core.bench.fmt import num

PHASE_COLOURS = {
    "draft": "orchid",
    "verify": "dodger_blue1",
    "sample": "green3",
    "cache": "gold1",
    "comm": "dark_orange",
    "other": "grey50",
}
BAR = "█"


def fmt_ms(value: float | None) -> str:
    """Seconds already in milliseconds, one decimal; "-" when unknown."""
    return num(value, ".1f")


def fmt_pct(value: float | None) -> str:
    """A fraction as a whole percentage; "-" when unknown."""
    return num(value, ".0%")

