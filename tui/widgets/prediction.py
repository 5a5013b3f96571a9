"""Predicted speedup against k beside the speedup this run measured.

The prediction is core.cost.prediction's, fed with what the app has: t_verify(rows) from the
calibration the Kernels panel shows (linear between measured row counts, as
core.dispatch.VerifyCostCurve.t_verify does), the draft source's price of k (the calibrated
draft step per draft for the model, nothing for a lookup), the per-position acceptance of
RoundStats and the target step: the run's own target steps where it had some (rounds that
proposed nothing), else the curve's t_verify(1).

The measurement is the speculative rounds' tokens over their seconds, times the same target
step. Their ratio (measured over predicted for the same mix of k and sources) is the
efficiency; below EFFICIENCY_FLOOR one line says which phase took the difference.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static
from textual_plot import HiResMode

from core.cost.prediction import KPrediction, Prediction, RoundCost, predict, predict_schedule
from core.dispatch.curve import interpolate
from tui.engine_info import CurveInfo
from tui.stats import RoundStats
from tui.widgets.plot_base import (
    CURRENT_STYLE,
    CURVE_STYLE,
    MEASURED_STYLE,
    PREDICTED_STYLE,
    TABLE_HINT,
    StaticPlot,
    data_ticks,
)

EFFICIENCY_FLOOR = 0.85
BEST_STYLE = "green3"
NO_DRAFT_COST = ("lookup", "tree")  # sources whose proposals cost no forward (copies)


def curve_t_verify(curve: CurveInfo) -> Callable[[int], float]:
    """t_verify(rows) from the curve's measured rows, by core.dispatch.VerifyCostCurve's rule."""
    table = dict(curve.t_verify)
    return lambda rows: interpolate(table, rows)


def reached_prefix(rates: Sequence[float | None]) -> list[float]:
    """Per-position acceptance up to the first position never reached (core.cost.prediction carries
    the last one given past the end)."""
    out: list[float] = []
    for r in rates:
        if r is None:
            break
        out.append(float(r))
    return out


def infer_bonus(stats: RoundStats) -> bool:
    """Whether a fully accepted round committed the bonus token (no such round yet: yes)."""
    full = [ev for ev in stats.rounds if ev.proposed and ev.accepted == ev.proposed]
    return not full or any(len(ev.tokens) > ev.proposed for ev in full)


@dataclass(frozen=True)
class SpeedupView:
    """What the view shows: the per-k prediction, and this run measured against it."""

    prediction: Prediction
    source: str  # whose price and acceptance the per-k curve uses (the last draft source)
    boundary_k: int | None  # the curve's kernel boundary R, as k = R - 1
    chosen_k: int | None  # what the policy proposed last round
    t_step_s: float
    step_measured: bool  # the run's target steps, not the curve's t_verify(1)
    spec_rounds: int
    measured: float | None  # speedup of the speculative rounds, over target-only
    predicted: KPrediction | None  # the same rounds (their k and sources) as predicted
    mean_ms: dict[str, float | None]  # measured per round: draft, verify, rest, round
    verdict: str | None  # which phase took the difference, when efficiency < the floor

    @property
    def efficiency(self) -> float | None:
        if self.measured is None or self.predicted is None or not self.predicted.speedup:
            return None
        return self.measured / self.predicted.speedup


def _cost(curve: CurveInfo, t_verify: Callable[[int], float], source: str,
          t_step: float) -> RoundCost:
    if source in NO_DRAFT_COST:
        price: float = 0.0
    else:  # core.drafting.model.model_draft_price: the draft step, else a target step
        price = curve.draft_step_s if curve.draft_step_s is not None else t_verify(1)
    return RoundCost(t_verify, price, t_step)


def speedup_view(curve: CurveInfo, stats: RoundStats) -> SpeedupView | None:
    """The numbers of the view; None without a measured curve."""
    if not curve.t_verify:
        return None
    t_verify = curve_t_verify(curve)
    steps = [ev for ev in stats.rounds if ev.proposed == 0 and ev.tokens]
    step_tokens = sum(len(ev.tokens) for ev in steps)
    step_s = sum(ev.timings.total for ev in steps)
    step_measured = step_tokens > 0 and step_s > 0
    t_step = step_s / step_tokens if step_measured else t_verify(1)
    bonus = infer_bonus(stats)
    spec = [ev for ev in stats.rounds if ev.proposed > 0]
    tallies = stats.sources.tallies

    def accept(source: str) -> list[float]:
        tally = tallies.get(source)
        return reached_prefix(tally.rates() if tally is not None else stats.per_position)

    source = next((ev.source for ev in reversed(spec) if ev.source), "model")
    k_max = max(max(curve.t_verify) - 1, stats.k_max, 1)
    prediction = predict(_cost(curve, t_verify, source, t_step), accept(source),
                         bonus=bonus, k_max=k_max)
    boundary_k = curve.boundary - 1 if curve.boundary else None
    last = stats.last
    chosen = last.proposed if last is not None else None

    measured = predicted = verdict = None
    mean_ms: dict[str, float | None] = dict.fromkeys(("draft", "verify", "rest", "round"))
    if spec:
        seconds = sum(ev.timings.total for ev in spec)
        tokens = sum(len(ev.tokens) for ev in spec)
        measured = tokens / seconds * t_step if seconds > 0 else None
        by_source: dict[str, Counter[int]] = {}
        for ev in spec:
            by_source.setdefault(ev.source or "model", Counter())[ev.proposed] += 1
        predicted = predict_schedule(
            [(_cost(curve, t_verify, s, t_step), counts, accept(s))
             for s, counts in by_source.items()],
            bonus,
        )
        mean_ms["round"] = seconds / len(spec) * 1e3
        traced = [ev for ev in spec if ev.traced]
        if traced:
            n = len(traced)
            mean_ms["draft"] = sum(ev.timings.draft for ev in traced) / n * 1e3
            mean_ms["verify"] = sum(ev.timings.verify for ev in traced) / n * 1e3
            mean_ms["rest"] = sum(ev.timings.total - ev.timings.draft - ev.timings.verify
                                  for ev in traced) / n * 1e3
    view = SpeedupView(prediction, source, boundary_k, chosen, t_step, step_measured,
                       len(spec), measured, predicted, mean_ms, None)
    eff = view.efficiency
    if eff is not None and eff < EFFICIENCY_FLOOR and predicted is not None:
        verdict = parting_phase(mean_ms, predicted)
        view = dataclasses.replace(view, verdict=verdict)
    return view


def parting_phase(mean_ms: dict[str, float | None], predicted: KPrediction) -> str:
    """One line: the phase whose measured ms per round exceed the prediction's the most."""
    if mean_ms["draft"] is None or mean_ms["verify"] is None:
        total = mean_ms["round"] or 0.0
        return (f"rounds took {total:.1f} ms against {predicted.seconds * 1e3:.1f} ms predicted; "
                "untraced, so the phase is unknown (trace rounds to split it)")
    pred = {"draft": predicted.draft_s * 1e3, "verify": predicted.verify_s * 1e3,
            "rest": (predicted.seconds - predicted.draft_s - predicted.verify_s) * 1e3}
    excess = {p: (mean_ms[p] or 0.0) - pred[p] for p in pred}
    phase = max(excess, key=lambda p: excess[p])
    name = "sample+cache+other" if phase == "rest" else phase
    return (f"{name} took the difference: {mean_ms[phase] or 0.0:.1f} ms measured against "
            f"{pred[phase]:.1f} ms predicted per round at mean k {predicted.k:.1f} "
            f"({excess[phase]:+.1f} ms)")


