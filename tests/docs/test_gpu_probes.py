"""The GPU probes (docs/benchmarks/h200/rare_round.py, round_autopsy.py, step_ab.py...) run end
end on the CPU's tiny random shapes, so a change to the engine's rounds cannot leave them
broken until the next lent GPU finds out (their numbers here mean nothing: CPU, random
weights). Each writes the JSON that render.py's tables read.

Their prompt is code-rename (~100 tokens), not a longer one: every request prefills it afresh,
and on this CPU a prefill row of the tiny shapes costs about what a decode step does (step_ab's
60 prefills of rewrite-paragraph were 6 of its 11 s); it still repeats itself enough for the
lookup to copy (step_ab's lookup rounds are asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs" / "benchmarks" / "h200"


def _run(script: str, out: Path, **env: str) -> dict:
    e = {**os.environ, "TARGET": "shape:tiny", **env}
    p = subprocess.run([sys.executable, str(H200 / script), str(out)], cwd=ROOT, env=e,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(out.read_text())


def _rows(script: str, out: Path, rows: tuple[str, ...], **env: str) -> tuple[dict, dict]:
    """A probe's JSON and its requests by row (run in `rows`' order), exactly those rows."""
    doc = _run(script, out, ROWS=" ".join(rows), **env)
    reqs = {r["row"]: r for r in doc["requests"]}
    assert set(reqs) == set(rows)
    return doc, reqs


def test_rare_round_times_rounds_after_each_stretch(tmp_path: Path) -> None:
    doc = _run("rare_round.py", tmp_path / "rr.json", REPS="1", STRETCHES="0 4", ROWS="3 5",
               GROW="1")
    untraced = [t for t in doc["trials"] if not t["traced"]]
    assert {(t["T"], t["R"], t["stretch"]) for t in untraced} == {
        (t, r, s) for t in (0.0, 0.7) for r in (3, 5) for s in (0, 4)}
    assert all(t["rows"] == t["R"] and t["round_s"] > 0 and t["after_s"] for t in untraced)
    assert all(len(t["steps_s"]) == t["stretch"] for t in untraced)
    assert all(set(t["phases"]) >= {"draft", "verify", "sample"} for t in doc["trials"]
               if t["traced"])


def test_round_autopsy_clocks_every_event_of_the_benchs_requests(tmp_path: Path) -> None:
    doc, reqs = _rows("round_autopsy.py", tmp_path / "ra.json", ("target-only", "lookup"),
                      SEEDS="1", TOKENS="24", PROMPT="code-rename")
    for r in reqs.values():
        assert r["tokens"] == 24 and sum(e["tokens"] for e in r["events"]) == 24
        assert r["e2e_s"] >= sum(e["gap_ms"] for e in r["events"]) / 1e3 * 0.99
    assert reqs["lookup"]["calls_ms"]["_plan"]  # the engine's own calls were clocked


def test_step_split_clocks_each_plain_steps_host_pieces(tmp_path: Path) -> None:
    doc, reqs = _rows("step_split.py", tmp_path / "ss.json", ("target-only", "lookup"),
                      SEEDS="1", TOKENS="20", PROMPT="code-rename")
    for r in reqs.values():
        assert r["steps"], r["row"]
        for x in r["steps"]:
            pieces = sum(x[k] for k in ("build", "queue", "plan", "consumer"))
            assert x["gap"] > 0 and abs(x["rest"] - (x["gap"] - pieces)) < 1e-9
    assert all(x["plan"] == 0.0 for x in reqs["target-only"]["steps"])  # target-only plans nothing
    assert any(x["plan"] > 0.0 for x in reqs["lookup"]["steps"])
    assert set(doc["summary"]) == {"target-only", "lookup"}
    for r in reqs.values():  # what a request's loop did: its stretches, rounds and plans
        assert r["tokens"] == 20 and r["stretches"] >= 1 and r["excess"] > 0
        assert r["drafting_plans"] == r["rounds"] and r["restarts"] == 0  # none refuted
    assert reqs["target-only"]["stretches"] == 1 and reqs["target-only"]["rounds"] == 0


def test_forward_split_times_each_mode_and_row_count(tmp_path: Path) -> None:
    doc = _run("forward_split.py", tmp_path / "fs.json", ROWS="1 3", MODES="auto fused",
               REPEATS="1", CHAIN="2", CONTEXT="16")
    assert set(doc["ms"]) == {"auto", "fused"}
    for by_r in doc["ms"].values():
        assert set(by_r) == {"1", "3"}
        for tab in by_r.values():
            assert all(len(tab[k]) == 1 and tab[k][0] > 0 for k in ("build", "eval", "chain"))


def test_step_ab_runs_every_part_and_pairs_its_arms_per_seed(tmp_path: Path) -> None:
    """docs/benchmarks/h200/step_ab.py (issue 56's A/B, not run on a GPU yet): every part, its
    arms per seed, the compiled arms really compiled and the eager ones ran eager."""
    tiny = "shape:tiny shape:tiny-draft"
    doc = _run("step_ab.py", tmp_path / "ab.json", TARGETS="shape:tiny", PAIR=tiny,
               LOOKUP_PAIR=tiny, SEEDS="2", TOKENS="32", CHAIN="2", PROMPT="code-rename",
               PROMPT_LOOKUP="code-rename")
    target = doc["parts"]["target"]["shape:tiny"]
    assert {(r["arm"], r["seed"]) for r in target["requests"]} == {
        (a, s) for a in ("eager", "compiled", "mlx-lm") for s in (0, 1)}
    assert all(r["step"] == r["arm"] for r in target["requests"] if r["arm"] != "mlx-lm")
    assert len(target["compiled/mlx-lm"]["per_seed"]) == 2
    pair = doc["parts"]["pair"]
    assert len(pair["step ms draft/target compiled"]["per_seed"]) == 2
    assert len(pair["fixed-8-tv0.5/target-only compiled"]["per_seed"]) == 2
    lookup = doc["parts"]["lookup"]
    assert {r["step"] for r in lookup["requests"]} == {"eager", "compiled"}
    for step in ("eager", "compiled"):  # the lookup copied: its rounds were priced
        assert lookup[f"lookup round in plain steps {step}"] is not None, step
