"""Two runs side by side: pick any two of this session's runs and the saved profiles.

Settings and results in two columns with what differs highlighted, then each phase's share of
the round time as paired bars. The numbers are the ones `profiles diff` prints (core.profile's
diff_settings and summary_metrics), so the app and the CLI never compare runs two ways.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rich.bar import Bar
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Select, Static

from core.errors import UserError
from core.events import PHASES, RunSummary
from core.events import phase_shares as shares_of
from core.identity import human_count
from core.io.user_text import shown
from core.profile import RecordedRun, diff_settings, summary_metrics, value_text
from core.settings import Settings
from tui.widgets.cells import PHASE_COLOURS  # the Rounds panel's colours, so a phase reads alike

A_STYLE, B_STYLE = "bold cyan", "bold magenta"
DIFF_STYLE = "bold yellow"
BAR_WIDTH = 22
# Which way is better, for the ratio's colour; metrics not named here are not judged.
LOWER_IS_BETTER = {"E2E s", "TTFT s", "rounds", "mean TV", *(f"{p} ms" for p in PHASES)}
HIGHER_IS_BETTER = {"decode tok/s", "acceptance", "mean accepted length"}


@dataclass(frozen=True)
class ComparedRun:
    """One side of the comparison: a run of this session, or a saved profile (run or not)."""

    key: str  # "live:N" or "profile:NAME"
    label: str
    settings: Settings
    summary: RunSummary | None
    environment: dict[str, Any] = field(default_factory=dict)
    stale: bool = False  # a profile whose settings changed after its run was recorded


def live_run(index: int, record: Any, environment: dict[str, Any] | None = None) -> ComparedRun:
    """A run of this session (tui.records.RunRecord)."""
    return ComparedRun(f"live:{index}", f"{record.label} (this session)", record.settings,
                       record.summary, dict(environment or {}))


def profile_run(profile: Any) -> ComparedRun:
    """A saved profile: its recorded run's settings and numbers, or its settings alone."""
    run = profile.run
    if run is None:
        return ComparedRun(f"profile:{profile.name}", profile.name, profile.settings, None)
    return ComparedRun(f"profile:{profile.name}", profile.name, run.settings or profile.settings,
                       run.summary, dict(run.environment), profile.run_is_stale)


def settings_rows(a: ComparedRun, b: ComparedRun) -> list[tuple[Text, Text, Text]]:
    """Every setting, A's and B's value; the ones that differ marked and highlighted."""
    differ = {name for name, _, _ in diff_settings(a.settings, b.settings)}
    rows = []
    for f in dataclasses.fields(Settings):
        va, vb = getattr(a.settings, f.name), getattr(b.settings, f.name)
        if f.name in differ:
            rows.append((Text("≠ " + f.name, DIFF_STYLE), Text(value_text(va), DIFF_STYLE),
                         Text(value_text(vb), DIFF_STYLE)))
        else:
            rows.append((Text("  " + f.name, "dim"), Text(value_text(va)), Text(value_text(vb))))
    return rows


def _metrics(run: ComparedRun) -> list[tuple[str, float | None]]:
    if run.summary is None:
        return []
    return summary_metrics(RecordedRun(run.environment, (), run.summary))


CELL = 24  # characters a model cell shows: both columns fit beside the metric names


def _cut(text: str) -> str:
    """At most CELL characters, keeping the end (a path's file name, a spec's options)."""
    text = shown(text)  # model specs and tool versions come from run files
    return text if len(text) <= CELL else "…" + text[-(CELL - 1):]


def model_cells(run: ComparedRun, role: str) -> tuple[str, str, str, str]:
    """A run's model in `role`: spec and kind, what pins its weights, size, quantization."""
    models = run.summary.models if run.summary is not None else None
    if models is None:
        return ("unknown",) * 4  # a run recorded before identities
    m = models.get(role)
    if m is None:
        return ("none", "-", "-", "-")
    if m.shape is not None:
        pins = f"{m.shape}, seed {m.seed}"
    else:
        pins = m.sha256[:12] if m.sha256 else "sha256 unknown"
    if m.base is not None:
        pins = f"{m.base}: {pins}"
    size = f"{m.architecture or '?'}, {human_count(m.parameters)}, {m.layers} layers"
    return (f"{m.spec} ({m.kind})", pins, size, m.quantization)


