"""Task success: shipped prompts whose answers a program checks, reported beside NLL."""

from __future__ import annotations

import pytest

from core import bench
from core.bench.errors import BenchError
from core.bench.report import report_markdown
from core.bench.tasks import parse_check
from core.settings import Settings

RENAME_PROMPT = bench.load_prompt("code-rename")
GOOD = """Here it is:

```python
def order_total(price, quantity, tax=0.2):
    net = price * quantity
    return round(net * (1 + tax), 2)
```
"""


def test_the_rename_check_wants_every_rename_and_nothing_else():
    check = bench.prompt_check("code-rename")
    assert check is not None and check.kind == "rename"
    assert check(GOOD)
    assert check(GOOD.replace("```\n", ""))  # an answer cut before its closing fence still parses
    assert not check(GOOD.replace("price * quantity", "price * qty"))  # one use left unrenamed
    assert not check(GOOD.replace("def order_total", "def total_cost"))  # the function kept
    assert not check(GOOD.replace("tax=0.2", "tax=0.25"))  # something else changed
    assert not check(GOOD.replace("round(net * (1 + tax), 2)", "round(net * (1 + tax), 2"))
    assert not check("order_total(price, quantity)")  # no code block at all
    assert "\n```\n" not in RENAME_PROMPT.split("```python", 1)[0]  # the prompt's block is first


def test_the_number_check_reads_the_last_number():
    check = bench.prompt_check("math-boxes")
    assert check is not None and check.kind == "number"
    assert check("1462") and check("17 x 86 = 1,462") and check("The answer is 1462.")
    assert not check("1642") and not check("about fourteen hundred") and not check("1462 + 1")
    assert bench.prompt_kind("math-boxes") == "math"
    assert bench.prompt_check("creative-seed-vault") is None


@pytest.mark.parametrize("line, words", [
    ("# check: number many", "needs a number"),
    ("# check: rename a-b", "OLD=NEW"),
    ("# check: rename a=b", "```python block"),
    ("# check: regex .*", "unknown check"),
])  # fmt: skip
def test_a_bad_check_line_is_one_sentence(line, words):
    with pytest.raises(BenchError, match=words):
        parse_check(line, "no code here", "p")


def test_the_protocol_reports_task_success_beside_nll(engine, tiny_pair):
    prompt_ids = tiny_pair.target.tokenizer.encode("count: 1 2 3")
    seen: list[list[int]] = []

    def task(ids: list[int]) -> bool:  # passes seed 0's output only: a rate of one half
        seen.append(ids)
        return len(seen) % 2 == 1

    report = bench.run_protocol(engine, prompt_ids, [Settings(k=2)], tokens=4, seeds=2,
                                invocations=1, warmup=0, traced=False, predict=False,
                                task=task, task_name="number 3")  # fmt: skip
    for r in report.results:
        assert len(r.task_passed) == 2 and r.task_success == 0.5
        assert r.to_dict()["quality"]["task_success"] == 0.5
    assert all(len(ids) == 4 for ids in seen)
    page = report_markdown(report)
    assert "Task success" in page and "(number 3)" in page and "50.0%" in page
    plain = bench.run_protocol(engine, prompt_ids, [Settings(k=2)], tokens=4, seeds=1,
                               invocations=1, warmup=0, traced=False, predict=False)  # fmt: skip
    assert "Task success" not in report_markdown(plain)
    assert all(r.task_success is None for r in plain.results)


def test_the_real_pair_page_is_written_from_the_raw_reports(engine, tiny_pair, tmp_path):
    """docs/benchmarks/real-pair/make_page.py: each sweep row's numbers are the JSON's, and the
    predicted column waits for the H200 curve."""
    import json

    from tests.helpers.scripts import load_script

    make_page = load_script("docs/benchmarks/real-pair/make_page.py", "make_page")
    prompt_ids = tiny_pair.target.tokenizer.encode("count: 1 2 3")
    rows = [Settings(k=2, rule="greedy", temperature=0.0)] + [
        Settings(k=2, rule="mentored", temperature=0.7, tv_budget=tv) for tv in (0.0, 1.0)]
    report = bench.run_protocol(engine, prompt_ids, rows, tokens=6, seeds=1, invocations=1,
                                warmup=0, traced=False, predict=False,
                                task=lambda ids: True, task_name="number 3")  # fmt: skip
    doc = json.loads(report.to_json())
    doc["protocol"].update(prompt={"name": "math-boxes"}, command="specdec-tui bench ...",
                           models={"target": "t", "draft": "d", "vocab_size": 512})  # fmt: skip
    (tmp_path / "math-boxes.json").write_text(json.dumps(doc))
    reports = make_page.load_reports(tmp_path)
    page = make_page.page(reports, None, tmp_path / "no-curve.json", tmp_path)
    full = next(r for r in doc["results"] if r["settings"].get("tv_budget") == 1.0
                and r["settings"]["rule"] == "mentored")  # fmt: skip
    line = next(s for s in page.splitlines() if s.startswith("| math-boxes | 1.00 |"))
    assert f"{full['quality']['target_nll']:.3f}" in line and "100%" in line
    assert "not yet measured" in line
    assert "| math-boxes | T = 0, greedy |" in page and "## Not measured yet" in page
