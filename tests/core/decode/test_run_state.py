"""The round's seam (core/decode/run_state.py): the round modules take a RunState and a
RoundKit, never the engine, so they touch no private Engine attribute."""

from __future__ import annotations

import re

from tests.helpers import REPO

ROUND_MODULES = ("core/decode/speculative.py", "core/decode/single.py")
# An engine's private attribute reached from outside it: `engine._target`, `self.engine._clock`
REACH_IN = re.compile(r"\bengine\s*\.\s*_\w+")


def reach_ins(text: str) -> list[str]:
    """Every `engine._name` in `text`."""
    return REACH_IN.findall(text)


def test_the_round_modules_touch_no_private_engine_attribute() -> None:
    assert reach_ins("t = engine._target; c = self.engine._clock") == [
        "engine._target", "engine._clock"]  # the control: a planted example is caught
    assert reach_ins("engine.drafter(name); run.kit().target") == []
    for path in ROUND_MODULES:
        text = (REPO / path).read_text()
        assert reach_ins(text) == [], path
        assert "core.decode.engine" not in text, path  # nor import the engine itself


def test_the_null_guard_asks_every_source_and_measures_nothing() -> None:
    """Where no clock judges the rounds, the loop runs the same code against NULL_GUARD: every
    offer asked in its router's order, no target probe, no break charged, nothing reported."""
    from core.decode.run_state import NULL_GUARD

    assert NULL_GUARD.asks("lookup") and NULL_GUARD.rank("lookup") == NULL_GUARD.rank("model")
    assert not NULL_GUARD.target_probe_due()
    assert NULL_GUARD.observe_step(1.0, after="lookup") == 0.0
    NULL_GUARD.observe_round("lookup", 3, 1.0)
    assert NULL_GUARD.report() == {}
