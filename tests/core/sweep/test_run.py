"""The sweep (issue 30): the Pareto front and the recommendation exactly on recorded cells
(hand-made and hypothesis), the grid, the command end to end on `shape:tiny`, Ctrl+C keeping
the finished blocks, refusing to overwrite, and the goal run on the default pair
(`real_model`). No test asserts a speed: this CPU's speeds mean nothing for speculation.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.cli import main
from core.sweep import (
    SweepError,
    SweepGrid,
    dominates,
    feasible,
    frontier_summary,
    pareto_front,
    parse_policy,
    recommend,
)
from tests.helpers.bench import SHORT_PROMPT, without_default_system


def cell(i: str, speedup: float | None, nll: float | None, task: float | None = None,
         t: float = 0.7) -> dict:
    kind = next((k for k in ("target-only", "draft-only") if k in i), "speculative")
    return {"id": i, "name": i, "kind": kind, "speedup": speedup, "nll_delta": nll,
            "task_success": task, "temperature": t,
            "acceptance": 0.5 if kind == "speculative" else None}


# Recorded cells: the seed's shape (TV 1 fastest and costliest, TV 0 lossless and slow).
RECORDED = [
    cell("target-only", 1.00, 0.00),
    cell("draft-only", 6.00, 0.90, 0.0),
    cell("fixed-8 TV=0", 0.80, 0.01, 1.0),
    cell("fixed-8 TV=0.5", 0.95, 0.05, 1.0),
    cell("fixed-8 TV=0.75", 1.11, 0.12, 0.5),
    cell("fixed-8 TV=1", 1.13, 0.30, 0.5),
    cell("fixed-4 TV=1", 0.86, 0.30, 0.5),  # dominated by fixed-8 TV=1
    cell("fixed-6 TV=1", 1.13, 0.31, 0.5),  # as fast as fixed-8 TV=1, gives up more
    cell("cost-aware TV=0.75", 1.11, 0.12, 0.5),  # ties fixed-8 TV=0.75 exactly
    cell("unscored", 9.0, None),  # no NLL: not on the frontier, never recommended on NLL
]


def test_pareto_front_on_recorded_cells():
    # Fastest first; exact ties both stay (neither dominates the other); TV=0 and TV=0.5 are
    # slower than target-only and give up more: dominated by it.
    assert pareto_front(RECORDED) == [
        "draft-only", "fixed-8 TV=1", "cost-aware TV=0.75", "fixed-8 TV=0.75", "target-only",
    ]
    assert dominates(RECORDED[5], RECORDED[6]) and not dominates(RECORDED[6], RECORDED[5])
    assert not dominates(RECORDED[4], RECORDED[8]) and not dominates(RECORDED[8], RECORDED[4])
    assert pareto_front([]) == []
    assert pareto_front([cell("a", None, 0.1)]) == []


def test_recommendation_on_recorded_cells():
    name = lambda c: c["id"] if c else None  # noqa: E731
    assert name(recommend(RECORDED, max_nll_delta=0.0)) == "target-only"
    assert name(recommend(RECORDED, max_nll_delta=0.12)) == "cost-aware TV=0.75"  # tie: by id
    assert name(recommend(RECORDED, max_nll_delta=0.3)) == "fixed-8 TV=1"  # not fixed-6: costlier
    # Draft-only is recommended only when asked for.
    assert name(recommend(RECORDED, max_nll_delta=1.0)) == "fixed-8 TV=1"
    assert name(recommend(RECORDED, max_nll_delta=1.0, allow=["draft-only"])) == "draft-only"
    # No bound: the fastest measured cell, an unscored one included.
    assert name(recommend(RECORDED)) == "unscored"
    # Task bound: the cells without a task success (target-only, unscored) cannot show it.
    assert name(recommend(RECORDED, min_task=1.0)) == "fixed-8 TV=0.5"
    assert name(recommend(RECORDED, max_nll_delta=0.2, min_task=0.5)) == "cost-aware TV=0.75"
    assert recommend(RECORDED, max_nll_delta=-0.1) is None
    assert not feasible(cell("x", None, 0.0), None, None)


def test_frontier_summary_is_per_temperature_and_says_why_none():
    cells = [cell("a", 1.0, 0.0, t=0.0), cell("b", 2.0, 0.0, t=0.0), cell("c", 3.0, 0.5, t=0.7),
             cell("d", 1.0, 0.0, t=0.7)]
    s = frontier_summary(cells, max_nll_delta=0.1)
    assert s["groups"]["0"]["front"] == ["b"] and s["groups"]["0"]["recommended"] == "b"
    assert s["groups"]["0.7"]["front"] == ["c", "d"]
    assert s["groups"]["0.7"]["recommended"] == "d"
    none = frontier_summary(cells, min_task=0.5)["groups"]["0"]
    assert none["recommended"] is None and "no prompt of the sweep has a check" in none["why_none"]
    tight = frontier_summary(cells, max_nll_delta=-1)["groups"]["0.7"]
    assert tight["why_none"] == ("no cell reads right (the default bounds against target-only) "
                                 "and an NLL given up of at most -1.")
    assert tight["excluded"] == {"c": "gives up +0.500 nats/token, over -1",
                                 "d": "gives up +0.000 nats/token, over -1"}


finite = st.floats(min_value=-2, max_value=8, allow_nan=False, allow_infinity=False)
cells_st = st.lists(
    st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0]) | finite, st.sampled_from([0.0, 0.1]) | finite,
              st.none() | st.sampled_from([0.0, 0.5, 1.0])),
    min_size=1, max_size=12,
).map(lambda xs: [cell(f"c{i}", s, n, t) for i, (s, n, t) in enumerate(xs)])


@settings(max_examples=150, deadline=None)
@given(cells_st, st.none() | finite, st.none() | st.sampled_from([0.0, 0.5, 1.0]))
def test_front_and_recommendation_properties(cells, bound, task):
    front = set(pareto_front(cells))
    by_id = {c["id"]: c for c in cells}
    for c in cells:  # every cell off the front is dominated by one on it; none on it is
        if c["id"] in front:
            assert not any(dominates(o, c) for o in cells)
        else:
            assert any(dominates(by_id[f], c) for f in front)
    rec = recommend(cells, bound, task)
    ok = [c for c in cells if feasible(c, bound, task)]
    if rec is None:
        assert ok == []
        return
    assert feasible(rec, bound, task)
    assert all(c["speedup"] <= rec["speedup"] for c in ok)  # the fastest within the bounds
    if bound is not None and task is None:
        assert rec["id"] in front  # the NLL bound alone answers on the front


# --------------------------------------------------------------------------- the grid


def test_grid_cells_and_greedy_collapse():
    g = SweepGrid(tvs=(0.0, 0.5, 1.0), policies=("fixed-4", "cost-aware-16"),
                  temperatures=(0.0, 0.7))
    greedy = [c.name for c in g.cells(0.0)]
    assert greedy == ["target-only", "draft-only", "fixed-4 greedy", "cost-aware-16 greedy"]
    sampled = g.cells(0.7)
    assert [c.name for c in sampled][:4] == ["target-only", "draft-only", "fixed-4 TV=0",
                                             "fixed-4 TV=0.5"]
    assert len(sampled) == 2 + 2 * 3
    ca = sampled[-1]
    assert (ca.settings.policy, ca.settings.k_max, ca.settings.tv_budget) == ("cost-aware", 16, 1.0)
    assert ca.id == "T=0.7 cost-aware-16 TV=1" and ca.settings.temperature == 0.7
    assert parse_policy("fixed-8") == {"policy": "fixed", "k": 8}
    lookup = SweepGrid(tvs=(1.0,), policies=("fixed-4",), sources=("lookup",), draft_only=False)
    assert [c.name for c in lookup.cells(0.7)] == ["target-only", "lookup fixed-4 TV=1"]


@pytest.mark.parametrize("kw, words", [
    ({"tvs": (1.5,)}, "a TV budget is between 0 and 1"),
    ({"policies": ("fixed",)}, "is not a policy"),
    ({"policies": ("fixed-99",)}, "k must be between 1 and 32"),
    ({"sources": ("nowhere",)}, "not a draft source"),
    ({"temperatures": ()}, "The grid is empty"),
])
def test_grid_refuses_in_one_sentence(kw, words):
    with pytest.raises(SweepError, match=words):
        SweepGrid(**kw)


# --------------------------------------------------------------------------- the command

TINY = ["--target", "shape:tiny", "--draft", "shape:tiny-draft"]


def _sweep(tmp_path: Path, *extra: str, name: str = "s") -> int:
    return main(["sweep", *TINY, "--tokens", "4", "--seeds", "2", "--invocations", "1",
                 "--warmup", "0", "--tv", "0,1", "--k", "2", "--temperatures", "0,0.7",
                 "--prompt-name", "math-boxes", "--prompt-tokens", "48", "--no-plot",
                 "--json", str(tmp_path / f"{name}.json"), "--markdown",
                 str(tmp_path / f"{name}.md"), "--csv", str(tmp_path / f"{name}.csv"),
                 *extra])


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    """One tiny sweep for the tests that read its files (a CPU sweep costs seconds here)."""
    folder = tmp_path_factory.mktemp("sweep")
    assert _sweep(folder) == 0
    return folder


def test_sweep_cli_end_to_end_on_tiny(tiny_sweep):
    tmp_path = tiny_sweep
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["complete"] and doc["blocks_done"] == doc["blocks_planned"] == 2
    ids = [c["id"] for c in doc["cells"]]
    assert ids == ["T=0 target-only", "T=0 draft-only", "T=0 fixed-2 greedy",
                   "T=0.7 target-only", "T=0.7 draft-only", "T=0.7 fixed-2 TV=0",
                   "T=0.7 fixed-2 TV=1"]
    cells = {c["id"]: c for c in doc["cells"]}
    tv1 = cells["T=0.7 fixed-2 TV=1"]
    assert tv1["acceptance"] == 1.0 and set(tv1["per_position_acceptance"]) == {1.0}
    assert cells["T=0.7 target-only"]["nll_delta"] == 0.0
    assert cells["T=0 fixed-2 greedy"]["per_prompt"]["math-boxes"]["greedy_match"] is True
    for c in doc["cells"]:  # paired ratios: one per timed request, a range around them
        assert c["speedup"] > 0 and c["speedup_min"] <= c["speedup_max"]
        assert c["task_outputs"] == 2 and c["task_success"] in (0.0, 0.5, 1.0)  # a checked prompt
        assert c["apply"]["temperature"] == c["temperature"]
    for t, group in doc["frontier"]["groups"].items():
        assert group["front"] == pareto_front([c for c in doc["cells"]
                                               if f"{c['temperature']:g}" == t])
        assert all(cells[i]["on_front"] for i in group["front"])
    # Provenance: models by identity, the machine, MLX, the command.
    assert doc["models"]["identities"]["target"]["shape"] == "tiny"
    assert doc["environment"]["backend"] == "cpu" and doc["environment"]["mlx"]
    assert doc["command"].startswith("specdec-tui sweep")
    md = (tmp_path / "s.md").read_text()
    assert "![the frontier: speed against NLL given up](s.svg)" in md
    assert "### math-boxes, T = 0.7 (seed 0)" in md and "| fixed-2 TV=1 |" in md
    svg = ET.fromstring((tmp_path / "s.svg").read_text())
    circles = [e for e in svg.iter() if e.tag.endswith("circle")]
    assert len(circles) >= len(doc["cells"])
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * len(doc["cells"])  # header, all-prompt rows, per-prompt rows
    from core.sweep.last import read_sweep

    assert read_sweep()["cells"] == doc["cells"]  # the app's copy (`w`)
    # Every timed text, kept once (in `texts`, not again in the blocks' reports): per row,
    # one entry per seed with its ids, origins and each token's text.
    assert all("texts" not in r for b in doc["blocks"] for r in b["report"]["results"])
    block = next(b for b in doc["texts"] if b["temperature"] == 0.7)
    assert block["baseline"] == "target-only"  # rows are named as the cells (`name`)
    for row in block["rows"]:
        assert [t["seed"] for t in row["texts"]] == [0, 1]
        for t in row["texts"]:
            assert len(t["ids"]) == len(t["origins"]) == len(t["pieces"]) == 4
        assert "".join(row["texts"][0]["pieces"]) == row["text"]
    rows = {r["name"]: r for r in block["rows"]}
    # ... and the reading page beside the JSON, from the same dict
    from core.sweep.reading_page import reading_html

    assert (tmp_path / "s.reading.html").read_text() == reading_html(doc)
    assert "### math-boxes, T = 0.7, seed 1" in (tmp_path / "s.reading.md").read_text()
    tv1_origins = rows["fixed-2 TV=1"]["texts"][0]["origins"]  # the last token may be the
    assert "a" in tv1_origins and set(tv1_origins) <= set("abt")  # target's: no room to draft
    assert set(rows["target-only"]["texts"][1]["origins"]) == {"t"}


def test_pooled_acceptance_over_prompts_is_exact():
    """Two prompts' rounds pooled: acceptance is accepted over proposed of both, position i's
    rate hits over tries of both; not the mean of the two rates."""
    from core.sweep.run import aggregate

    a = {"speedup": 2.0, "positions": {"tries": [4, 2], "hits": [2, 1], "rounds": 4,
                                       "proposed": 8, "accepted": 3}, "task_passed": [True]}
    b = {"speedup": 0.5, "positions": {"tries": [1], "hits": [1], "rounds": 1, "proposed": 2,
                                       "accepted": 2}, "task_passed": [False, False]}
    c = aggregate({"id": "x", "kind": "speculative"}, {"p": a, "q": b})
    assert c["acceptance"] == 5 / 10 and c["per_position_acceptance"] == [3 / 5, 1 / 2]
    assert c["speedup"] == pytest.approx(1.0)  # geometric mean of 2x and 0.5x
    assert c["task_success"] == 1 / 3 and c["task_outputs"] == 3


def test_merging_the_calls_of_one_sweep_gives_its_cells(tiny_sweep):
    """A GPU sweep split over calls (here: by temperature) merges back into the same cells."""
    from core.sweep.run import merge_sweeps

    doc = json.loads((tiny_sweep / "s.json").read_text())
    parts = [{**doc, "cells": [c for c in doc["cells"] if c["temperature"] == t],
              "grid": {**doc["grid"], "temperatures": [t]}} for t in (0.0, 0.7)]
    merged = merge_sweeps(parts)
    key = ("id", "speedup", "speedup_min", "speedup_max", "acceptance",
           "per_position_acceptance", "nll_delta", "mean_tv", "task_success", "on_front")
    assert [[c[k] for k in key] for c in merged["cells"]] == [[c[k] for k in key]
                                                              for c in doc["cells"]]
    assert merged["frontier"] == doc["frontier"] and merged["grid"]["temperatures"] == [0.0, 0.7]
    other = {**doc, "protocol": {**doc["protocol"], "tokens": 99}}
    with pytest.raises(SweepError, match="different models or protocols"):
        merge_sweeps([doc, other])


def test_the_real_pair_page_renders_a_sweep_without_machine_paths(tiny_sweep):
    """make_page's sweep section: the cells' numbers, the predicted 7B column apart from the
    measured ones, and a command whose absolute paths are cut to file names."""
    from tests.helpers.scripts import load_script

    make_page = load_script("docs/benchmarks/real-pair/make_page.py", "make_page")
    doc = json.loads((tiny_sweep / "s.json").read_text())
    doc["commands"] = ["specdec-tui sweep --target /home/someone/models/t.gguf --tv 0,1"]
    curves = [(label, c) for label, c in make_page.big_curves() if label == "7B"]
    assert curves, "the 7B curve (docs/benchmarks/data/h200-calibrate.json.xz) is missing"
    text = "\n".join(make_page.sweep_section(doc, curves, "f.svg"))
    assert "| measured speedup (min-max) |" in text and "| predicted, 7B target |" in text
    tv1 = next(c for c in doc["cells"] if c["id"] == "T=0.7 fixed-2 TV=1")
    line = next(x for x in text.splitlines() if "| 0.7 | fixed-2 TV=1 |" in x)
    predicted = make_page.predicted_cell(tv1, curves[0][1])
    assert predicted is not None and f"{predicted:.2f}x" in line
    assert f"{tv1['nll_delta']:+.3f}" in line
    assert "/home/someone" not in text and "--target t.gguf" in text
    assert "![speed against NLL given up, measured on" in text


def test_sweep_refuses_to_overwrite_without_force(tmp_path, capsys):
    (tmp_path / "s.svg").write_text("old")
    assert _sweep(tmp_path) == 2
    err = capsys.readouterr().err
    assert "s.svg (the SVG beside --markdown) already exists; pass --force to replace it." in err
    assert not (tmp_path / "s.json").exists()  # refused before anything ran


def test_the_reading_page_is_an_output_like_the_others(tmp_path, capsys):
    """Beside --json by default: an existing page is refused before anything runs, and
    --no-reading leaves it out."""
    (tmp_path / "s.reading.html").write_text("old")
    assert _sweep(tmp_path) == 2
    assert ("s.reading.html (the reading page beside --json) already exists"
            in capsys.readouterr().err)
    assert not (tmp_path / "s.json").exists()
    assert _sweep(tmp_path, "--no-reading") == 0
    assert (tmp_path / "s.reading.html").read_text() == "old"
    assert not (tmp_path / "s.reading.md").exists()


def test_sweep_outputs_follow_the_one_output_rule(tmp_path, capsys, monkeypatch):
    """Issue 32: the sweep checks its files as bench, calibrate and export do (core/io/atomic.py),
    before the models load: a device is refused even with --force, a link is written through."""
    import core.models

    monkeypatch.setattr(core.models, "load_pair", lambda *a, **k: pytest.fail("models loaded"))
    argv = ["sweep", *TINY, "--prompt-name", "math-boxes", "--no-plot"]
    assert main([*argv, "--json", "/dev/null", "--force"]) == 2
    assert "--json /dev/null is a character device" in capsys.readouterr().err
    assert main([*argv, "--csv", "-"]) == 2
    assert "--csv cannot go to stdout" in capsys.readouterr().err
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert main(["sweep", "--target", str(model), "--prompt-name", "math-boxes",
                 "--json", str(model), "--force"]) == 2
    assert "is the target model this command reads" in capsys.readouterr().err
    assert model.read_bytes() == b"GGUF"


def test_ctrl_c_keeps_the_finished_blocks(tmp_path, monkeypatch, capsys):
    import core.sweep.run as run_mod

    real, calls = run_mod.run_protocol, []

    def second_interrupted(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(run_mod, "run_protocol", second_interrupted)
    assert _sweep(tmp_path, "--max-nll-delta", "0") == 130
    doc = json.loads((tmp_path / "s.json").read_text())
    assert not doc["complete"] and doc["blocks_done"] == 1 and doc["blocks_planned"] == 2
    assert {c["temperature"] for c in doc["cells"]} == {0.0}  # the greedy block finished
    assert doc["frontier"]["groups"]["0"]["recommended"] is not None
    assert "**Partial**: 1 of 2 blocks" in (tmp_path / "s.md").read_text()
    assert "interrupted: 1 finished block(s) of 2 kept" in capsys.readouterr().err


def test_sweep_bad_flags_are_one_sentence(tmp_path, capsys):
    assert main(["sweep", *TINY, "--k", "4,x"]) == 2
    assert "--k 4,x: give whole numbers" in capsys.readouterr().err
    assert main(["sweep", *TINY, "--prompt-name", "nope"]) == 2
    assert "There is no shipped prompt named 'nope'" in capsys.readouterr().err
    assert main(["sweep", *TINY, "--min-task", "2"]) == 2
    assert "--min-task is a share between 0 and 1" in capsys.readouterr().err
    assert main(["sweep", *TINY, "--temperatures", "0.7,inf"]) == 2
    assert "--temperatures: 'inf' is not a finite number." in capsys.readouterr().err


# --------------------------------------------------------------------------- the goal run


@pytest.mark.real_model
def test_goal_run_on_the_default_pair(tmp_path, default_pair, monkeypatch):
    """Issue 30's goal: 2 TV x 2 k on the default pair, 16 tokens, 1 seed, under 3 minutes
    on this CPU, writing JSON, Markdown and the frontier picture.

    A one-word prompt (tests.helpers.bench.SHORT_PROMPT) and no warm-up, as the bench's own
    real-model test: this CPU prefills at about a decode step a token, and the creative
    prompt's ~300 tokens cost minutes alone; the goal fixes the grid, tokens and seeds, not
    the prompt. For the same reason the pair's chat template is used without its default
    system message (tests.helpers.bench.without_default_system): the prompt is 11 tokens, not
    32, in each of the cells' prefills (two per speculative cell) and the NLL scoring. The
    pair is loaded before the clock starts, as in a full run, where an earlier test loaded it.
    Measured 2026-12-01 on the shared 2-core machine at load 12: 9 min of wall time, 1 min 48 s
    of CPU time. The bound is on this process's CPU time (every thread's), which the other
    jobs on a shared machine do not inflate; the wall time is in the message."""
    without_default_system(default_pair, monkeypatch)  # the pair the sweep loads (conftest)
    t0, c0 = time.monotonic(), time.process_time()
    rc = main(["sweep", "--tv", "0,1", "--k", "4,8", "--tokens", "16", "--seeds", "1",
               "--invocations", "1", "--warmup", "0", "--no-plot",
               "--prompt", SHORT_PROMPT,
               "--json", str(tmp_path / "g.json"), "--markdown", str(tmp_path / "g.md")])
    took, cpu = time.monotonic() - t0, time.process_time() - c0
    assert rc == 0
    assert cpu < 180, f"the goal run took {cpu:.0f} s of CPU time ({took:.0f} s of wall time)"
    doc = json.loads((tmp_path / "g.json").read_text())
    assert len(doc["cells"]) == 2 + 4 and doc["complete"]
    assert doc["models"]["identities"]["target"]["sha256"]
    assert (tmp_path / "g.svg").read_text().startswith("<svg")
    assert "## Texts side by side" in (tmp_path / "g.md").read_text()


@pytest.mark.parametrize(
    ("flag", "value", "sentence"),
    [("--tokens", "0", "--tokens must be at least 1, got 0."),
     ("--seeds", "0", "--seeds must be at least 1, got 0."),
     ("--warmup", "-1", "--warmup must be at least 0, got -1.")],
)
def test_sweep_refuses_bad_counts_as_the_bench_does(flag, value, sentence, capsys, monkeypatch):
    """The sweep's counts go through the bench's check_counts (core/bench/flags.py): the same
    sentence, exit 2, and nothing loaded."""
    import core.models

    monkeypatch.setattr(core.models, "load_pair", lambda *a, **k: pytest.fail("models loaded"))
    argv = ["sweep", *TINY, "--prompt-name", "math-boxes", "--no-plot", flag, value]
    assert main(argv) == 2
    assert sentence in capsys.readouterr().err
