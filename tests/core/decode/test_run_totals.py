"""Run totals (core/decode/run_totals.py): decode speed is never four tokens over a millisecond
(issue 21)."""

from __future__ import annotations

import pytest


@pytest.mark.usefixtures("wide_console")
def test_decode_speed_is_not_four_tokens_over_a_millisecond() -> None:
    from core.chat.cli import summary_table
    from core.decode.run_totals import RunTotals
    from core.events import CommittedToken, RoundEvent
    from core.settings import Settings

    def four(i: int) -> RoundEvent:
        return RoundEvent(i, tuple(CommittedToken(t, "accepted") for t in range(4)))

    totals = RunTotals()
    totals.add(four(0), now=1.0)
    one = totals.summary(Settings(), 5, 5, e2e=1.001, t_start=0.0, stop="length", fallback=None)
    assert one.decode_tok_s == 0.0  # was (4 - 1) / 0.001 = 3,000 tok/s
    from rich.console import Console

    console = Console(record=True, width=100)
    console.print(summary_table(one))
    decode_line = next(ln for ln in console.export_text().splitlines() if "decode" in ln)
    assert decode_line.split() == ["decode", "-"], decode_line
    totals.add(four(1), now=1.5)
    two = totals.summary(Settings(), 5, 5, e2e=1.5, t_start=0.0, stop="length", fallback=None)
    assert two.decode_tok_s == pytest.approx(4 / 0.5)
