"""What the reading page and the app's reading view compare (core/sweep/reading.py): the
chosen cells and why, per seed target-only's column first, each column marked where its text
first leaves target-only's (by tokens; by characters for an old file without tokens)."""

from __future__ import annotations

from core.sweep.reading import chosen_cells, first_difference, passages
from tests.helpers.reading import MARKUP, sample_sweep


def test_the_chosen_cells_are_the_recommended_the_fastest_and_one_per_tv_step():
    chosen = [(c["id"], roles) for c, roles in chosen_cells(sample_sweep(), 0.7)]
    assert chosen == [  # the TV steps last, ascending
        ("T=0.7 draft-only", ["fastest"]),
        ("T=0.7 fixed-8 TV=0", ["recommended", "TV = 0"]),
        ("T=0.7 cost-aware TV=1", ["TV = 1"]),  # the faster of the two cells at TV 1
    ]
    assert chosen_cells(sample_sweep(), 0.0) == []  # no cell at that temperature


def test_passages_per_seed_with_target_only_first_and_the_divergence_marked():
    found = passages(sample_sweep())
    assert [(p.prompt, p.temperature, p.seed) for p in found] == [("rename", 0.7, 0),
                                                                  ("rename", 0.7, 1)]
    cols = found[0].columns
    assert [c.name for c in cols] == ["target-only", "draft-only", "fixed-8 TV=0",
                                      "cost-aware TV=1"]
    base, draft, tv0, tv1 = cols
    assert base.baseline and base.divergence_text() == "the reference"
    assert tv0.diverge is None and tv0.divergence_text() == "the same text as target-only"
    assert [o for _, o in tv0.tokens][:3] == ["accepted", "accepted", "corrected"]
    assert draft.diverge == 0 and draft.tokens[0] == ("class", "draft")
    assert tv1.diverge == tv1.diverge_at == 3 and tv1.tokens[3] == (MARKUP, "accepted")
    assert tv1.divergence_text() == "leaves target-only's text at token 3"
    assert tv1.other_texts == 1  # seed 0's third invocation wrote another text
    assert tv1.check is False and found[1].columns[3].check is True  # per seed, in seed order
    assert "2.20x" in tv1.numbers and "NLL given up +0.100" in tv1.numbers


def test_target_only_chosen_is_said_on_its_own_column_not_repeated():
    data = sample_sweep()
    data["frontier"]["groups"]["0.7"]["recommended"] = "T=0.7 target-only"
    cols = passages(data)[0].columns
    assert [c.name for c in cols] == ["target-only", "draft-only", "fixed-8 TV=0",
                                      "cost-aware TV=1"]
    assert cols[0].baseline and cols[0].roles == ["recommended"]


def test_a_cell_asked_for_by_id_and_a_seed_it_has_no_text_for():
    found = passages(sample_sweep(), ["T=0.7 fixed-8 TV=1"])
    assert [len(p.columns) for p in found] == [2, 2]
    col = found[0].columns[1]
    assert col.diverge == 5 and col.tokens[5] == (" # copied", "copied")
    assert "copied from the prompt 91%" in col.numbers  # a measure the file carries, shown
    assert found[1].columns[1].missing and found[1].columns[1].divergence_text() == (
        "no text for this seed")
    assert passages(sample_sweep(), ["no such cell"]) == []


def test_an_old_file_without_tokens_is_compared_by_characters():
    data = sample_sweep()
    for row in data["texts"][0]["rows"]:
        del row["texts"]  # saved before the timed texts existed: one text per row
    found = passages(data)
    assert len(found) == 1 and found[0].seed == 0
    tv1 = found[0].columns[3]
    at = len("".join(["def ", "total", "("]))
    assert tv1.unit == "character" and tv1.diverge_at == at
    assert tv1.text == data["texts"][0]["rows"][3]["text"]  # split at the mark, not changed
    assert tv1.tokens[tv1.diverge][0].startswith("<script>")
    assert found[0].columns[2].diverge is None  # TV 0: the same text


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert first_difference("abc", "abd") == 2


def test_a_passed_over_cell_says_why_beside_its_text():
    """The frontier's reason against a cell (core/sweep/frontier.py `exclusion`) is read into
    that cell's numbers, so the page says why the fastest text was not recommended."""
    ids = ["T=0.7 fixed-8 TV=1", "T=0.7 fixed-8 TV=0"]
    cols = {c.cell_id: c for p in passages(sample_sweep(), ids) for c in p.columns}
    assert "not recommended: copies the prompt: 91% against 0%" in cols[
        "T=0.7 fixed-8 TV=1"].numbers
    assert not any(n.startswith("not recommended") for n in cols["T=0.7 fixed-8 TV=0"].numbers)