def models_differ(a: ComparedRun, b: ComparedRun) -> list[str]:
    """The roles whose models differ between two runs that both name theirs. A run that used
    no draft (target-only) against one that did is a mode change, not a draft model change
    (mode_change): the screen once said "they ran different models (draft)" for it."""
    if a.summary is None or b.summary is None or not a.summary.models or not b.summary.models:
        return []
    out = []
    for role in ("target", "draft"):
        ca, cb = model_cells(a, role), model_cells(b, role)
        if role == "draft" and "none" in (ca[0], cb[0]):
            continue
        if ca != cb:
            out.append(role)
    return out


def mode_change(a: ComparedRun, b: ComparedRun) -> str | None:
    """The sentence for two runs of different modes (speculative against target-only)."""
    if a.summary is None or b.summary is None or a.summary.mode == b.summary.mode:
        return None
    return (f"a mode change: {a.label} ran {a.summary.mode}, {b.label} {b.summary.mode}")


def _tool(env: dict[str, Any]) -> str:
    """The code that measured, short: '0.1.0 at 0123abcd', '+ edits' when the tree was dirty."""
    commit = env.get("specdec_tui_commit")
    text = str(env.get("specdec_tui") or "unknown")
    if commit:
        text += f" at {str(commit)[:8]}" + (" + edits" if env.get("specdec_tui_dirty") else "")
    return text


def model_rows(a: ComparedRun, b: ComparedRun) -> list[tuple[Text, Text, Text, Text]]:
    """Which models each ran and which code measured, a difference highlighted."""
    rows = []
    cells = [(role, label, va, vb) for role in ("target", "draft")
             for label, va, vb in zip(("", " weights", " size", " bits"), model_cells(a, role),
                                      model_cells(b, role), strict=True)]
    cells.append(("measured by", "", _tool(a.environment), _tool(b.environment)))
    for role, label, va, vb in cells:
        style = DIFF_STYLE if va != vb and "unknown" not in (va, vb) else ""
        name = Text(("≠ " if style else "") + role + label, style or "dim")
        rows.append((name, Text(_cut(va), style), Text(_cut(vb), style), Text("")))
    return rows


def result_rows(a: ComparedRun, b: ComparedRun) -> list[tuple[Text, Text, Text, Text]]:
    """Where each ran and what, then the metrics `profiles diff` compares, with B / A coloured
    by which side is better (green: B, red: A) where one direction is better."""
    rows = []
    for key in ("backend", "device_name"):
        va, vb = a.environment.get(key), b.environment.get(key)
        style = DIFF_STYLE if va and vb and va != vb else ""
        rows.append((Text(key, "dim"), Text(value_text(va), style), Text(value_text(vb), style), Text("")))
    rows += model_rows(a, b)
    ma, mb = dict(_metrics(a)), dict(_metrics(b))
    labels = list(dict.fromkeys(label for label, _ in (*_metrics(a), *_metrics(b))))
    for label in labels:
        va, vb = ma.get(label), mb.get(label)
        ratio = Text("-", "dim")
        if va and vb is not None:
            r = vb / va
            style = ""
            if abs(r - 1.0) > 0.02 and label in LOWER_IS_BETTER | HIGHER_IS_BETTER:
                better = (r < 1.0) == (label in LOWER_IS_BETTER)
                style = "green3" if better else "red1"
            ratio = Text(f"{r:.3g}x", style)
        differs = va != vb and not (va is not None and vb is not None
                                    and abs(va - vb) <= 1e-9 * max(abs(va), abs(vb)))
        style = "bold" if differs else ""
        rows.append((Text(label, "dim"), Text(value_text(va), style), Text(value_text(vb), style), ratio))
    return rows


NARROW = 100  # below this many columns the screen stacks: A, B and B/A one under another


def stacked(row: tuple[Text, ...]) -> tuple[Text, Text]:
    """A side-by-side row (name, A, B[, B/A]) as a name and one cell holding A, B and B/A on
    lines of their own: at 80 columns the four columns needed sideways scrolling."""
    name, va, vb, *rest = row
    ratio = rest[0].plain.strip() if rest else ""
    if va.plain == vb.plain and ratio in ("", "-", "1x"):  # one line for a value both share
        return name, Text.assemble(("A B ", "dim"), va)
    cell = Text.assemble(("A ", A_STYLE), va, "\n", ("B ", B_STYLE), vb)
    if rest and rest[0].plain.strip():
        cell.append_text(Text.assemble("\n", ("B/A ", "dim"), rest[0]))
    return name, cell


