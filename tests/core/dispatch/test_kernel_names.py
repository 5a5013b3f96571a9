"""The kernel family a round reports per row count (core/dispatch/kernels.py `KernelNames`):
asked of the predictor once per count, and never an error where there is none or it fails."""

from __future__ import annotations

from core.dispatch.kernels import KernelNames


class Counting:
    """A predictor that names each count and counts the questions."""

    def __init__(self, fail_at: int = -1) -> None:
        self.asked: list[int] = []
        self.fail_at = fail_at

    def family(self, rows: int) -> str:
        self.asked.append(rows)
        if rows == self.fail_at:
            raise RuntimeError("no rule for this shape")
        return "qmv" if rows < 8 else "qmm"


def test_each_count_is_asked_once() -> None:
    predictor = Counting()
    names = KernelNames(predictor)
    assert [names(r) for r in (1, 9, 1, 9, 1)] == ["qmv", "qmm", "qmv", "qmm", "qmv"]
    assert predictor.asked == [1, 9]


def test_no_predictor_or_a_failing_one_names_nothing() -> None:
    assert KernelNames(None)(4) == ""
    predictor = Counting(fail_at=3)
    names = KernelNames(predictor)
    assert (names(3), names(3), names(2)) == ("", "", "qmv")  # the control: 2 is named
    assert predictor.asked == [3, 2]  # a failure is remembered, not asked again
