"""Copied from the prompt and repetition (core/bench/copying.py): counts no copy can game."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.bench.copying import copied_share, repetition_share, text_measures

PROMPT = list(range(100, 140))  # 40 distinct tokens


def test_the_prompt_copied_back_is_all_copied_and_a_fresh_answer_none():
    assert copied_share(PROMPT, PROMPT) == 1.0
    assert copied_share(PROMPT, PROMPT[5:30]) == 1.0  # a run of 25 copied tokens
    assert copied_share(PROMPT, list(range(200, 240))) == 0.0
    assert copied_share(PROMPT, []) == 0.0


def test_only_runs_of_eight_or_more_count():
    seven = PROMPT[:7] + [1] * 3
    eight = PROMPT[:8] + [1, 2]
    assert copied_share(PROMPT, seven) == 0.0
    assert copied_share(PROMPT, eight) == pytest.approx(0.8)
    # Two copied runs of 8 with fresh tokens between: 16 of 20.
    two = PROMPT[:8] + [1, 2, 3, 4] + PROMPT[20:28]
    assert copied_share(PROMPT, two) == pytest.approx(16 / 20)


def test_repetition_is_the_share_of_repeated_four_grams():
    assert repetition_share([1, 2, 3, 4, 5, 6]) == 0.0
    loop = [1, 2, 3, 4] * 5  # 17 four-grams, 4 distinct
    assert repetition_share(loop) == pytest.approx(13 / 17)
    assert repetition_share([1, 2, 3]) == 0.0
    m = text_measures(PROMPT, [PROMPT, list(range(200, 240))])
    assert m == {"copied": 0.5, "repetition": 0.0}
    assert text_measures(PROMPT, []) == {"copied": None, "repetition": None}


@given(st.lists(st.integers(0, 5), max_size=60), st.lists(st.integers(0, 5), max_size=60))
def test_shares_are_shares(prompt, answer):
    c, r = copied_share(prompt, answer), repetition_share(answer)
    assert 0.0 <= c <= 1.0 and 0.0 <= r <= 1.0
    assert copied_share(answer, answer) == (1.0 if len(answer) >= 8 else 0.0)


def test_the_benchs_nll_difference_is_marked_where_a_row_copies_more():
    from core.bench.report import nll_cell
    from core.bench.results import BenchReport, BenchResult

    base = BenchResult("target-only", "Target-only", {"mode": "target-only"}, copied=0.12,
                       target_nll=1.0, target_nll_baseline=1.0)
    copier = BenchResult("tv1", "TV=1", {"mode": "speculative"}, copied=0.91, target_nll=0.8,
                         target_nll_baseline=1.0)
    honest = BenchResult("tv0", "TV=0", {"mode": "speculative"}, copied=0.13, target_nll=1.1,
                         target_nll_baseline=1.0)
    report = BenchReport({}, {}, [base, copier, honest])
    assert nll_cell(copier, report) == "-0.200 !"
    assert nll_cell(honest, report) == "+0.100" and nll_cell(base, report) == "+0.000"