def phase_shares(summary: RunSummary | None) -> dict[str, float] | None:
    """Each phase's share of the run's traced time (core.events.phase_shares, the one
    computation); None when there is no run or it split no phases."""
    return None if summary is None else shares_of(summary.phase_s, summary.traced)


def share_cell(share: float | None, colour: str) -> Any:
    """A bar of the share on a fixed 0-100% scale, and the number after it."""
    from rich.table import Table

    if share is None:
        return Text("untraced: no split", "dim")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=BAR_WIDTH)
    grid.add_column(justify="right", width=4)
    grid.add_row(Bar(1.0, 0.0, share, width=BAR_WIDTH, color=colour, bgcolor="grey27"),
                 f"{share:.0%}")
    return grid


class CompareScreen(Screen[None]):
    """Pick A and B; see settings, results and phase shares side by side."""

    BINDINGS = [Binding("escape,q", "close", "back", key_display="esc")]

    DEFAULT_CSS = """
    CompareScreen { layout: vertical; }
    #compare-title { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    #compare-pickers { height: auto; padding: 0 1; }
    #compare-pickers Label { padding: 1 1 0 0; }
    #compare-pickers Select { width: 1fr; }
    #compare-note { height: auto; padding: 0 1; }
    #compare-body { height: 1fr; layout: horizontal; }
    #compare-left, #compare-right { width: 1fr; height: 1fr; padding: 0 1; }
    CompareScreen.-narrow #compare-body { layout: vertical; overflow-y: auto; }
    CompareScreen.-narrow #compare-left, CompareScreen.-narrow #compare-right { height: auto; }
    CompareScreen .section { margin-top: 1; text-style: bold; color: $accent; }
    """

    def __init__(self, live: list[ComparedRun], store: Any, a: str | None = None,
                 b: str | None = None) -> None:
        super().__init__()
        self._live = {run.key: run for run in live}
        self._store = store
        self._choices = self._options()
        keys = [key for _, key in self._choices]
        # Unnamed sides: B the latest run (or the last profile), A the first other choice.
        self._b = b if b in keys else (keys[len(self._live) - 1] if self._live else
                                       keys[-1] if keys else None)
        others = [k for k in keys if k != self._b] or keys
        self._a = a if a in keys else (others[0] if others else None)
        self.pair: tuple[ComparedRun, ComparedRun] | None = None
        self.narrow = False  # below NARROW columns: one column, each row's A, B and B/A stacked

    def _options(self) -> list[tuple[str, str]]:
        out = [(run.label, key) for key, run in self._live.items()]
        try:
            infos = self._store.list() if self._store is not None else []
        except UserError as exc:
            self.notify(str(exc), severity="error")
            infos = []
        for info in infos:
            if info.error is None:
                kind = "preset" if info.preset else "profile"
                out.append((f"{info.name} ({kind}{', recorded run' if info.has_run else ''})",
                            f"profile:{info.name}"))
        return out

    def compose(self) -> ComposeResult:
        yield Static("compare two runs: A and B, settings and results side by side",
                     id="compare-title")
        with Horizontal(id="compare-pickers"):
            yield Label(Text("A", A_STYLE))
            yield Select(self._choices, value=self._a or Select.NULL, id="pick-a",
                         prompt="run or profile A", allow_blank=self._a is None)
            yield Label(Text("B", B_STYLE))
            yield Select(self._choices, value=self._b or Select.NULL, id="pick-b",
                         prompt="run or profile B", allow_blank=self._b is None)
        yield Static(id="compare-note")
        with Container(id="compare-body"):
            with VerticalScroll(id="compare-left"):
                yield Label("settings (≠ differs)", classes="section")
                yield DataTable(id="cmp-settings", cursor_type="none", zebra_stripes=True)
            with VerticalScroll(id="compare-right"):
                yield Label("results", classes="section")
                yield DataTable(id="cmp-results", cursor_type="none", zebra_stripes=True)
                yield Label("phase shares of the round time", classes="section")
                with Vertical(id="cmp-phase-box"):
                    yield DataTable(id="cmp-phases", cursor_type="none", show_header=True)
        yield Footer()

    def on_mount(self) -> None:
        for table in self.query(DataTable):
            table.styles.max_height = 80  # whole tables (the app caps panel tables at 20 rows)
        self._lay_out(self.app.size.width)

    def on_resize(self, event: Any) -> None:
        if (event.size.width < NARROW) != self.narrow:
            self._lay_out(event.size.width)

    def _lay_out(self, width: int) -> None:
        """Side by side from NARROW columns; below it settings, results and phases one under
        another, the settings' and results' A, B and B/A stacked in one cell."""
        self.narrow = width < NARROW
        self.set_class(self.narrow, "-narrow")
        heads = (Text("A", A_STYLE), Text("B", B_STYLE))
        stack = Text.assemble(*heads[:1], " · ", heads[1], " · B/A")
        columns = {"cmp-settings": ("setting", stack) if self.narrow else ("setting", *heads),
                   "cmp-results": ("metric", stack) if self.narrow else ("metric", *heads, "B / A"),
                   "cmp-phases": ("phase", *heads)}
        for name, heads_of in columns.items():
            table = self.query_one(f"#{name}", DataTable)
            table.clear(columns=True)
            table.add_columns(*heads_of)
        self.refresh_pair()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        value = None if event.value is Select.NULL else str(event.value)
        if event.select.id == "pick-a":
            self._a = value
        elif event.select.id == "pick-b":
            self._b = value
        self.refresh_pair()

    def _resolve(self, key: str | None) -> ComparedRun | None:
        if key is None:
            return None
        if key in self._live:
            return self._live[key]
        name = key.partition(":")[2]
        try:
            return profile_run(self._store.load(name))
        except UserError as exc:
            self.notify(str(exc), title="profile not loaded", severity="error")
            return None

    def refresh_pair(self) -> None:
        """Redraw the tables for the runs picked now."""
        a, b = self._resolve(self._a), self._resolve(self._b)
        note = self.query_one("#compare-note", Static)
        tables = [self.query_one(f"#{t}", DataTable)
                  for t in ("cmp-settings", "cmp-results", "cmp-phases")]
        for table in tables:
            table.clear()
        if a is None or b is None:
            self.pair = None
            note.update(Text("nothing to compare yet: chat once, or save a profile with "
                             "ctrl+s", "dim"))
            return
        self.pair = (a, b)
        note.update(self._note(a, b))
        settings, results, phases = tables
        for table, rows in ((settings, settings_rows(a, b)), (results, result_rows(a, b))):
            for row in rows:
                if self.narrow:
                    table.add_row(*stacked(row), height=None)
                else:
                    table.add_row(*row)
        sa, sb = phase_shares(a.summary), phase_shares(b.summary)
        for p in PHASES:
            if p == "comm" and not any(x and x.get(p) for x in (sa, sb)):
                continue  # collectives: only runs of a sharded target have them
            colour = PHASE_COLOURS[p]
            phases.add_row(Text(p, colour), share_cell(None if sa is None else sa[p], colour),
                           share_cell(None if sb is None else sb[p], colour))

    @staticmethod
    def _note(a: ComparedRun, b: ComparedRun) -> Text:
        text = Text()
        text.append("A ", A_STYLE)
        text.append(a.label)
        text.append("   ")
        text.append("B ", B_STYLE)
        text.append(b.label)
        changed = len(diff_settings(a.settings, b.settings))
        text.append(f"   {changed} setting{' differs' if changed == 1 else 's differ'}", "dim")
        warnings = [f"{r.label} has no recorded run" for r in (a, b) if r.summary is None]
        warnings += [f"{r.label}'s settings changed after its run" for r in (a, b) if r.stale]
        mode = mode_change(a, b)
        if mode:
            warnings.append(mode)
        differ = models_differ(a, b)
        if differ:
            warnings.append(f"they ran different models ({' and '.join(differ)}): the numbers "
                            "compare models, not settings")
        ea, eb = a.environment.get("device_name"), b.environment.get("device_name")
        if ea and eb and ea != eb:
            warnings.append("they ran on different devices")
        if a.summary is not None and b.summary is not None and a.summary.tokens != b.summary.tokens:
            warnings.append(f"they made {a.summary.tokens} and {b.summary.tokens} tokens: compare "
                            "rates (tok/s, acceptance, shares) rather than totals")
        if warnings:
            text.append("\n" + "; ".join(warnings), "yellow")
        return text

    def action_close(self) -> None:
        self.dismiss(None)
