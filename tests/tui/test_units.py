"""Unit tests of the pieces the panels and the chat are built from (no app running)."""

from __future__ import annotations

import pytest

from core.events import CommittedToken, PhaseTimings, RoundEvent
from tui.bridge import CurveInfo
from tui.stats import RoundStats
from tui.transcript import REJECTED, Transcript
from tui.widgets.panels import curve_rows, position_bars, round_bars

# A byte-level vocabulary: "é" is two tokens, "日" three, like byte-level BPE fallbacks.
BYTES = {1: b"caf", 2: b"\xc3", 3: b"\xa9", 4: b" ", 5: b"\xe6", 6: b"\x97", 7: b"\xa5",
         8: b"!", 9: b" no", 0: b""}


def byte_decode(ids) -> str:  # noqa: ANN001
    return b"".join(BYTES[i] for i in ids).decode("utf-8", errors="replace")


def rnd(index: int, toks: list[tuple[int, str]], rejected=(), proposed=0, accepted=0,
        traced=True, ms=(1, 2, 3, 4, 0)) -> RoundEvent:  # noqa: ANN001
    t = PhaseTimings(*(m / 1e3 for m in ms), total=sum(ms) / 1e3)
    return RoundEvent(index, tuple(CommittedToken(i, o) for i, o in toks), tuple(rejected),
                      proposed, accepted, rows=proposed + 1, timings=t, traced=traced)


def test_multibyte_characters_split_across_tokens_and_rounds() -> None:
    tr = Transcript(byte_decode, eos_ids=frozenset({0}))
    tr.add_round(rnd(0, [(1, "accepted"), (2, "corrected")], rejected=(9,), proposed=2,
                     accepted=1))
    # the half character is held back, never shown as a replacement glyph
    assert tr.text == "caf"
    assert "\ufffd" not in "".join(p.text for p in tr.pieces)
    tr.add_round(rnd(1, [(3, "accepted"), (4, "accepted"), (5, "bonus")], proposed=2,
                     accepted=2))
    tr.add_round(rnd(2, [(6, "target"), (7, "target"), (8, "target"), (0, "target")]))
    assert tr.text == "café 日!"
    visible = "".join(p.text for p in tr.pieces if p.origin != REJECTED)
    assert visible == tr.text
    # the rejected draft sits where it was proposed: after the accepted "caf", before the fix
    assert [p.origin for p in tr.pieces][:2] == ["accepted", REJECTED]
    assert tr.pieces[1].text == " no"
    # the character completed by the bonus round's first token is credited to that token
    assert tr.pieces[2].text == "é " and tr.pieces[2].origin == "accepted"
    assert tr.rejected_count == 1
    assert 0 not in tr.ids  # EOS never shown


def test_render_hides_or_strikes_rejected() -> None:
    tr = Transcript(byte_decode)
    tr.add_round(rnd(0, [(1, "accepted"), (8, "corrected")], rejected=(9,), proposed=2,
                     accepted=1))
    assert tr.render(False).plain == "caf!"
    shown = tr.render(True)
    assert shown.plain == "caf no!"
    struck = [s for s in shown.spans if s.style.strike]
    assert [(s.start, s.end) for s in struck] == [(3, 6)]


def test_stats_per_position_and_phases() -> None:
    st = RoundStats()
    st.add(rnd(0, [(1, "accepted"), (1, "accepted"), (1, "corrected")], rejected=(1, 1),
               proposed=4, accepted=2))
    st.add(rnd(1, [(1, "accepted")] * 4 + [(1, "bonus")], proposed=4, accepted=4,
               ms=(2, 4, 6, 8, 0)))
    st.add(rnd(2, [(1, "corrected")], rejected=(1, 1, 1, 1), proposed=4, accepted=0))
    assert st.acceptance == pytest.approx(6 / 12)
    # position 1 verified 3x, kept 2x; position 3 reached only in the full round
    assert st.reached == [3, 2, 2, 1]
    assert st.per_position == pytest.approx([2 / 3, 1.0, 0.5, 1.0])
    assert st.mean_accepted_length == pytest.approx(2.0)
    assert st.k_history == [4, 4, 4]
    assert st.phases["verify"].peak == pytest.approx(4.0)
    assert st.phases["verify"].avg == pytest.approx((2 + 4 + 2) / 3)
    assert st.phases["verify"].current == pytest.approx(2.0)
    total = 10 + 20 + 10
    assert st.share("sample") == pytest.approx((3 + 6 + 3) / total)


def test_stats_show_positions_proposed_but_never_reached() -> None:
    st = RoundStats()
    st.add(rnd(0, [(1, "corrected")], rejected=(1, 1, 1), proposed=3, accepted=0))
    st.add(rnd(1, [(1, "accepted"), (1, "corrected")], rejected=(1,), proposed=2, accepted=1))
    st.add(rnd(2, [(1, "target")]))  # a round that proposed nothing counts for no position
    assert st.reached == [2, 1, 0] and st.kept == [1, 0, 0]
    assert st.per_position == [0.5, 0.0, None]
    assert (st.proposed, st.accepted, st.spec_rounds) == (5, 1, 2)
    assert st.mean_accepted_length == pytest.approx(0.5)
    assert "pos  3" in position_bars(st).plain and "n=0" in position_bars(st).plain


def test_untraced_rounds_keep_only_the_total() -> None:
    st = RoundStats()
    st.add(rnd(0, [(1, "target")], traced=False))
    assert st.phases["verify"].count == 0 and st.phases["total"].count == 1
    assert not st.traced
    assert "░" in round_bars(st, 5, 20).plain


def test_round_bars_scale_to_the_slowest_round() -> None:
    st = RoundStats()
    st.add(rnd(0, [(1, "target")], ms=(0, 10, 0, 0, 0)))
    st.add(rnd(1, [(1, "target")], ms=(0, 20, 0, 0, 0)))
    lines = round_bars(st, 5, 20).plain.splitlines()
    assert lines[0].count("█") == 10 and lines[1].count("█") == 20


def test_position_bars_and_curve_rows() -> None:
    st = RoundStats()
    st.add(rnd(0, [(1, "accepted"), (1, "bonus")], proposed=1, accepted=1))
    assert "100%" in position_bars(st).plain
    curve = CurveInfo({1: 0.01, 2: 0.02, 8: 0.03}, boundary=8, predicted_boundary=2)
    rows = curve_rows(curve, current_rows=2, families={8: "qmm"})
    assert [str(r[0]) for r in rows] == ["1", "2", "8"]
    assert [str(r[5]) for r in rows] == ["", "◀ pred", "◀ meas"]
    assert str(rows[2][3]) == "qmm"
    assert "reverse" in str(rows[1][0].style)
