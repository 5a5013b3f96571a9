"""The Rounds panel: where a round's time goes, per round and per phase.

It redraws from ready numbers (RoundStats) in one call, so the app can refresh only the
visible panel once per flush of rounds.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from core.cost.guard import guard_lines
from core.events import phase_label, time_accounting
from tui.stats import SHOWN_PHASES, RoundStats
from tui.widgets.cells import BAR, PHASE_COLOURS, fmt_ms, fmt_pct


def phase_legend(phases: tuple[str, ...] | None = None) -> Text:
    """The bars' colours by phase; with comm shown (a sharded run) verify and comm are
    labelled as compute and priced (core.events.SHARDED_LABELS)."""
    text = Text()
    shown = phases if phases is not None else RoundStats().phases_shown()
    for p in shown:
        text.append(BAR + BAR + " ", PHASE_COLOURS[p])
        text.append(phase_label(p, "comm" in shown) + "  ")
    return text


def round_bars(stats: RoundStats, count: int, width: int) -> Text:
    """One line per recent round: a bar split by phase, scaled to the slowest shown round;
    a tree round adds its nodes and the depth of the path the target accepted (T12 d4)."""
    recent = stats.rounds[-count:]
    out = Text(no_wrap=True, overflow="crop")
    if not recent:
        out.append("no rounds yet: send a message", "dim")
        return out
    longest = max(ev.timings.total for ev in recent) or 1.0
    trees = any(ev.nodes for ev in recent)
    if trees:  # room for " T64 d12": the tree's nodes and the accepted path's depth
        width = max(5, width - 8)
    for n, ev in enumerate(recent):
        if n:
            out.append("\n")
        out.append(f"{ev.index:>4} ", "dim")
        cells = max(1, round(width * ev.timings.total / longest))
        if ev.traced:
            used = 0
            parts = [(p, getattr(ev.timings, p)) for p in SHOWN_PHASES]
            for i, (p, secs) in enumerate(parts):
                share = secs / ev.timings.total if ev.timings.total else 0.0
                n_cells = cells - used if i == len(parts) - 1 else round(cells * share)
                n_cells = max(0, min(n_cells, cells - used))
                out.append(BAR * n_cells, PHASE_COLOURS[p])
                used += n_cells
        else:
            out.append("░" * cells, "grey50")
        out.append(" " * (width - cells + 1))
        out.append(f"{ev.timings.total * 1e3:6.1f}ms", "bold")
        out.append(f" R{ev.rows:<2} +{len(ev.tokens)}", "dim")
        if ev.nodes:
            out.append(f" T{ev.nodes} d{ev.accepted}", "cyan")
    return out


def accounting_line(stats: RoundStats) -> str:
    """The run's E2E in parts that add up to it, the time between rounds named
    (core.events.time_accounting)."""
    assert stats.summary is not None
    parts = time_accounting(stats.summary, stats.rounds)
    return (f"E2E {stats.summary.e2e_s:.2f} s = " + " + ".join(
        f"{name} {seconds:.2f} s" for name, seconds in parts.items())
        + " (host work, the UI, GC)")


class RoundsPanel(VerticalScroll):
    """Per-round stacked phase bars and current / average / peak per phase (asitop style)."""

    BAR_ROUNDS = 12

    def compose(self) -> ComposeResult:
        yield Static(phase_legend(), classes="legend")
        yield Static(id="round-bars")
        yield DataTable(id="phase-table", cursor_type="none", zebra_stripes=True)
        yield Static(id="rounds-note", classes="note")

    def on_mount(self) -> None:
        table = self.query_one("#phase-table", DataTable)
        table.add_columns("phase", "now ms", "avg ms", "peak ms", "share")
        self.show(RoundStats())

    def show(self, stats: RoundStats) -> None:
        # index (5) + bar + " 123.4ms R5  +3" (16) + scrollbar
        width = max(10, self.size.width - 23) if self.size.width else 30
        self.query_one("#round-bars", Static).update(round_bars(stats, self.BAR_ROUNDS, width))
        self.query_one(".legend", Static).update(phase_legend(stats.phases_shown()))
        table = self.query_one("#phase-table", DataTable)
        table.clear()
        shown = stats.phases_shown()
        for p in shown:
            st = stats.phases[p]
            table.add_row(
                Text(phase_label(p, "comm" in shown), PHASE_COLOURS[p]),
                fmt_ms(st.current if st.count else None),
                fmt_ms(st.avg if st.count else None),
                fmt_ms(st.peak if st.count else None),
                fmt_pct(stats.share(p) if st.count else None),
            )
        tot = stats.phases["total"]
        table.add_row(
            Text("round", "bold"),
            fmt_ms(tot.current if tot.count else None),
            fmt_ms(tot.avg if tot.count else None),
            fmt_ms(tot.peak if tot.count else None),
            "100%" if tot.count else "-",
        )
        note = "traced: a barrier per phase splits the time"
        if "comm" in shown:  # a sharded run's: its collectives are priced, not waited for
            note += "; comm (priced): each collective at its size's probed cost"
        if stats.rounds and not stats.traced:
            note = "untraced: only the round total is known"
        if stats.summary is not None:  # the measured guard's decisions (core.cost.guard)
            note = "\n".join([note, accounting_line(stats),
                               *guard_lines(stats.summary.per_source)])
        self.query_one("#rounds-note", Static).update(Text(note, "dim"))
