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


@pytest.mark.parametrize("line, words", [
    ("# check: number many", "needs a number"),
    ("# check: rename a-b", "OLD=NEW"),
    ("# check: rename a=b", "```python block"),
    ("# check: rhyme .*", "unknown check"),
    ("# check: regex (", "does not compile"),
    ("# check: param f x", "FUNC NAME=DEFAULT"),
    ("# check: roles A=b", "two characters"),
    ("# check: changed", "needs an argument"),
])
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
                                task=task, task_name="number 3")
    for r in report.results:
        assert len(r.task_passed) == 2 and r.task_success == 0.5
        assert r.to_dict()["quality"]["task_success"] == 0.5
    assert all(len(ids) == 4 for ids in seen)
    page = report_markdown(report)
    assert "Task success" in page and "(number 3)" in page and "50.0%" in page
    plain = bench.run_protocol(engine, prompt_ids, [Settings(k=2)], tokens=4, seeds=1,
                               invocations=1, warmup=0, traced=False, predict=False)
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
                                task=lambda ids: True, task_name="number 3")
    doc = json.loads(report.to_json())
    doc["protocol"].update(prompt={"name": "math-boxes"}, command="specdec-tui bench ...",
                           models={"target": "t", "draft": "d", "vocab_size": 512})
    (tmp_path / "math-boxes.json").write_text(json.dumps(doc))
    reports = make_page.load_reports(tmp_path)
    page = make_page.page(reports, None, tmp_path / "no-curve.json", tmp_path)
    full = next(r for r in doc["results"] if r["settings"].get("tv_budget") == 1.0
                and r["settings"]["rule"] == "mentored")
    line = next(s for s in page.splitlines() if s.startswith("| math-boxes | 1.00 |"))
    assert f"{full['quality']['target_nll']:.3f}" in line and "100%" in line
    assert "not yet measured" in line
    assert "| math-boxes | T = 0, greedy |" in page and "## Not measured yet" in page


# -- every shipped prompt's check: a right answer, a near miss and the prompt copied back --


def _code(name: str) -> str:
    from core.bench.tasks import code_block

    block = code_block(bench.load_prompt(name))
    assert block is not None
    return block


def _edit_pasted() -> str:
    code = _code("code-edit-pasted").replace("load_readings", "read_station_log")
    code = code.replace("def read_station_log(path: Path)",
                        "def read_station_log(path: Path, skip_invalid: bool = False)")
    return code.replace("            except (KeyError, ValueError) as exc:\n",
                        "            except (KeyError, ValueError) as exc:\n"
                        "                if skip_invalid:\n                    continue\n")


