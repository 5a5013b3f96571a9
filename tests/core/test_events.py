"""core.events.phase_shares: the one computation of each phase's share of a run's traced time,
read by `chat`'s summary, the Rounds and Profile panels and the compare screen alike."""

from __future__ import annotations

import pytest

from core.events import PHASES, PhaseTimings, RoundEvent, RunSummary, phase_shares
from tui.screens.compare import phase_shares as compare_shares
from tui.stats import RoundStats
from tui.widgets.profile_panel import compare_rows


def _summary(traced: bool, **phase_s: float) -> RunSummary:
    full = {p: phase_s.get(p, 0.0) for p in PHASES}
    return RunSummary(mode="speculative", tokens=4, rounds=2, prompt_tokens=3,
                      prefill_tokens=3, proposed=2, accepted=1, acceptance=0.5,
                      per_position_acceptance=(0.5,), mean_accepted_length=1.0, e2e_s=1.0,
                      ttft_s=0.1, decode_tok_s=4.0, phase_s=full, mean_tv=None,
                      traced=traced, stop_reason="length")


def test_shares_sum_to_one_in_phases_order() -> None:
    shares = phase_shares({"draft": 1.0, "verify": 3.0, "cache": 0.0})
    assert shares is not None and tuple(shares) == PHASES
    assert shares["draft"] == pytest.approx(0.25) and shares["verify"] == pytest.approx(0.75)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_nothing_split_is_none_not_a_division_by_one() -> None:
    assert phase_shares({"draft": 1.0}, traced=False) is None
    assert phase_shares(dict.fromkeys(PHASES, 0.0)) is None
    # a hand-edited run's negative time counts as none, never as a negative share
    shares = phase_shares({"draft": -2.0, "verify": 1.0})
    assert shares is not None and shares["draft"] == 0.0 and shares["verify"] == 1.0


def test_keys_beyond_phases_do_not_dilute_the_shares() -> None:
    shares = phase_shares({"verify": 1.0, "total": 9.0})
    assert shares is not None and shares["verify"] == 1.0


def test_every_tui_caller_reads_the_same_numbers() -> None:
    summary = _summary(True, draft=0.2, verify=0.6, sample=0.1, cache=0.1)
    expected = phase_shares(summary.phase_s, summary.traced)
    assert compare_shares(summary) == expected
    from core.settings import Settings
    from tui.records import RunRecord

    rows = dict((name, a) for name, a, _ in compare_rows(RunRecord("a", Settings(), summary),
                                                         None))
    assert rows["verify share"] == f"{expected['verify']:.0%}" == "60%"
    stats = RoundStats()
    stats.add(RoundEvent(index=0, tokens=(), timings=PhaseTimings(
        draft=0.2, verify=0.6, sample=0.1, cache=0.1, total=1.0), traced=True))
    assert stats.share("verify") == pytest.approx(expected["verify"])
    untraced = _summary(False, verify=1.0)
    assert compare_shares(untraced) is None
    assert dict((n, a) for n, a, _ in compare_rows(RunRecord("b", Settings(), untraced),
                                                   None))["verify share"] == "-"


def test_chat_summary_prints_the_shares() -> None:
    from rich.console import Console

    from core.chat.cli import summary_table

    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(_summary(True, draft=0.25, verify=0.75)))
    out = console.export_text()
    assert "draft 25%" in out and "verify 75%" in out and "sample" not in out
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(_summary(True)))  # traced, yet nothing timed: no phases row
    assert "phases" not in console.export_text()


def test_a_runs_parts_add_up_to_its_e2e_and_name_the_time_between_rounds() -> None:
    """A run on a CPU with a competing process, consumed by a slow reader (a UI): its parts
    (before the first round, the rounds' clocks, the time between rounds) add up to its E2E
    within 2%, and the reader's sleeps land in "between rounds", not in no part at all."""
    import subprocess
    import sys
    import time

    from core.decode.engine import Engine
    from core.events import time_accounting
    from core.settings import Settings
    from tests.helpers.tiny import PROMPT, VOCAB, tiny_llama

    engine = Engine(tiny_llama(2, seed=0), tiny_llama(1, seed=1), vocab_size=VOCAB)
    s = Settings(temperature=0.0, rule="greedy", k=2, max_tokens=12, ignore_eos=True)
    list(engine.generate(list(PROMPT), s))  # compiled once
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # the competing process
    try:
        rounds, summary = [], None
        for item in engine.generate(list(PROMPT), s):
            if isinstance(item, RoundEvent):
                rounds.append(item)
                time.sleep(0.05)  # the reader's own work between rounds
            else:
                summary = item
    finally:
        hog.kill()
    assert summary is not None and len(rounds) >= 2
    parts = time_accounting(summary, rounds)
    assert abs(sum(parts.values()) - summary.e2e_s) <= 0.02 * summary.e2e_s, parts
    later = len(rounds) - 1  # the reader's sleep after each round but the last
    assert parts["between rounds"] >= 0.05 * later * 0.9, (parts, later)
    assert parts["rounds"] == pytest.approx(sum(ev.timings.total for ev in rounds))
    from rich.console import Console

    from core.chat.cli import summary_table

    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(summary, rounds))  # `chat` prints the parts too
    assert "between rounds" in console.export_text()