def summary_text(view: SpeedupView | None) -> Text:
    """The always-shown lines: measured, predicted, efficiency, the step used, the verdict."""
    text = Text()
    if view is None:
        text.append("no curve yet: press c (alt+c) to calibrate", "dim")
        return text
    best = view.prediction.best
    text.append("measured ", "dim")
    text.append(f"{view.measured:.2f}x" if view.measured is not None else "-", "bold " +
                MEASURED_STYLE)
    text.append("   predicted ", "dim")
    pred = view.predicted
    text.append(f"{pred.speedup:.2f}x" if pred is not None else "-", "bold")
    if pred is not None:
        text.append(f" (mean k {pred.k:.1f})", "dim")
    eff = view.efficiency
    text.append("\nefficiency ", "dim")
    text.append(f"{eff:.2f}" if eff is not None else "-",
                "bold red" if eff is not None and eff < EFFICIENCY_FLOOR else "bold")
    text.append(f"   best k {best.k:g}: {best.speedup:.2f}x predicted", "dim")
    if view.spec_rounds == 0:
        text.append("\nno speculative rounds this run yet", "dim")
    text.append("\ntarget step ", "dim")
    text.append(f"{view.t_step_s * 1e3:.1f} ms", "bold")
    text.append(" from this run's target steps" if view.step_measured
                else " = curve's t_verify(1)\n(no target-only rounds this run)", "dim")
    if view.verdict:
        text.append("\n" + view.verdict, "yellow")
    return text


