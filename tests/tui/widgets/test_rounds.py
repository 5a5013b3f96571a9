"""The Rounds panel shows the measured guard's decision (core/cost/guard.py) after a run."""

from __future__ import annotations

import dataclasses

from textual.app import App, ComposeResult
from textual.widgets import Static

from core.cost.guard import SLOWER
from core.events import RunSummary
from tui.stats import RoundStats
from tui.widgets.rounds import RoundsPanel


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield RoundsPanel()

def _summary(per_source: dict) -> RunSummary:
    return RunSummary(
        mode="speculative", tokens=64, rounds=40, prompt_tokens=9, prefill_tokens=9,
        proposed=12, accepted=3, acceptance=0.25, per_position_acceptance=(),
        mean_accepted_length=0.5, e2e_s=1.0, ttft_s=0.1, decode_tok_s=70.0, phase_s={},
        mean_tv=None, traced=False, stop_reason="length", per_source=per_source,
    )

async def test_the_rounds_panel_says_which_source_the_guard_stopped() -> None:
    per = {
        "model": {"rounds": 4, "measured_tok_s": 180.0, "vs_target": 0.72, "guard": SLOWER},
        "lookup": {"rounds": 6, "measured_tok_s": 900.0, "vs_target": 3.6,
                   "guard": "asked: faster than target steps"},
        "none": {"rounds": 30, "measured_tok_s": 250.0},
    }
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        panel = app.query_one(RoundsPanel)
        stats = RoundStats()
        panel.show(stats)
        note = str(panel.query_one("#rounds-note", Static).render())
        assert SLOWER not in note  # no run yet: nothing to say
        stats.summary = _summary(per)
        panel.show(stats)
        await pilot.pause()
        note = str(panel.query_one("#rounds-note", Static).render())
        assert f"model: 180 tok/s, 0.72x target steps: {SLOWER}" in note
        assert "lookup: 900 tok/s, 3.60x target steps: asked" in note
        assert "target steps: 250 tok/s" in note


async def test_the_rounds_panel_accounts_for_every_second_of_the_run() -> None:
    """E2E as parts that add up to it, the time between rounds named (it was in no phase)."""
    from core.events import CommittedToken, PhaseTimings, RoundEvent

    rounds = [RoundEvent(index=i, tokens=(CommittedToken(5, "target"),), rejected=(), proposed=0,
                         accepted=0, rows=1, timings=PhaseTimings(total=0.2), kernel="qmv",
                         tv=None, context=9 + i, traced=False) for i in range(3)]
    app = Host()
    async with app.run_test(size=(100, 40)) as pilot:
        panel = app.query_one(RoundsPanel)
        summary = dataclasses.replace(_summary({}), ttft_s=0.3)
        stats = RoundStats.from_rounds(rounds, summary)
        panel.show(stats)
        await pilot.pause()
        note = " ".join(str(panel.query_one("#rounds-note", Static).render()).split())
        # 1.0 s = 0.1 s before the first round (TTFT 0.3 s less its 0.2 s) + 3 rounds of
        # 0.2 s + 0.3 s between rounds
        assert ("E2E 1.00 s = before the first round 0.10 s + rounds 0.60 s + between rounds "
                "0.30 s") in note, note