BUGFIX = '''def max_window_sum(readings: list[float], width: int) -> float:
    if width <= 0 or width > len(readings):
        raise ValueError("window wider than the data")
    window = sum(readings[:width])
    best = window
    for i in range(width, len(readings)):
        window += readings[i] - readings[i - width]
        best = max(best, window)
    return best
'''
REFACTOR = '''from typing import Any


def _totals(orders: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    by_customer: dict[Any, dict[str, Any]] = {}
    for o in orders:
        if o["status"] == "cancelled":
            continue
        t = by_customer.setdefault(o["customer_id"], {"total": 0, "orders": 0, "last": None})
        t["total"] += o["amount"]
        t["orders"] += 1
        if t["last"] is None or o["date"] > t["last"]:
            t["last"] = o["date"]
    return by_customer


def summarize_orders(orders, customers):
    totals = _totals(orders)
    result = []
    for c in customers:
        t = totals.get(c["id"])
        if t:
            result.append({"name": c["name"], "orders": t["orders"],
                           "total": round(t["total"], 2), "last_order": t["last"]})
        else:
            result.append({"name": c["name"], "orders": 0, "total": 0.0, "last_order": None})
    result.sort(key=lambda r: r["total"], reverse=True)
    return result
'''
VAULT = """The lights die at 02:14. Ingrid Solheim counts the seconds out loud in the dark.
"The generator," says Kofi Mensah. "It should have started by now."
"It should," Ingrid says. "It won't. I have been the keeper here for eleven winters."
Kofi lifts his torch to the shelves where his village's sorghum waits in foil at minus
eighteen. "How long do we have?"
"Weeks," she says. "The mountain is colder than any machine. The permafrost holds."
The agronomist breathes out slowly and sets his box down on the third shelf."""
OONA = """The alarm went at four. Oona Castell was out of her bunk before Ferdie Achebe had
found his glasses.
"Oxygen's sliding," Ferdie said, squinting at the panel. "Pump's dead, I'd bet my boots."
Oona held her notebook up to the tubes. Yellow-brown, all of them. "Look at the colour."
The engineer tapped the manifold and hummed. The biologist wrote the time down and decided
to pull the light timer first."""
REWRITE = bench.load_prompt("rewrite-paragraph").split("\n\n", 1)[1]
for present, past in (("stops running", "stopped running"), ("repairs", "repaired"),
                      ("call it", "called it"), ("uses the", "used the"), ("nothern", "northern"),
                      ("she counts", "she counted"), ("bakes bread", "baked bread"),
                      ("carry", "carried"), ("gather", "gathered"), ("always brings", "always brought"),
                      ("always complains", "always complained"), ("is the only", "was the only"),
                      ("checks it twice", "checked it twice"), ("are finished", "were finished"),
                      ("ferry brings", "ferry brought"), ("who has never", "who had never"),
                      ("meet her", "met her"), ("she knows", "she knew"),
                      ("he has never", "he had never")):
    REWRITE = REWRITE.replace(present, past)

CASES = {
    # name: (right answer, near miss)
    "code-rename": (GOOD.replace("```python\n", "").replace("```\n", ""),  # no fences
                    GOOD.replace("price * quantity", "price * qty")),
    "code-refactor-pasted": ("```python\n" + _code("code-refactor-pasted").replace("Ledger", "Account")
                             + "```\n",
                             "```python\n" + _code("code-refactor-pasted").replace(
                                 "class Ledger", "class Account") + "```\n"),  # uses left
    "code-edit-pasted": (_edit_pasted(),  # unfenced, as a prompt asking for no fences gets it
                         _edit_pasted().replace("                if skip_invalid:\n"
                                                "                    continue\n", "")),
    "code-bugfix": ("The bugs: best starts at 0, the loop stops one early, and the window drops "
                    "the wrong reading.\n\n```python\n" + BUGFIX + "```",
                    "```python\n" + BUGFIX.replace("best = window\n", "best = window\n  x") + "```"),
    "code-refactor": ("```python\n" + REFACTOR + "```",
                      "```python\n" + REFACTOR.replace("def summarize_orders(orders, customers)",
                                                       "def summarize_orders(orders)") + "```"),
    "math-boxes": ("17 x 86 = 1,462", "1,452"),
    "rewrite-paragraph": (REWRITE, REWRITE.replace("northern", "nothern")),  # spelling unfixed
    "creative-seed-vault": (VAULT, VAULT.replace("Ingrid says. \"It won't. I have been the keeper",
                                                 "Kofi says. \"It won't. I'm Ingrid Solheim, the keeper")),
    "creative-800": (OONA, OONA.replace("Oona Castell was out", "Oona Achebe was out")),
}


def test_every_shipped_prompt_has_a_check():
    assert sorted(CASES) == bench.prompt_names()
    for name in bench.prompt_names():
        assert bench.prompt_check(name) is not None, name


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_check_passes_the_right_answer_and_fails_the_near_miss_and_the_copy(name):
    check = bench.prompt_check(name)
    right, near = CASES[name]
    assert check(right), f"{name}: the right answer failed {check.describe()}"
    assert not check(near), f"{name}: the near miss passed {check.describe()}"
    assert not check(bench.load_prompt(name)), f"{name}: the prompt copied back passed"


