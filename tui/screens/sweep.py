"""The last sweep's frontier as a view: every cell of `specdec-tui sweep`, its Pareto front
marked, enter to read a row's texts beside target-only's (tui/screens/reading.py), and keys
that apply the recommended setting (`a`) or the one under the cursor (`s`).

Why read the JSON and not run anything: a sweep takes minutes to hours (on a GPU machine, say),
the app only shows what it found and takes its answer; the numbers are the sweep's own
(core.sweep.report formats them the same way for the terminal and the Markdown).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from core.bench.fmt import pct
from core.sweep.report import recommendation_lines, recommended_ids

FRONT_STYLE = "bold green"


def _num(v: Any, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def cell_row(c: dict[str, Any], rec: set[str], untrusted: set[str] | None = None
             ) -> tuple[Text, ...]:
    """One table row: mark (R recommended, * on the front), T, cell, speed, range, acceptance,
    NLL given up ("!" where the cell copies more than target-only: core/sweep/frontier.py
    `nll_untrusted`), TV per token, copied from the prompt, repeated 4-grams, task; a front
    cell in bold green."""
    style = FRONT_STYLE if c.get("on_front") else ""
    mark = ("R" if c["id"] in rec else "") + ("*" if c.get("on_front") else "")
    lo, hi = c.get("speedup_min"), c.get("speedup_max")
    nll = _num(c.get("nll_delta"), "+.3f") + (" !" if c["id"] in (untrusted or set()) else "")
    cols = (mark, f"{c.get('temperature', 0):g}", str(c.get("name", c["id"])),
            _num(c.get("speedup"), ".2f") + ("x" if c.get("speedup") is not None else ""),
            f"{_num(lo, '.2f')}-{_num(hi, '.2f')}", pct(c.get("acceptance")), nll,
            _num(c.get("tv_per_token"), ".3f"), pct(c.get("copied")), pct(c.get("repetition")),
            pct(c.get("task_success")))
    return tuple(Text(x, style=style) for x in cols)


NARROW = 100  # below it the table drops the speed range and cuts long cell names: at 80
NAME_CUT = 24  # columns the task column was off the screen


def narrow_row(c: dict[str, Any], rec: set[str], temperatures: int,
               untrusted: set[str] | None = None) -> tuple[Text, ...]:
    """cell_row for a narrow screen: no min-max, acceptance, TV or repetition columns (the
    reading view and the wide table have them), T in the name only when the sweep ran more
    than one, a long name cut at NAME_CUT."""
    mark, t, name, speed, _, _, nll, _, copied, _, task = cell_row(c, rec, untrusted)
    text = f"T={t.plain} {name.plain}" if temperatures > 1 else name.plain
    if len(text) > NAME_CUT:
        text = text[: NAME_CUT - 1] + "…"
    return (mark, Text(text, style=name.style), speed, nll, copied, task)


class SweepScreen(Screen[None]):
    """The cells of one sweep; enter reads the row's texts, `s` applies the row under the
    cursor, `a` the recommendation."""

    BINDINGS = [
        Binding("escape,q", "close", "back", key_display="esc"),
        Binding("enter", "read_selected", "read its texts"),
        Binding("a", "apply_recommended", "apply recommended"),
        Binding("s", "apply_selected", "apply this row"),
    ]
    DEFAULT_CSS = """
    SweepScreen { layout: vertical; }
    #sweep-title { height: auto; padding: 0 1; background: $boost; text-style: bold; }
    #sweep-note { height: auto; padding: 0 1; }
    #sweep-cells { height: 1fr; }
    #sweep-why { height: auto; padding: 0 1; color: $warning; }
    """

    def __init__(self, data: dict[str, Any], apply: Callable[[dict[str, Any]], bool],
                 source: str = "") -> None:
        super().__init__()
        self.data = data
        self._apply = apply
        self._source = source
        self.cells: list[dict[str, Any]] = [c for c in data.get("cells", [])
                                            if isinstance(c, dict) and "id" in c]
        self.recommended = recommended_ids(data)
        groups = (data.get("frontier") or {}).get("groups") or {}
        groups = groups.values() if isinstance(groups, dict) else ()
        self.untrusted = {str(i) for g in groups if isinstance(g, dict)
                          for i in g.get("nll_untrusted") or []}
        self.excluded = {str(k): str(v) for g in groups if isinstance(g, dict)
                         for k, v in (g.get("excluded") or {}).items()}
        self.narrow = False  # below NARROW columns: the short table (narrow_row)

    def compose(self) -> ComposeResult:
        models = (self.data.get("models") or {})
        title = f"sweep: speed against NLL given up, {models.get('target', '?')}"
        if not self.data.get("complete"):
            title += f" (partial: {self.data.get('blocks_done')} of "
            title += f"{self.data.get('blocks_planned')} blocks)"
        yield Static(Text(title), id="sweep-title")
        lines = recommendation_lines(self.data)
        note = "\n".join(lines) + "\nR recommended, * on the Pareto front (bold green)"
        if self._source:
            note += f"; from {self._source}"
        yield Static(Text(note), id="sweep-note")
        yield DataTable(id="sweep-cells", cursor_type="row", zebra_stripes=True)
        yield Static("", id="sweep-why")
        yield Footer()

    def on_mount(self) -> None:
        self._fill(self.app.size.width < NARROW)

    def on_resize(self, event: Any) -> None:
        if (event.size.width < NARROW) != self.narrow:
            self._fill(event.size.width < NARROW)

    def _fill(self, narrow: bool) -> None:
        """The table's columns and rows, short ones below NARROW columns."""
        self.narrow = narrow
        table = self.query_one("#sweep-cells", DataTable)
        table.clear(columns=True)
        temperatures = len({c.get("temperature") for c in self.cells})
        if narrow:
            table.add_columns("", "cell", "speed", "NLL+", "copied", "task")
        else:
            table.add_columns("", "T", "cell", "speedup", "min-max", "acceptance",
                              "NLL given up", "TV/token", "copied", "repeated", "task")
        for c in self.cells:
            row = (narrow_row(c, self.recommended, temperatures, self.untrusted) if narrow
                   else cell_row(c, self.recommended, self.untrusted))
            table.add_row(*row, key=c["id"])
        first = next((i for i, c in enumerate(self.cells) if c["id"] in self.recommended), 0)
        if self.cells:
            table.move_cursor(row=first)
        table.focus()

    def _take(self, cell: dict[str, Any] | None) -> None:
        if cell is None:
            self.notify("This sweep recommends nothing within its bounds.", severity="warning")
            return
        settings = cell.get("apply")
        if not isinstance(settings, dict):
            self.notify(f"{cell['id']} names no settings to apply.", severity="error")
            return
        if self._apply(settings):
            self.notify(f"applied {cell['id']}", title="sweep", timeout=2)
            self.dismiss(None)

    def action_apply_recommended(self) -> None:
        rec = [c for c in self.cells if c["id"] in self.recommended]
        self._take(rec[0] if rec else None)

    def action_apply_selected(self) -> None:
        table = self.query_one("#sweep-cells", DataTable)
        if self.cells:
            self._take(self.cells[table.cursor_row])

    def action_read_selected(self) -> None:
        """The row's texts beside target-only's for the same seeds (a sentence when the sweep
        kept none for it)."""
        from tui.screens.reading import ReadingScreen

        table = self.query_one("#sweep-cells", DataTable)
        if not self.cells:
            return
        cell = self.cells[table.cursor_row]
        screen = ReadingScreen(self.data, cell["id"])
        if not screen.passages:
            self.notify(f"This sweep kept no texts for {cell['id']}.", severity="warning")
            return
        self.app.push_screen(screen)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """Under the table, why the recommendation passed the row over ("copies the prompt:
        91% against 12%"), so the fastest cell's exclusion is read where it is chosen."""
        cid = str(event.row_key.value) if event.row_key is not None else ""
        why = self.excluded.get(cid)
        self.query_one("#sweep-why", Static).update(
            Text(f"{cid}: not recommended: {why}" if why else ""))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # enter (and a click) on a row: the table's own select, read the texts
        self.action_read_selected()

    def action_close(self) -> None:
        self.dismiss(None)
