"""A sweep cell's texts beside target-only's, seed by seed: what its TV budget changed, read.

Why one scroll for both columns: each prompt and seed is one row holding target-only's text
and the cell's, so the two scroll together and a passage's texts always face each other.
Below the app's narrow width (tui/keys.py NARROW: 80 columns cannot hold two readable
texts) one column shows at a time and ←/→ (or `c`) switches, keeping the passage in view.
The passages, the divergence and the numbers are core/sweep/reading.py's, the colours the
chat's (core/chat/palette.py), so the app and the HTML page say the same.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from core.chat.palette import ORIGIN_STYLES
from core.sweep.reading import Column, Passage, chosen_cells, passages
from tui.keys import NARROW

MARK_STYLE = "bold black on yellow"


def column_text(col: Column) -> Text:
    """A column as rich text: its header lines, then each token in its origin's colour with
    ▶N where it first leaves target-only's text."""
    out = Text()
    out.append(col.name, "bold")
    if col.roles:
        out.append("  " + " · ".join(col.roles), "yellow")
    out.append("\n")
    where = col.divergence_text()
    if col.check is not None:
        where += " · check " + ("passed" if col.check else "failed")
    if col.other_texts:
        where += f" · {col.other_texts} other text(s) in later invocations"
    out.append(where + "\n\n", "dim")
    for i, (piece, origin) in enumerate(col.tokens):
        if col.diverge == i:
            out.append(f"▶{col.diverge_at}", MARK_STYLE)
        out.append(piece, ORIGIN_STYLES.get(origin, ""))
    if col.diverge is not None and col.diverge >= len(col.tokens):
        out.append(f"▶{col.diverge_at}", MARK_STYLE)
    return out


class ReadingScreen(Screen[None]):
    """One sweep cell's texts beside target-only's for the same seeds."""

    BINDINGS = [
        Binding("escape,q", "close", "back", key_display="esc"),
        # priority: the focused scroll would take ←/→ first
        Binding("left", "show_column(0)", "target-only", key_display="←", priority=True),
        Binding("right", "show_column(1)", "this cell", key_display="→", priority=True),
        Binding("c", "switch_column", "switch column", show=False),
    ]
    DEFAULT_CSS = """
    ReadingScreen { layout: vertical; }
    #reading-title { height: auto; padding: 0 1; background: $boost; text-style: bold; }
    #reading-note { height: auto; padding: 0 1; color: $text-muted; }
    #reading-texts { height: 1fr; }
    .passage-head { height: auto; padding: 0 1; margin-top: 1; background: $panel;
                    text-style: bold; }
    .passage { height: auto; }
    .passage .col { width: 1fr; height: auto; padding: 0 1; }
    .passage .col-0 { border-right: vkey $panel-lighten-2; }
    ReadingScreen.narrow .passage .col-0 { border-right: none; }
    """

    def __init__(self, data: dict[str, Any], cell_id: str) -> None:
        super().__init__()
        self.cell_id = cell_id
        self.passages: list[Passage] = passages(data, [cell_id])
        temperature = self.passages[0].temperature if self.passages else None
        # why a reader might come here: the cell is the recommended, the fastest, a TV step
        self.roles = next((r for c, r in chosen_cells(data, temperature) if c["id"] == cell_id),
                          []) if temperature is not None else []
        self.shown = 1  # the column shown when one fits: the cell's, what the reader came for
        self.narrow = False

    def compose(self) -> ComposeResult:
        title = f"texts: {self.cell_id} beside target-only, the same seeds"
        if self.roles:
            title += f" ({' · '.join(self.roles)})"
        yield Static(Text(title), id="reading-title")
        note = "▶N: where the text first leaves target-only's (token N); colours as in the chat"
        yield Static(Text(note), id="reading-note")
        with VerticalScroll(id="reading-texts"):
            for i, p in enumerate(self.passages):
                head = f"{p.prompt} · T = {p.temperature:g} · seed {p.seed}"
                numbers = p.columns[1].numbers if len(p.columns) > 1 else []
                head += "  " + " · ".join(numbers) if numbers else ""
                yield Static(Text(head), classes="passage-head", id=f"head-{i}")
                with Horizontal(classes="passage"):
                    for j, col in enumerate(p.columns):
                        yield Static(column_text(col), classes=f"col col-{j}")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#reading-texts", VerticalScroll).focus()
        self._layout(self.size.width)

    def on_resize(self, event: Any) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        """Side by side from NARROW columns up; below, only column `shown`."""
        self.narrow = width < NARROW
        self.set_class(self.narrow, "narrow")
        for j in (0, 1):
            for w in self.query(f".col-{j}"):
                w.display = not self.narrow or j == self.shown

    def _top_passage(self) -> int:
        """The passage whose header is at or above the top of the scroll (to keep in view)."""
        scroll = self.query_one("#reading-texts", VerticalScroll)
        top = scroll.scroll_offset.y
        best = 0
        for i in range(len(self.passages)):
            head = self.query_one(f"#head-{i}", Static)
            if head.virtual_region.y <= top:
                best = i
        return best

    def action_show_column(self, which: int) -> None:
        if which == self.shown:
            return
        keep = self._top_passage() if self.narrow else None
        self.shown = which
        self._layout(self.size.width)
        if keep is not None and self.passages:
            head = self.query_one(f"#head-{keep}", Static)
            self.call_after_refresh(lambda: head.scroll_visible(top=True, animate=False))

    def action_switch_column(self) -> None:
        self.action_show_column(1 - self.shown)

    def action_close(self) -> None:
        self.dismiss(None)
