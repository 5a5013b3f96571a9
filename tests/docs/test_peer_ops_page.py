"""docs/benchmarks/round-overhead.md is peer_ops.py's rendering of its data, number for number,
and the data says what the page claims: ours and mlx-lm's loops made the same greedy tokens,
and our round still syncs the host at most once (issue 28)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers import REPO
from tests.helpers.scripts import load_script

BENCH = REPO / "docs" / "benchmarks"


peer_ops = load_script("docs/benchmarks/peer_ops.py", "bench_peer_ops")
rawdata = __import__("rawdata")  # beside peer_ops.py, which put its folder on sys.path


def test_the_page_is_the_rendering_of_its_data() -> None:
    assert peer_ops.PAGE.read_text() == peer_ops.render_page()


def test_a_changed_count_in_the_data_changes_the_page(tmp_path: Path) -> None:
    data = tmp_path / peer_ops.DATA.name
    shutil.copytree(peer_ops.DATA, data)
    f = data / "after.json.xz"
    doc = rawdata.load_json(f)
    doc["cases"][0]["ours"]["loop_calls"] += 1.0
    rawdata.write_json(f, doc)
    assert peer_ops.render_page(data) != peer_ops.PAGE.read_text()


def test_the_data_holds_what_the_page_says() -> None:
    for name in ("before", "after"):
        doc = rawdata.load_json(peer_ops.DATA / f"{name}.json.xz")
        for case in doc["cases"]:
            assert case["same_tokens"], (name, case["case"])  # the same greedy text
            # at most one a round (a last round with one token to go is a pipelined step)
            assert 0.9 < case["ours"]["syncs"] <= 1.0 == case["mlx_lm"]["syncs"], name
            assert case["ours"]["rounds"] == case["mlx_lm"]["rounds"] > 0
