"""Unit tests of the pieces the panels and the chat are built from (no app running)."""

from __future__ import annotations

import dataclasses

import pytest

from core.events import ORIGINS, CommittedToken, PhaseTimings, RoundEvent
from core.settings import Settings
from tui.copies import PromptLayout, locate_copy
from tui.engine_info import CurveInfo
from tui.stats import RoundStats
from tui.transcript import ORIGIN_HELP, ORIGIN_STYLES, REJECTED, REJECTED_COPY, Transcript
from tui.widgets.acceptance import position_bars
from tui.widgets.kernels import curve_rows
from tui.widgets.rounds import phase_legend, round_bars

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


def test_a_sharded_run_s_phases_are_labelled_compute_and_priced() -> None:
    """With comm (a sharded target's collectives, priced not timed) the legend says what the
    verification and the comm are; a one-process run shows neither."""
    st = RoundStats()
    st.add(rnd(0, [(1, "target")], ms=(1, 2, 3, 4, 0)))
    assert "comm" not in st.phases_shown()
    plain = phase_legend(st.phases_shown()).plain
    assert "verify " in plain and "priced" not in plain and "compute" not in plain
    ev = rnd(1, [(1, "target")])
    st.add(dataclasses.replace(ev, timings=dataclasses.replace(ev.timings, comm=0.005)))
    assert "comm" in st.phases_shown()
    plain = phase_legend(st.phases_shown()).plain
    assert "verify (compute)" in plain and "comm (priced)" in plain


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


# ---------------------------------------------------------------------------------- sources


def src(index: int, source: str, proposed: int, accepted: int, copied_from=None) -> RoundEvent:  # noqa: ANN001
    """A round of a draft source: `accepted` kept drafts, then a correction or a bonus."""
    origin = "copied" if source == "lookup" else "accepted"
    toks = [(1, origin)] * accepted + [(8, "corrected" if accepted < proposed else "bonus")]
    ev = rnd(index, toks, rejected=(9,) * (proposed - accepted), proposed=proposed,
             accepted=accepted)
    return dataclasses.replace(ev, source=source, copied_from=copied_from)


def test_stats_count_each_draft_source_and_the_plain_steps() -> None:
    st = RoundStats()
    st.add(src(0, "lookup", 6, 6, copied_from=3))
    st.add(src(1, "model", 4, 1))
    st.add(src(2, "lookup", 4, 0, copied_from=5))  # a copy the target refused: not "kept"
    st.add(rnd(3, [(1, "target")]), speculative=True)  # nothing to copy: a target step
    st.add(src(4, "model", 4, 3))
    st.add(rnd(5, [(1, "target")]), speculative=False)  # target-only mode: no source's miss
    rows = {r.name: r for r in st.sources.rows()}
    assert list(rows) == ["lookup", "model", "none"]
    assert st.sources.speculative_rounds == 5
    lookup, model, none = rows["lookup"], rows["model"], rows["none"]
    assert (lookup.rounds, lookup.proposed, lookup.hit_rate) == (2, 10, pytest.approx(2 / 5))
    assert lookup.drafts_per_round == pytest.approx(5.0)
    assert lookup.acceptance == pytest.approx(6 / 10)
    assert lookup.mean_accepted_length == pytest.approx(3.0)
    assert (model.rounds, model.hit_rate, model.acceptance) == (2, pytest.approx(2 / 5),
                                                                pytest.approx(4 / 8))
    assert (none.rounds, none.hit_rate, none.drafts_per_round) == (1, pytest.approx(1 / 5), None)
    assert st.sources.last_copy is not None and st.sources.last_copy.index == 0
    # the run's totals are still over every source
    assert (st.proposed, st.accepted) == (18, 10)


def test_recorded_rounds_take_the_target_steps_from_the_summary() -> None:
    from tests.helpers.app import summarize

    events = [src(0, "lookup", 2, 2, copied_from=1), rnd(1, [(1, "target")])]
    summary = summarize(events, Settings(draft_source="lookup"), "length", 3)
    st = RoundStats.from_rounds(events, summary)
    assert [(r.name, r.rounds) for r in st.sources.rows()] == [("lookup", 1), ("none", 1)]
    assert st.sources.hit_rate("lookup") == pytest.approx(0.5)


