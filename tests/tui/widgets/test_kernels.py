"""The Kernels panel says which forward the last run took and how many graphs it compiled."""

from __future__ import annotations

from core.events import RunSummary
from tui.stats import RoundStats
from tui.widgets.kernels import step_text


def _summary(**kw: object) -> RunSummary:
    return RunSummary(
        mode="speculative", tokens=8, rounds=3, prompt_tokens=4, prefill_tokens=4, proposed=6,
        accepted=4, acceptance=0.67, per_position_acceptance=(), mean_accepted_length=1.3,
        e2e_s=1.0, ttft_s=0.1, decode_tok_s=8.0, phase_s={}, mean_tv=None, traced=False,
        stop_reason="length", **kw,
    )


def test_the_panel_names_the_step_and_its_graphs() -> None:
    assert step_text(RoundStats()).plain == "\nstep -"
    stats = RoundStats(summary=_summary(step="compiled", graphs=7))
    assert step_text(stats).plain == "\nstep compiled   7 graphs compiled"
    eager = RoundStats(summary=_summary())
    assert step_text(eager).plain == "\nstep eager   0 graphs compiled"


def test_a_model_that_ran_eager_under_the_compiled_step_says_why() -> None:
    why = "its gemma2 layers are not the llama/qwen2 block this step reproduces"
    stats = RoundStats(summary=_summary(step="compiled", graphs=5, eager_because={"draft": why}))
    assert step_text(stats).plain.endswith(f"\ndraft runs eager: {why}")
