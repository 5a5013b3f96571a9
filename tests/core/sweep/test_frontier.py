"""The recommendation reads right (core/sweep/frontier.py): the default bounds against
target-only, and the reason each excluded cell is excluded."""

from __future__ import annotations

from core.sweep.frontier import exclusion, frontier_summary, nll_untrusted, recommend


def c(i: str, speedup: float, nll: float, *, kind: str = "speculative", task: float | None = 1.0,
      copied: float | None = 0.12, rep: float | None = 0.05, **extra: object) -> dict:
    return {"id": i, "name": i, "kind": kind, "speedup": speedup, "nll_delta": nll,
            "task_success": task, "copied": copied, "repetition": rep, "temperature": 0.7,
            "acceptance": None if kind != "speculative" else 0.8, **extra}


BASE = c("target-only", 1.0, 0.0, kind="target-only")
CELLS = [
    BASE,
    c("draft-only", 6.0, 0.9, kind="draft-only"),
    c("copier", 2.26, -0.207, copied=0.91, task=0.0),
    c("looper", 2.0, 0.05, rep=0.40),
    c("wrong", 1.9, 0.01, task=0.5),
    c("stopped", 1.8, 0.0, acceptance=None, fallback_reason="the draft's vocabulary differs"),
    c("honest", 1.3, 0.05),
]


def test_only_what_reads_right_is_recommended_and_each_exclusion_says_why():
    assert recommend(CELLS)["id"] == "honest"
    why = frontier_summary(CELLS)["groups"]["0.7"]["excluded"]
    assert why == {
        "draft-only": "draft-only: the draft's text, not the target's",
        "copier": "copies the prompt: 91% against 12%; fails the task more: 0% against 100%",
        "looper": "repeats itself: 40% of its 4-grams against 5%",
        "wrong": "fails the task more: 50% against 100%",
        "stopped": "stops speculating: the draft's vocabulary differs",
    }
    assert frontier_summary(CELLS)["groups"]["0.7"]["nll_untrusted"] == ["copier"]


def test_the_user_may_lift_a_bound_or_widen_the_margin():
    assert recommend(CELLS, allow=["draft-only"])["id"] == "draft-only"
    assert recommend(CELLS, allow=["repeats"])["id"] == "looper"
    assert recommend(CELLS, allow=["worse-task"])["id"] == "wrong"
    assert recommend(CELLS, margin=0.4)["id"] == "looper"  # 40% is within 5% + 40%
    assert recommend(CELLS, allow=["copies"])["id"] == "honest"  # the copy fails its task too
    assert recommend(CELLS, allow=["copies", "worse-task"])["id"] == "copier"
    assert recommend(CELLS, allow=["no-speculation"])["id"] == "stopped"
    # The user's own bounds stay on top of the default ones.
    assert recommend(CELLS, max_nll_delta=0.01)["id"] == "target-only"


def test_a_cell_within_the_margin_or_without_the_measures_is_not_excluded_for_them():
    assert exclusion(c("x", 2.0, 0.0, copied=0.21), BASE) is None  # 21% <= 12% + 10%
    assert exclusion(c("x", 2.0, 0.0, copied=None, rep=None, task=None), BASE) is None
    assert exclusion(c("x", 2.0, 0.0, copied=0.9), None) is None  # no target-only to compare
    assert not nll_untrusted(c("x", 2.0, 0.0, copied=0.13), BASE)  # within the tolerance
    assert nll_untrusted(c("x", 2.0, 0.0, copied=0.2), BASE)


def test_the_sweeps_bound_flags_are_one_sentence(capsys, no_load):
    from core.cli import main

    tiny = ["sweep", "--target", "shape:tiny", "--draft", "shape:tiny-draft", "--no-plot"]
    assert main([*tiny, "--allow", "copies,everything"]) == 2
    assert "--allow 'everything' is not one of worse-task, copies" in capsys.readouterr().err
    assert main([*tiny, "--margin", "1.5"]) == 2
    assert "--margin is a share between 0 and 1, got 1.5." in capsys.readouterr().err
    assert no_load == []