def test_code_is_found_fenced_or_not_and_never_run(tmp_path):
    check = bench.prompt_check("code-rename")
    bare = GOOD.split("```python\n", 1)[1].split("```", 1)[0]
    assert check(bare) and check("Sure, here it is:\n" + bare)
    assert check("```\n" + bare + "```")  # a fence without a language
    marker = tmp_path / "ran"
    evil = bare + f"\nopen({str(marker)!r}, 'w').write('x')\n"
    assert not check(evil)  # a statement added is a change, and it was only parsed
    assert not marker.exists()
    assert not check("(" * 10_000)  # too deep to parse: a failed check, not a crash


def test_the_seeds_failure_is_caught_on_its_own_names():
    """The seed's prompt: Mara the mechanic and Ilyan the archivist; at TV = 1 Mara introduced
    herself as "Ilyan Sato, the archivist"."""
    from core.bench.tasks import parse_check

    brief = "Mara, a mechanic, and Ilyan, an archivist, in an abandoned lunar greenhouse."
    check = parse_check("# check: roles Mara=mechanic; Ilyan=archivist", brief)
    right = ('Mara wiped her hands. "I\'m Mara, the mechanic," she said.\n'
             '"Ilyan," the archivist said, and bowed.')
    seed = ('Mara wiped her hands. "I\'m Ilyan Sato, the archivist," Mara said.\n'
            '"Ilyan," the archivist said, and bowed.')
    assert check(right) and not check(seed)
    assert not check("Mara, the archivist, wiped her hands. Ilyan watched.")
    assert not check(brief)


@pytest.mark.parametrize("kind, arg, right, near", [
    ("contains", "1462", "It is 1462 boxes.", "It is 1426 boxes."),
    ("regex", r"\b1,?462\b", "1,462 in all", "11462 in all"),
    ("number", "1462", "1462", "1463"),
    ("rewrite", "Marta|forty-two gone counts", "Marta counted forty-two.", "Marta counts forty-two."),
])
def test_the_user_kinds(kind, arg, right, near):
    from core.bench.tasks import parse_check

    prompt = "Marta counts forty-two nests; give the total of boxes as a number."
    check = parse_check(f"{kind} {arg}", prompt, "--check")
    assert check(right) and not check(near)


def test_an_answer_cut_by_the_token_budget_is_judged_on_what_it_reached():
    """No EOS within the budget: the complete statements must be the prompt's first ones with
    the renames made, a rename reached; a rewrite keeps the facts up to the last it reached."""
    check = bench.prompt_check("code-refactor-pasted")
    right, _ = CASES["code-refactor-pasted"]
    half = right[: len(right) * 2 // 3]  # past `class Account`, mid-way through the module
    assert check(half, cut=True) and not check(half)  # whole, it would lack the rest
    copy = bench.load_prompt("code-refactor-pasted")
    at = copy.index("```python")
    assert not check(copy[: at + len(half)], cut=True)  # the copy, cut as far: Ledger kept
    early = right[: right.index("class OverdraftError")]  # cut before any rename
    assert not check(early, cut=True)
    assert check(right, cut=True)  # a closed block is whole wherever the text was cut
    edit = bench.prompt_check("code-edit-pasted")
    good = _edit_pasted()
    assert edit(good[: good.index("def daily_range") + 30], cut=True)  # cut mid-way there
    assert not edit(good[: good.index("def read_station_log")], cut=True)  # no edit reached
    rewrite = bench.prompt_check("rewrite-paragraph")
    part = REWRITE[: REWRITE.index("In the evenings")]
    assert rewrite(part, cut=True) and not rewrite(part)
    assert not rewrite(part.replace("stopped running", "stops running"), cut=True)


def test_a_bug_left_in_fails_the_bugfix_check():
    check = bench.prompt_check("code-bugfix")
    assert check("```python\n" + BUGFIX + "```")
    assert not check("```python\n" + BUGFIX.replace("best = window", "best = 0") + "```")
    assert not check("```python\n" + BUGFIX.replace("readings[i - width]",
                                                     "readings[i - width + 1]") + "```")
