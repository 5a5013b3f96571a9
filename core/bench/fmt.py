"""Number formats shared by the benchmark's renderings and its short summaries.

Below both core.bench.results and core.bench.report, so each imports only downwards."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def pct(x: float | None) -> str:
    """A rate as a percentage; "-" where there is none (a row that does not speculate)."""
    return "-" if x is None else f"{x * 100:.1f}%"


def secs(x: float | None) -> str:
    """Seconds to the millisecond; "-" where unmeasured."""
    return "-" if x is None else f"{x:.3f} s"


def ratio(x: float | None) -> str:
    """A speed ratio such as 1.85x; "-" where either side is missing."""
    return "-" if x is None else f"{x:.2f}x"


def num(x: float | None, fmt: str = ".3f") -> str:
    """Any number in `fmt`; "-" for None, so a table cell is never empty."""
    return "-" if x is None else format(x, fmt)


def md_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A markdown table's lines: the header, its rule (one cell a column) and a line a row."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    return [line(columns), "|---" * len(columns) + "|", *(line(cells) for cells in rows)]