def speedup_rows(view: SpeedupView) -> list[tuple[Text | str, ...]]:
    """k, tokens/round, ms/round (draft + verify), tokens/s, speedup; best and last k marked."""
    best = view.prediction.best.k
    out = []
    for p in view.prediction.per_k:
        marks = []
        if p.k == best:
            marks.append("best")
        if p.k == view.chosen_k:
            marks.append("last")
        if p.k == view.boundary_k:
            marks.append("kernel")
        style = "bold reverse" if p.k == view.chosen_k else ""
        out.append((
            Text(f"{p.k:g}", style),
            f"{p.tokens:.2f}",
            f"{p.draft_s * 1e3:.1f}+{p.verify_s * 1e3:.1f}",
            f"{p.tok_s:.1f}",
            Text(f"{p.speedup:.2f}x", style),
            Text("◀ " + "+".join(marks) if marks else "", "bold dark_orange"),
        ))
    return out


class SpeedupPlot(Vertical):
    """Predicted speedup against k, the kernel boundary, the last round's k and the measured
    speedup at the run's mean k; `v` swaps the plot for the table of numbers."""

    DEFAULT_CSS = """
    SpeedupPlot { height: auto; }
    SpeedupPlot StaticPlot { height: 12; }
    SpeedupPlot .plot-caption { height: auto; color: $text-muted; }
    SpeedupPlot #speedup-summary { height: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view: SpeedupView | None = None
        self._drawn: SpeedupView | None = None
        self._plots = True

    def compose(self) -> ComposeResult:
        yield Static(id="speedup-summary")
        yield StaticPlot(classes="plot")
        yield Static(classes="plot-caption")
        yield DataTable(id="speedup-table", cursor_type="none", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#speedup-table", DataTable).add_columns(
            "k", "tok/round", "ms draft+verify", "tok/s", "speedup", "")
        self.set_plots(True)
        self.show(None, RoundStats())

    def set_plots(self, on: bool) -> None:
        self._plots = on
        has = self.view is not None
        self.query_one(StaticPlot).display = on and has
        self.query_one(".plot-caption").display = on and has
        self.query_one("#speedup-table").display = not on and has

    def show(self, curve: CurveInfo | None, stats: RoundStats) -> None:
        view = speedup_view(curve, stats) if curve is not None else None
        if view == self._drawn and self.is_mounted and self._drawn is not None:
            return
        self.view = self._drawn = view
        self.query_one("#speedup-summary", Static).update(summary_text(view))
        self.set_plots(self._plots)
        if view is None:
            return
        table = self.query_one("#speedup-table", DataTable)
        table.clear()
        for row in speedup_rows(view):
            table.add_row(*row)
        self._draw(view)

    def _draw(self, view: SpeedupView) -> None:
        plot = self.query_one(StaticPlot)
        plot.clear()
        ks = [int(p.k) for p in view.prediction.per_k]
        ys = [p.speedup for p in view.prediction.per_k]
        top = max([*ys, view.measured or 0.0, 1.0]) * 1.15
        plot.set_xlabel("drafts proposed k")
        plot.set_ylabel("speedup")
        plot.set_xticks(data_ticks(ks))
        plot.set_xlimits(ks[0] - 0.5, ks[-1] + 0.5)
        plot.set_ylimits(0.0, top)
        plot.plot([ks[0], ks[-1]], [1.0, 1.0], line_style=PREDICTED_STYLE)  # target-only
        plot.plot(ks, ys, line_style=CURVE_STYLE, hires_mode=HiResMode.BRAILLE)
        if view.boundary_k is not None and ks[0] <= view.boundary_k <= ks[-1]:
            plot.add_v_line(view.boundary_k, MEASURED_STYLE)
        best = view.prediction.best
        plot.scatter([best.k], [best.speedup], marker="★", marker_style=BEST_STYLE)
        if view.chosen_k is not None and ks[0] <= view.chosen_k <= ks[-1]:
            plot.scatter([view.chosen_k], [view.prediction.at(view.chosen_k).speedup],
                         marker="◆", marker_style=CURRENT_STYLE)
        if view.measured is not None and view.predicted is not None:
            plot.scatter([view.predicted.k], [view.measured], marker="●",
                         marker_style=MEASURED_STYLE)
        caption = Text(no_wrap=True, overflow="ellipsis")
        caption.append("⠒⠒ ", CURVE_STYLE)
        caption.append(f"predicted ({view.source})  ")
        caption.append("★ ", BEST_STYLE)
        caption.append(f"best k={best.k:g}  ")
        if view.chosen_k is not None:
            caption.append("◆ ", CURRENT_STYLE)
            caption.append(f"last round k={view.chosen_k}  ")
        if view.measured is not None:
            caption.append("● ", MEASURED_STYLE)
            caption.append("measured  ")
        if view.boundary_k is not None:
            caption.append("│ ", MEASURED_STYLE)
            caption.append(f"kernel switch k={view.boundary_k} (R={view.boundary_k + 1})")
        caption.append("\n" + TABLE_HINT, "dim")
        self.query_one(".plot-caption", Static).update(caption)
