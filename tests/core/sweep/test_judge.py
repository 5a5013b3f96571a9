"""Judging a sweep's texts (core/sweep/judge.py): copied, repeated and the task, live and again
from a saved file without a re-run."""

from __future__ import annotations

import json

import pytest

from core.cli import main
from core.sweep.judge import rejudge

TINY = ["--target", "shape:tiny", "--draft", "shape:tiny-draft"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("judge")
    assert main(["sweep", *TINY, "--tokens", "12", "--seeds", "2", "--invocations", "1",
                 "--warmup", "0", "--tv", "1", "--k", "2", "--temperatures", "0.7",
                 "--prompt-name", "math-boxes", "--prompt-tokens", "48", "--no-plot",
                 "--json", str(folder / "s.json")]) == 0  # fmt: skip
    return json.loads((folder / "s.json").read_text())


def test_each_cell_keeps_its_outputs_and_measures(saved):
    for c in saved["cells"]:
        v = c["per_prompt"]["math-boxes"]
        assert len(v["output_ids"]) == 2 and len(v["answers"]) == 2 and v["unit"] == "tokens"
        assert 0.0 <= c["copied"] <= 1.0 and 0.0 <= c["repetition"] <= 1.0
    block = saved["blocks"][0]
    assert block["report"]["protocol"]["prompt"]["ids"]  # the templated prompt, for re-judging


def test_a_saved_sweep_is_judged_again_the_same(saved):
    again = rejudge(saved)
    key = ("id", "copied", "repetition", "task_success", "on_front")
    assert [[c[k] for k in key] for c in again["cells"]] == [[c[k] for k in key]
                                                             for c in saved["cells"]]  # fmt: skip
    assert again["frontier"] == saved["frontier"]


def test_an_old_file_is_judged_on_words_and_a_new_check(saved):
    """A file from before these measures (no outputs kept per cell, no prompt ids) is judged
    on the words of its first seed's text; a check given replaces the one it ran."""
    from core.bench.tasks import parse_check

    old = json.loads(json.dumps(saved))
    for c in old["cells"]:
        for v in c["per_prompt"].values():
            for k in ("output_ids", "answers", "copied", "repetition", "unit"):
                v.pop(k, None)
        c.pop("copied"), c.pop("repetition")
    brief = "A warehouse has 17 shelves and each shelf holds 86 boxes; how many boxes?"
    for b in old["blocks"]:
        b["report"]["protocol"]["prompt"].pop("ids")
        b["report"]["protocol"]["prompt"]["text"] = brief
        for r in b["report"]["results"]:
            r["sample_output"]["text"] = brief
    again = rejudge(old, {"math-boxes": parse_check("contains warehouse", "")})
    for c in again["cells"]:
        v = c["per_prompt"]["math-boxes"]
        assert v["unit"] == "words" and c["copied"] == 1.0  # every text is the prompt here
        assert v["task_passed"] == [True] and c["task_success"] == 1.0
