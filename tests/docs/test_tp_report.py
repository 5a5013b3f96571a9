"""docs/benchmarks/h200/tp_report.py: issue 33's two checks are computed from the raw JSON.

Against the repository's 2026-12-01 pair (barrier-timed comm, no shard step) and against small
hand-made files whose numbers are known, so a check that could not fail would show here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO as ROOT
from tests.helpers.scripts import load_script

SCRIPT = ROOT / "docs" / "benchmarks" / "h200" / "tp_report.py"
OLD = ROOT / "docs" / "benchmarks" / "data" / "h200x2-2026-12-01"


tp = load_script("docs/benchmarks/h200/tp_report.py", "tp_report")


def test_the_barrier_run_of_2026_12_01_misses_the_overhead_goal_and_lacks_the_shard() -> None:
    text, c = tp.render(OLD)
    first = next(o for o in c["overhead"] if o["name"] == "target-only")
    assert first["overhead"] == pytest.approx(1.908, abs=1e-3) and first["met"] is False
    assert c["overhead_met"] is False
    assert c["comm"]["tp2_step_ms"] == pytest.approx(1e3 / 69.5308, rel=1e-4)
    assert c["comm"]["shard_step_ms"] is None and c["comm"]["met"] is None
    assert "comm (timed with barriers)" in text and "comm (priced)" not in text
    assert "(goal: within 20%): not measured" in text


def _report(rows: list[dict[str, Any]], priced: bool) -> dict[str, Any]:
    env = {"sharded": {"comm": "priced", "prices_s": {"up to 4096 B": 2e-5}}} if priced else {}
    return {"environment": env, "protocol": {}, "results": rows}


def test_both_checks_from_hand_made_files(tmp_path: Path) -> None:
    """TP = 2 step 10 ms, its shard alone 8 ms: sharding adds 20% of the step. A traced comm
    of 2.2 ms in 10 ms of rounds (22%) is within 20% of it, 3 ms (30%) is not."""
    phases = {"draft": 0.0, "verify": 7.8, "sample": 0.0, "cache": 0.0, "comm": 2.2, "other": 0.0}
    tp2 = [{"name": "target-only", "decode_tok_s": 100.0, "tracing_overhead": 0.04,
            "traced_ratios": [1.03, 1.05], "phase_ms": phases},
           {"name": "fixed-8", "decode_tok_s": 150.0, "tracing_overhead": 0.12,
            "traced_ratios": [1.12], "phase_ms": None}]
    shard = [{"name": "target-only", "decode_tok_s": 125.0}]
    for name, rows, priced in (("tp2", tp2, True), ("shard", shard, False)):
        (tmp_path / f"{name}.json").write_text(json.dumps(_report(rows, priced)))
    text, c = tp.render(tmp_path)
    k = c["comm"]
    assert (k["tp2_step_ms"], k["shard_step_ms"]) == pytest.approx((10.0, 8.0))
    assert (k["untraced_share"], k["traced_share"]) == pytest.approx((0.2, 0.22))
    assert k["relative_difference"] == pytest.approx(0.1) and k["met"] is True
    assert [o["met"] for o in c["overhead"]] == [True, False] and c["overhead_met"] is False
    assert "comm (priced)" in text and "| up to 4096 B | 20.0 |" in text
    assert k["tp1_step_ms"] is None  # no tp1.json: said, not guessed
    phases["comm"], phases["verify"] = 3.0, 7.0
    (tmp_path / "tp2.json").write_text(json.dumps(_report(tp2, True)))
    _, c = tp.render(tmp_path)
    assert c["comm"]["traced_share"] == pytest.approx(0.3) and c["comm"]["met"] is False


def test_the_command_writes_the_checks_and_refuses_a_missing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "checks.json"
    assert tp.main([str(OLD), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["overhead_met"] is False
    assert "# TP = 2 traced without distorting it" in capsys.readouterr().out
    assert tp.main([str(tmp_path / "nowhere")]) == 2
    assert "is not a folder of tp.sh's JSON files." in capsys.readouterr().err
