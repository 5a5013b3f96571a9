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
                 "--json", str(folder / "s.json")]) == 0
    return json.loads((folder / "s.json").read_text())


def test_each_cell_keeps_its_outputs_and_measures(saved):
    for c in saved["cells"]:
        v = c["per_prompt"]["math-boxes"]
        assert len(v["answer_ids"]) == 2 and len(v["answers"]) == 2 and v["unit"] == "tokens"
        assert all(len(ids) <= 12 for ids in v["answer_ids"]) and len(v["cut"]) == 2
        assert 0.0 <= c["copied"] <= 1.0 and 0.0 <= c["repetition"] <= 1.0
    block = saved["blocks"][0]
    assert block["report"]["protocol"]["prompt"]["ids"]  # the templated prompt, for re-judging


def test_a_saved_sweep_is_judged_again_the_same(saved):
    again = rejudge(saved)
    key = ("id", "copied", "repetition", "task_success", "on_front")
    assert [[c[k] for k in key] for c in again["cells"]] == [[c[k] for k in key]
                                                             for c in saved["cells"]]
    assert again["frontier"] == saved["frontier"]


def test_an_old_file_is_judged_on_words_and_a_new_check(saved):
    """A file from before these measures (no outputs kept per cell, no prompt ids) is judged
    on the words of its first seed's text; a check given replaces the one it ran."""
    from core.bench.tasks import parse_check

    old = json.loads(json.dumps(saved))
    for c in old["cells"]:
        for v in c["per_prompt"].values():
            for k in ("answer_ids", "answers", "cut", "copied", "repetition", "unit"):
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


def test_sweep_check_judges_a_prompt_of_ones_own(tmp_path):
    """--check on the sweep: every prompt's answers judged by it (an inline prompt had none)."""
    out = tmp_path / "c.json"
    assert main(["sweep", *TINY, "--tokens", "4", "--seeds", "1", "--invocations", "1",
                 "--warmup", "0", "--tv", "1", "--k", "2", "--temperatures", "0.7",
                 "--prompt", "Say 42.", "--check", "regex", "^(?!x{99})", "--no-plot",
                 "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["blocks"][0]["check"] == "regex ^(?!x{99})"
    assert all(c["task_success"] == 1.0 for c in doc["cells"])
    assert rejudge(doc)["cells"] == doc["cells"]  # the user's check is found again


# ------------------------------------------------------------------------- the goal (issue)


def test_a_cell_that_copies_the_prompt_is_caught_and_an_honest_one_recommended():
    """A cell whose every text is the prompt copied back (the H200's hybrid TV = 1 cell): its
    NLL given up is negative (the target finds its prompt likely), its task check fails, over
    80% of it is copied, and it is not recommended, with the reason shown; the control, an
    honest cell faster than target-only, is recommended."""
    from core import bench
    from core.bench.protocol import ProtocolConfig
    from core.sweep import SweepGrid, SweepPrompt, SweepRun, run_sweep
    from core.sweep.report import sweep_markdown
    from tests.helpers import copying_engine as fake

    text = bench.load_prompt("math-boxes")
    honest = "17 x 86 = 1462"
    check = bench.prompt_check("math-boxes")
    prompt = SweepPrompt("math-boxes", tuple(fake.encode(text)), text,
                         lambda ids: check(*fake.answer(ids)), check.describe(),
                         (fake.EOS,))
    copier = lambda s: s.draft_source == "hybrid" and s.tv_budget == 1.0  # noqa: E731
    speeds = {("model", 0.0): 0.9, ("model", 1.0): 1.3, ("hybrid", 0.0): 1.1,
              ("hybrid", 1.0): 2.26}
    engine = fake.CopyingEngine(prompt.ids, honest, copier,
                                lambda s: speeds.get((s.draft_source, s.tv_budget), 1.0)
                                if s.mode == "speculative" else 1.0)
    grid = SweepGrid(tvs=(0.0, 1.0), policies=("fixed-8",), sources=("model", "hybrid"),
                     temperatures=(0.7,), draft_only=False)
    config = ProtocolConfig(tokens=len(prompt.ids), seeds=2, invocations=1, warmup=0,
                            traced=False, predict=False, compile_warmup=False)
    run = run_sweep(engine, [prompt], grid, config, decode=fake.decode,
                    run=SweepRun(grid, config, [prompt.name]))
    data = run.to_dict()
    cells = {c["id"]: c for c in data["cells"]}
    bad, good = cells["T=0.7 hybrid fixed-8 TV=1"], cells["T=0.7 fixed-8 TV=1"]
    base = cells["T=0.7 target-only"]
    assert bad["nll_delta"] < 0  # the copy reads as better than target-only's text
    assert bad["task_success"] == 0.0 and base["task_success"] == 1.0
    assert bad["copied"] > 0.8 and bad["copied"] > base["copied"]
    group = data["frontier"]["groups"]["0.7"]
    assert group["recommended"] == good["id"]  # the honest cell, not the fastest
    assert list(group["excluded"]) == [bad["id"]]  # every other cell reads right
    why = group["excluded"][bad["id"]]
    assert why.startswith("copies the prompt: 100% against 0%;")
    assert why.endswith("fails the task more: 0% against 100%")
    assert bad["id"] in group["nll_untrusted"] and good["id"] not in group["nll_untrusted"]
    page = sweep_markdown(data)
    assert f"{bad['id']} not recommended: copies the prompt: 100% against 0%" in page
    assert f"{bad['nll_delta']:.3f} !" in page
    from rich.console import Console

    from core.sweep.report import print_cells

    console = Console(width=80, record=True)
    print_cells(data, console)
    shown = console.export_text()
    assert all(len(line) <= 80 for line in shown.splitlines())
    for word in ("speedup", "min-max", "accept", "NLL +", "TV/tok", "copied", "repeat", "task",
                 "hybrid fixed-8", f"{bad['nll_delta']:.3f} !"):
        assert word in shown, word
    # Judged again from the saved file alone: the same verdicts.
    again = rejudge(json.loads(json.dumps(data)))
    assert again["frontier"] == data["frontier"]