def test_rejected_copies_are_coloured_apart_from_rejected_model_drafts() -> None:
    tr = Transcript(byte_decode)
    tr.add_round(src(0, "lookup", 2, 1))
    tr.add_round(src(1, "model", 2, 1))
    assert [p.origin for p in tr.pieces] == ["copied", REJECTED_COPY, "corrected", "accepted",
                                             REJECTED, "corrected"]
    shown = tr.render(True)
    styles = [s.style for s in shown.spans]
    assert ORIGIN_STYLES["copied"] in styles
    assert ORIGIN_STYLES[REJECTED_COPY] != ORIGIN_STYLES[REJECTED]
    assert ORIGIN_STYLES[REJECTED_COPY].strike and ORIGIN_STYLES[REJECTED].strike
    assert tr.render(False).plain == "caf!caf!"
    assert set(ORIGINS) <= set(ORIGIN_STYLES) and set(ORIGINS) <= set(ORIGIN_HELP)


def test_every_origin_has_a_style_in_the_headless_chat() -> None:
    from core.chat.cli import ORIGIN_STYLE

    assert set(ORIGINS) <= set(ORIGIN_STYLE)
    assert len(set(ORIGIN_STYLE.values())) == len(ORIGIN_STYLE)  # each its own colour


def test_locate_copy_names_the_message_and_its_words() -> None:
    words = {i: f" w{i}" for i in range(100)}

    def decode(ids) -> str:  # noqa: ANN001
        return "".join(words[i] for i in ids)

    # system 0..4, user 5..19, assistant 20..29, user 30..39; 40..41 the answer's header
    layout = PromptLayout(tuple(range(42)), ((0, 5), (5, 20), (20, 30), (30, 40)),
                          ("system", "user", "assistant", "user"))
    hit = locate_copy(12, 3, layout, [], decode)
    assert (hit.message, hit.role, hit.offset, hit.length) == (1, "user", 7, 3)
    assert hit.where() == "your message 2"
    assert hit.before == " w8 w9 w10 w11" and hit.text == " w12 w13 w14"
    # a copy running past the message's end shows only the message's words
    edge = locate_copy(28, 6, layout, [], decode)
    assert edge.where() == "the assistant's message 3" and edge.text == " w28 w29"
    assert locate_copy(2, 1, layout, [], decode).where() == "the system prompt"
    # past the prompt: the answer being written, indexed from its first token
    own = locate_copy(44, 2, layout, [70, 71, 72, 73, 74], decode)
    assert (own.message, own.offset, own.where()) == (None, 2, "this answer")
    assert own.before == " w70 w71" and own.text == " w72 w73"
    # without a layout or a tokenizer it still says where, and never fails
    assert locate_copy(3, 2, None, [5, 6, 7, 8], None).where() == "this answer"
    assert locate_copy(3, 2, None, [5, 6, 7, 8], None).text == ""


def test_a_tree_round_shows_its_nodes_depth_and_rejected_branches() -> None:
    """The Rounds panel's line of a tree round names its nodes and the accepted depth; `r`
    shows every branch turned down at the fork, set apart, coloured as rejected copies."""
    from tui.transcript import BRANCH_SEP

    tree = dataclasses.replace(
        rnd(0, [(1, "copied"), (8, "corrected")], rejected=(9,), proposed=3, accepted=1),
        source="tree", nodes=12, rows=13, branches=((9,), (4, 1)))
    chain = rnd(1, [(1, "accepted")], proposed=1, accepted=1)
    st = RoundStats()
    st.add(tree)
    st.add(chain)
    lines = round_bars(st, 5, 30).plain.splitlines()
    assert lines[0].endswith("R13 +2 T12 d1") and "T" not in lines[1].split("ms")[-1]
    tr = Transcript(byte_decode)
    tr.add_round(tree)
    assert tr.render(False).plain == "caf!"
    assert tr.render(True).plain == f"caf no{BRANCH_SEP} caf!"
    assert [p.origin for p in tr.pieces] == ["copied", REJECTED_COPY, "corrected"]
    assert tr.rejected_count == 3
