"""docs/benchmarks: every generated table and quoted number agrees with the JSON beside it.

docs/benchmarks/render.py renders them; these tests run its check on the committed pages, show
that the check catches a changed number (in the data or in the page), and pin the statistic of
edition 2's corrected table to the medians issue 21 computed by hand.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
ED2 = "data/h200-2026-11-30/"


def _render() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_render", BENCH / "render.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


render = _render()


def test_every_page_agrees_with_its_data() -> None:
    assert render.check(BENCH) == []


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The benchmarks folder's pages and data, copied (the test perturbs the copy)."""
    root = tmp_path / "benchmarks"
    shutil.copytree(BENCH, root, ignore=shutil.ignore_patterns("*.log", "*.csv", "h200", "policy"))
    assert render.check(root) == []
    return root


def test_check_fails_when_a_row_of_the_data_changes(copy: Path) -> None:
    # The hybrid's fastest rewrite request (0.51 s) made the old table print 2.27x; making its
    # slowest one faster moves the median, and every block and value that quotes it must fail.
    f = copy / ED2 / "lookup-rewrite-paragraph-t0.0.json"
    doc = json.loads(f.read_text())
    hybrid = next(r for r in doc["results"] if r["name"] == "hybrid-cost-aware+flags")
    hybrid["e2e_s"] = [x * 0.8 for x in hybrid["e2e_s"]]
    f.write_text(json.dumps(doc))
    problems = render.check(copy)
    assert problems and all(p.startswith("h200-edition2.md: ") for p in problems)
    assert any("lookup-matrix" in p for p in problems)
    assert any("hybrid-cost-aware+flags | ratio" in p for p in problems)
    # Rendering writes the new numbers, after which the check passes again.
    assert render.main(["--root", str(copy)]) == 0
    assert render.check(copy) == []
    assert "1.28x" in (copy / "h200-edition2.md").read_text()  # 1.158 / (1.131 * 0.8)


def test_check_fails_when_a_number_of_a_page_is_edited(copy: Path) -> None:
    page = copy / "h200-edition3.md"
    text = page.read_text()
    edited = re.sub(r"\| 12\.866 s ", "| 12.867 s ", text, count=1)  # target-only's 72B median
    assert edited != text
    page.write_text(edited)
    assert render.main(["--check", "--root", str(copy)]) == 1
    assert any("bench-predicted" in p for p in render.check(copy))


def test_edition2_lookup_table_shows_medians() -> None:
    """Issue 21's hand-computed medians: hybrid 1.02x (rewrite, greedy), 1.37x (code edit,
    T = 0.7), 1.13x (creative, greedy); target-only's median 1.161 s, not its fastest 1.104 s."""
    lines, statistic = render.TABLES["lookup-matrix"](
        [json.loads((BENCH / ED2 / f"lookup-{n}.json").read_text())
         for n in ("code-edit-pasted-t0.0", "code-edit-pasted-t0.7", "rewrite-paragraph-t0.0",
                   "creative-seed-vault-t0.0")])  # fmt: skip
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [c[0] for c in cells][1:] == ["code-edit-pasted, T = 0.7", "rewrite-paragraph, greedy",
                                         "creative-seed-vault, greedy"]  # fmt: skip
    assert cells[0][1].startswith("1.161 s (1.104-1.308)")
    assert [c[-1].split(":")[0] for c in cells] == ["0.87x", "1.37x", "1.02x", "1.13x"]
    assert "median" in statistic


def test_every_table_of_a_page_is_generated() -> None:
    """A Markdown table outside a generated block is a number nothing checks; the few left are
    named here with the reason they are not rendered whole from a JSON."""
    not_from_json = {
        # replays of core/cost/policy.py's arithmetic on recorded costs (replay.py prints them)
        "| Policy | seed 0 | seed 1 | seed 2 | target steps |",
        "| Policy | speedup over target-only, seeds 0-4 | drafted rounds of ~240 |",
        # goals and before/after pairs across calls: each measured ratio is a value marker
        "| Goal | Measured | Met? |",
        "| Goal (issue 7) | Measured (same call) | Met? |",
        "| Improvement | Without | With | Call |",
        # a list of scripts: no numbers
        "| script | what it does |",
    }
    # pages written whole by their own script from raw JSON, and checked by its own test
    whole_pages = {"real-pair.md"}  # real-pair/make_page.py; tests/core/test_bench_tasks.py
    loose = []
    for page in render.pages(BENCH):
        if page.name in whole_pages:
            continue
        text = render.BLOCK.sub("", page.read_text())
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for m in re.finditer(r"^(\|.*\|)\n\|[-|: ]+\|$", text, flags=re.M):
            if m[1] not in not_from_json:
                loose.append(f"{page.relative_to(BENCH)}: {m[1]}")
    assert loose == []
