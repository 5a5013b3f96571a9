"""docs/benchmarks: every generated table and quoted number agrees with the JSON beside it.

docs/benchmarks/render.py renders them; these tests run its check on the committed pages, show
that the check catches a changed number (in the data or in the page), and pin the statistic of
edition 2's corrected table to the medians issue 21 computed by hand.
"""

from __future__ import annotations

import lzma
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.helpers.scripts import load_script

BENCH = REPO / "docs" / "benchmarks"
ED2 = "data/h200-2026-11-30/"


render = load_script("docs/benchmarks/render.py", "bench_render")
rawdata = __import__("rawdata")  # beside render.py, which put its folder on sys.path


def test_every_page_agrees_with_its_data() -> None:
    assert render.check(BENCH) == []


def cited(page: Path) -> set[Path]:
    """The files a page's generated blocks and values render from."""
    text = page.read_text()
    srcs = [m["src"] for m in (*render.BLOCK.finditer(text), *render.VALUE.finditer(text))]
    return {(page.parent / s.strip()).resolve() for src in srcs for s in src.split(",")}


def pages_citing(path: Path) -> list[str]:
    """Every page that renders from `path`: the only pages a change to it can move."""
    return sorted(str(p.relative_to(BENCH)) for p in render.pages(BENCH)
                  if path.resolve() in cited(p))


@pytest.fixture
def copy_page(tmp_path: Path):
    """A copy of one page and the files it renders from, in the benchmarks folder's layout (the
    test perturbs the copy; render.check on it renders that page alone)."""

    def make(name: str) -> Path:
        root = tmp_path / "benchmarks"
        for f in {(BENCH / name).resolve(), *cited(BENCH / name)}:
            dest = root / f.relative_to(BENCH)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
        assert [p.relative_to(root) for p in render.pages(root)] == [Path(name)]
        assert render.check(root) == []
        return root

    return make


def test_check_fails_when_a_row_of_the_data_changes(copy_page) -> None:
    # The hybrid's fastest rewrite request (0.51 s) made the old table print 2.27x; making its
    # slowest one faster moves the median, and every block and value that quotes it must fail.
    # No other page renders from the file, so none other can change.
    name = ED2 + "lookup-rewrite-paragraph-t0.0.json.xz"
    assert pages_citing(BENCH / name) == ["archive/h200-edition2.md"]
    copy = copy_page("archive/h200-edition2.md")
    f = copy / name
    doc = render.load_json(f)
    hybrid = next(r for r in doc["results"] if r["name"] == "hybrid-cost-aware+flags")
    hybrid["e2e_s"] = [x * 0.8 for x in hybrid["e2e_s"]]
    rawdata.write_json(f, doc)
    problems = render.check(copy)
    assert problems and all(p.startswith("archive/h200-edition2.md: ") for p in problems)
    assert any("lookup-matrix" in p for p in problems)
    assert any("hybrid-cost-aware+flags | ratio" in p for p in problems)
    # Rendering writes the new numbers, after which the check passes again.
    assert render.main(["--root", str(copy)]) == 0
    assert render.check(copy) == []
    assert "1.28x" in (copy / "archive" / "h200-edition2.md").read_text()  # 1.158 / (1.131 * 0.8)


def test_check_fails_when_a_number_of_a_page_is_edited(copy_page) -> None:
    copy = copy_page("archive/h200-edition3.md")
    page = copy / "archive" / "h200-edition3.md"
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
        [render.load_json(BENCH / ED2 / f"lookup-{n}.json.xz")
         for n in ("code-edit-pasted-t0.0", "code-edit-pasted-t0.7", "rewrite-paragraph-t0.0",
                   "creative-seed-vault-t0.0")])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [c[0] for c in cells][1:] == ["code-edit-pasted, T = 0.7", "rewrite-paragraph, greedy",
                                         "creative-seed-vault, greedy"]
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
    whole_pages = {"real-pair.md",  # real-pair/make_page.py; tests/core/bench/test_tasks.py
                   # `sweep --read` of the real pair's raw sweep; tests/docs/test_real_pair_page.py
                   "real-pair-reading.md",
                   "round-overhead.md"}  # peer_ops.py page; tests/docs/test_peer_ops_page.py
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


def _ns_doc(prompt: str, temp: float, e2e: dict[str, list[float]],
            guard: dict[str, dict[str, list]] | None = None) -> dict:
    """A bench JSON of issue 28's rows: target-only first, then the named rows' timings."""
    def result(name: str, xs: list[float]) -> dict:
        mode = "target-only" if name == "target-only" else "speculative"
        return {"name": name, "e2e_s": xs, "settings": {"mode": mode, "temperature": temp},
                "guard": (guard or {}).get(name), "tokens_per_request": 256}
    return {"protocol": {"prompt": {"name": prompt}},
            "results": [result(n, xs) for n, xs in e2e.items()]}


def test_never_slower_goals_compare_unrounded_ratios() -> None:
    """0.966x prints as 0.97x but is below the floor; the hybrid is judged against the better
    of the lookup and the model alone, not against target-only."""
    doc = _ns_doc("p", 0.0, {"target-only": [1.0, 1.0, 1.0],
                             render.NS_DEFAULT: [1 / 0.98] * 3, render.NS_LOOKUP: [1 / 1.5] * 3,
                             render.NS_HYBRID: [1 / 1.2] * 3, render.NS_MODEL: [1 / 0.966] * 3})
    lines, _ = render.TABLES["never-slower-goals"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[1:5] == ["0.98x", "1.50x", "1.20x", "met"]
    assert cells[5:] == ["0.97x", "0.80x", "**not met**", "-"]  # 1.2 / 1.5; no A/A row
    control = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, render.NS_LOOKUP: [1.0] * 3,
                                 render.NS_CONTROL: [1 / 0.9] * 3})
    lines, _ = render.TABLES["never-slower-goals"]([control])
    assert lines[2].rstrip().endswith("| 0.90x |")  # the A/A control: noise alone
    low = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, render.NS_DEFAULT: [1 / 0.966] * 3,
                             render.NS_LOOKUP: [1.0] * 3, render.NS_HYBRID: [1.0] * 3})
    lines, _ = render.TABLES["never-slower-goals"]([low])
    assert "| 0.97x | 1.00x | 1.00x | **not met** |" in lines[2]


def test_per_seed_ratios_pair_the_same_seed() -> None:
    doc = _ns_doc("p", 0.7, {"target-only": [1.0, 2.0, 3.0], render.NS_LOOKUP: [2.0, 1.0, 1.0]})
    assert render.FIELDS["seed_min_max"](doc, render.row(doc, render.NS_LOOKUP)) == "0.50-3.00x"
    assert render.FIELDS["ratio"](doc, render.row(doc, render.NS_LOOKUP)) == "2.00x"


def test_model_alone_split_rebuilds_the_request_from_the_guard_rates() -> None:
    """Over 2 requests, 10 model rounds committing 20 tokens (10 accepted + 1 a round): 10
    tokens a request at 40 tok/s (0.25 s, 50 ms a round), the other 246 at 200 tok/s
    (1.23 s), plus TTFT 0.02 s: 1.5 s, the row's median E2E."""
    doc = _ns_doc("p", 0.0, {"target-only": [1.2, 1.2], render.NS_MODEL: [1.5, 1.5]},
                  guard={render.NS_MODEL: {"none": {"measured_tok_s": [200.0, 200.0]},
                                           "model": {"measured_tok_s": [40.0, 40.0]}}})
    r = render.row(doc, render.NS_MODEL)
    r["ttft_s"] = 0.02
    r["per_source"] = {"model": {"rounds": 10, "accepted": 10}, "none": {"rounds": 480}}
    lines, _ = render.TABLES["model-alone-split"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[3:] == ["0.80x", "5.0", "50", "0.250 s", "1.230 s", "1.500 s", "1.00"]


def test_never_slower_page_follows_its_data(copy_page) -> None:
    """Making the default twice as fast on math-boxes greedy must change the page's per-row,
    summary and goal tables and its quoted ratio, and nothing on another page (none other
    renders from the file)."""
    name = "data/h200-2026-12-01-s5/never-slower-2/math-boxes-t0.0.json.xz"
    assert pages_citing(BENCH / name) == ["archive/never-slower-runs.md"]
    copy = copy_page("archive/never-slower-runs.md")
    f = copy / name
    doc = render.load_json(f)
    default = next(r for r in doc["results"] if r["name"] == render.NS_DEFAULT)
    default["e2e_s"] = [x / 2 for x in default["e2e_s"]]
    rawdata.write_json(f, doc)
    problems = render.check(copy)
    assert problems and all(p.startswith("archive/never-slower-runs.md: ") for p in problems)
    for name in ("never-slower from", "never-slower-summary", "never-slower-goals",
                 "<!-- value: ../data/h200-2026-12-01-s5/never-slower-2/math-boxes-t0.0.json.xz"):
        assert any(name in p for p in problems), name


def test_the_current_verdict_follows_the_latest_runs_data(copy_page) -> None:
    """never-slower.md renders run 17's verdict from the same files as its section in the
    archive: the default made twice as fast on one bench moves the current page's floor."""
    name = "data/h200-2026-12-04-s21/never-slower-2/code-bugfix-t0.7.json.xz"
    assert pages_citing(BENCH / name) == ["archive/never-slower-runs.md", "never-slower.md"]
    copy = copy_page("never-slower.md")
    doc = render.load_json(copy / name)
    default = render.ns_names(doc)[render.NS_DEFAULT]  # its name carries k_max=32
    default["e2e_s"] = [x / 2 for x in default["e2e_s"]]
    rawdata.write_json(copy / name, doc)
    problems = render.check(copy)
    assert problems and all(p.startswith("never-slower.md: ") for p in problems)
    assert any("never-slower-verdict from data/h200-2026-12-04-s21/never-slower-2/" in p
               for p in problems)


def test_never_slower_tally_counts_benches_unrounded() -> None:
    """A default at 0.966x prints as 0.97x but fails the floor on that bench; the tally says
    on how many benches each goal holds and calls a goal met only when it holds on all."""
    ok = _ns_doc("a", 0.0, {"target-only": [1.0] * 3, render.NS_DEFAULT: [1.0] * 3,
                            render.NS_LOOKUP: [1 / 1.5] * 3, render.NS_HYBRID: [1 / 1.5] * 3,
                            render.NS_MODEL: [1.0] * 3})
    low = _ns_doc("b", 0.7, {"target-only": [1.0] * 3, render.NS_DEFAULT: [1 / 0.966] * 3,
                             render.NS_LOOKUP: [1.0] * 3, render.NS_HYBRID: [1 / 0.9] * 3,
                             render.NS_MODEL: [1.0] * 3})
    lines, _ = render.TABLES["never-slower-tally"]([ok, low])
    cells = {c[0]: c[1:] for c in ([x.strip() for x in line.strip("|").split("|")]
                                    for line in lines[2:])}
    assert cells["default >= 0.97x of target-only"] == ["1 of 2", "**not met**"]
    assert cells["lookup >= 0.97x of target-only"] == ["2 of 2", "met"]
    assert cells["all three (the floor)"] == ["1 of 2", "**not met**"]
    assert cells["hybrid >= 0.97x of the better of lookup and model alone"] == [
        "1 of 2", "**not met**"]  # 0.9 / 1.0 on the second bench


def test_never_slower_runs_tells_runs_apart_by_commit() -> None:
    def run(commit: str, default: float) -> dict:
        doc = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, render.NS_DEFAULT: [1 / default] * 3})
        doc["environment"] = {"specdec_tui_commit": commit + "0" * 33,
                              "timestamp": "2026-12-01T10:00:00+00:00"}
        return doc

    lines, stat = render.TABLES["never-slower-runs"]([run("aaaaaaa", 0.9), run("aaaaaaa", 1.2),
                                                      run("bbbbbbb", 1.1)])
    first = [c.strip() for c in lines[2].strip("|").split("|")]
    assert first == ["default (hybrid, cost-aware 1..8)", "1 of 2 -> 0 of 1",
                     "1.05x -> 1.10x", "0.90-1.20x -> 1.10-1.10x"]
    assert "aaaaaaa (2026-12-01) -> the run of bbbbbbb" in stat


def test_traced_rounds_split_by_kind_and_count_the_draft_behind() -> None:
    def rnd(src: str, ctx: int, tokens: int, proposed: int, draft: float, verify: float) -> dict:
        return {"source": src, "context": ctx, "tokens": tokens, "proposed": proposed,
                "draft_ms": draft, "verify_ms": verify, "sample_ms": 0.5, "cache_ms": 0.0,
                "other_ms": 0.0, "total_ms": draft + verify + 0.5}
    trace = [rnd("", 10, 1, 0, 0.0, 4.0), rnd("", 11, 1, 0, 0.0, 4.0),
             rnd("model", 12, 2, 1, 5.0, 10.0), rnd("", 14, 1, 0, 0.0, 4.0),
             rnd("model", 15, 3, 2, 60.0, 10.0)]
    assert render._catch_up(trace, "model") == [2, 1]  # 10 -> 12; 12 + 2 -> 15
    doc = _ns_doc("p", 0.0, {"target-only": [1.0], render.NS_MODEL: [1.0]})
    doc["results"][1]["trace"] = trace
    lines, _ = render.TABLES["traced-rounds"]([doc])
    model = next([c.strip() for c in line.strip("|").split("|")] for line in lines
                 if "model round" in line)
    # rounds, ms total, ms a round (median), draft, verify, rest, drafts, draft ms a token
    assert model[3:] == ["2", "86", "43.0", "32.5", "10.0", "0.5", "2", "21.7", "2/1"]


def test_first_use_page_follows_its_files(copy_page) -> None:
    """The first-use page quotes first-use.json and parses the stamped logs and the importtime
    files: a later first token, or a slower import, must fail its check."""
    run = "data/h200-2026-12-01-s6/first-use/"
    assert {page for name in ("first-use.json.xz", "first-use-warm.log", "importtime-pyc.txt.xz")
            for page in pages_citing(BENCH / run / name)} == {"first-use.md"}
    copy = copy_page("first-use.md")
    f = copy / "data/h200-2026-12-01-s6/first-use/first-use.json.xz"
    doc = render.load_json(f)
    doc["parts"]["cold"]["first_token_s"] = 61.0
    rawdata.write_json(f, doc)
    problems = render.check(copy)
    assert problems and all(p.startswith("first-use.md: ") for p in problems)
    assert any("first-use from" in p for p in problems)
    assert any("first_token_cold" in p for p in problems)
    log = copy / "data/h200-2026-12-01-s6/first-use/first-use-warm.log"
    log.write_text(log.read_text(encoding="utf-8").replace("[  10.57 s] err: loading",
                                                           "[  20.57 s] err: loading"),
                   encoding="utf-8")
    imp = copy / "data/h200-2026-12-01-s6/first-use/importtime-pyc.txt.xz"
    imp.write_bytes(lzma.compress((rawdata.read_text(imp) + "import time:       100 | 99000000 | core.slow\n").encode()))
    problems = render.check(copy)
    assert any("first-use from" in p for p in problems)
    assert any("importtime from" in p for p in problems)


def test_importtime_follows_the_heaviest_child() -> None:
    text = "\n".join(["import time: self [us] | cumulative | imported package",
                      "import time:   100000 |     100000 |     c.light",
                      "import time:  9000000 |    9000000 |     c.heavy",
                      "import time:   500000 |    9600000 |   c",
                      "import time:    50000 |      50000 |   d",
                      "import time:   400000 |   10050000 | top",
                      "import time:   200000 |     200000 | other"])
    lines, _ = render.TABLES["importtime"]([{"name": "x.txt", "text": text}])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    # the chain stops at c.heavy (no children); d and c.light are lighter siblings
    assert [c for c in cells if not c[0].startswith("package")] == [
        ["all imports", "10.25"], ["`top`", "10.05"], ["· `c`", "9.60"],
        ["· · `c.heavy`", "9.00"]]
    assert ["package `c` (own time of its modules)", "9.60"] in cells
    assert ["package `top` (own time of its modules)", "0.40"] in cells


def test_never_slower_control_counts_the_floor_by_median_and_by_minima() -> None:
    """The A/A control's ratio, and each row's by the median and by the minima: a row whose
    median is dragged down by one slow request (1.0, 1.0, 2.0 s against 1.0 s) holds by its
    minima but not by its median once two of its three requests are slow."""
    doc = _ns_doc("p", 0.0, {"target-only": [1.0, 1.0, 1.0],
                             render.NS_DEFAULT: [1.0, 2.0, 2.0], render.NS_LOOKUP: [0.5] * 3,
                             render.NS_HYBRID: [1.2, 1.2, 1.2],
                             render.NS_CONTROL: [1.0, 1.1, 0.9]})
    lines, stat = render.TABLES["never-slower-control"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[1:] == ["1.00x", "0.91-1.11x", "1.11x", "0.50x", "1.00x", "2.00x", "2.00x",
                         "0.83x", "0.83x"]
    total = [c.strip() for c in lines[3].strip("|").split("|")]
    assert total == ["**below 0.97x, of 1**", "0", "", "0", "1", "0", "0", "0", "1", "1"]
    assert "A/A" in stat
    bare = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, render.NS_DEFAULT: [1.0] * 3})
    assert render.TABLES["never-slower-control"]([bare])[0][2].startswith("| **below")


def test_never_slower_verdict_widens_each_ratio_by_the_controls_noise() -> None:
    """σ is the A/A control's per-seed log-ratio RMS over every bench (its true ratio is 1);
    a row's cell is its per-seed geometric mean ± 1.96 σ/√n: held above 0.97x, broken below,
    undecided across it; pooled rows take every pair. Worked by hand: the control's pairs are
    e^±0.1 (σ = 0.1), n = 4, so the half-width is 1.96 * 0.1 / 2 = 0.098 in log."""
    import math

    up, down = math.exp(0.1), math.exp(-0.1)
    aa = [1 / up, 1 / down, 1 / up, 1 / down]  # target-only 1.0 s: pairs e^0.1, e^-0.1
    doc = _ns_doc("p", 0.0, {"target-only": [1.0] * 4, render.NS_CONTROL: aa,
                             render.NS_DEFAULT: [1 / 1.2] * 4,  # held: 1.2 e^-0.098 = 1.09
                             render.NS_LOOKUP: [1 / 0.8] * 4,  # broken: 0.8 e^0.098 = 0.88
                             render.NS_HYBRID: [1.0] * 4})  # undecided: 0.91-1.10 holds 0.97
    lines, stat = render.TABLES["never-slower-verdict"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == ["p, T = 0", "1.00x (0.91-1.10) undecided", "1.20x (1.09-1.32) held",
                     "0.80x (0.73-0.88) **broken**", "1.00x (0.91-1.10) undecided", "-"]
    assert "σ = 0.100" in stat and "4 pairs" in stat
    hot = _ns_doc("p", 0.7, {"target-only": [1.0] * 4, render.NS_CONTROL: aa,
                             render.NS_DEFAULT: [1 / 1.2] * 4})
    lines, _ = render.TABLES["never-slower-verdict"]([doc, hot])
    table = {row.split("|")[1].strip(): [c.strip() for c in row.strip("|").split("|")[1:]]
             for row in lines[2:]}
    assert table["**all benches**"][1] == "1.20x (1.12-1.29) held"  # 8 pairs: 0.069 in log
    assert table["**every bench at T = 0.7**"][2] == "-"  # no lookup row there
    assert table["**benches held / broken / undecided**"] == [
        "0 / 0 / 2", "2 / 0 / 0", "0 / 1 / 0", "0 / 0 / 1", "0 / 0 / 0"]
    bare = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, render.NS_DEFAULT: [1.0] * 3})
    assert "no A/A control" in render.TABLES["never-slower-verdict"]([bare])[0][2]


def test_the_normalized_verdict_divides_out_a_slow_spell_of_a_whole_request() -> None:
    """Each request's E2E over its own median plain step: a request that ran on a host
    twice as slow throughout (E2E and step both doubled) reads as its fast twin. The A/A
    control, whose seed 1 ran in such a spell, reads 1.00x with σ = 0 here against a wide σ
    in the E2E verdict; a row whose rounds cost real time keeps its loss (0.8x); a pair with
    a request of too few steps (None) is left out."""
    doc = _ns_doc("p", 0.7, {"target-only": [1.0, 1.0, 1.0, 1.0],
                             render.NS_CONTROL: [1.0, 2.0, 1.0, 1.0],
                             render.NS_DEFAULT: [1.25, 2.5, 1.25, 1.25],
                             render.NS_LOOKUP: [1.0, 1.0, 1.0, 1.0]})
    steps = {"target-only": [4.0, 4.0, 4.0, 4.0], render.NS_CONTROL: [4.0, 8.0, 4.0, 4.0],
             render.NS_DEFAULT: [4.0, 8.0, 4.0, 4.0], render.NS_LOOKUP: [4.0, None, 4.0, 4.0]}
    for r in doc["results"]:
        r["step_ms"] = steps[r["name"]]
    raw, raw_stat = render.TABLES["never-slower-verdict"]([doc])
    assert "σ = 0.347" in raw_stat  # log 2 / 2: one of four A/A pairs off by 2x
    lines, stat = render.TABLES["never-slower-normalized"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[1].startswith("1.00x (1.00-1.00)")
    assert cells[2] == "0.80x (0.80-0.80) **broken**"
    assert cells[3].startswith("1.00x (1.00-1.00)") and "median" in stat and "σ = 0.000" in stat
    assert render._norm_pairs(doc, doc["results"][3]) == [0.0, 0.0, 0.0]  # the None pair out
    bare = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, render.NS_CONTROL: [1.0] * 3})
    assert "step_ms" in render.TABLES["never-slower-normalized"]([bare])[1]


def test_step_excess_is_e2e_over_tokens_at_the_requests_own_step() -> None:
    """1.024 s for 256 tokens at a 4 ms median step is 1.000: every token one median step;
    a row's drafting rounds are counted beside it (plain steps, "none", are not rounds)."""
    doc = _ns_doc("p", 0.7, {"target-only": [1.024, 2.048], render.NS_DEFAULT: [1.2, 1.2]})
    doc["results"][0]["step_ms"] = [4.0, 8.0]
    doc["results"][1]["step_ms"] = [4.0, None]  # too few steps: left out
    doc["results"][1]["per_source"] = {"lookup": {"rounds": 3}, "none": {"rounds": 250}}
    lines, stat = render.TABLES["step-excess"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == ["p, T = 0.7", "1.000 (0)", "1.172 (3)", "-", "-", "-"]
    assert "step_ms" in stat


def test_plan_cost_puts_each_commits_plan_side_by_side() -> None:
    def doc(commit: str, ms: float) -> dict:
        return {"commit": commit, "machine": "x86_64", "python": "3.11",
                "results": [{"prices": "h200", "prompt": "p", "row": "default",
                             "median_ms": ms, "mean_ms": 2 * ms}]}
    lines, stat = render.TABLES["plan-cost"]([doc("aaa", 1.0), doc("bbb", 0.125)])
    assert lines[0] == "| prices | prompt | row | aaa: median (mean) ms | bbb: median (mean) ms |"
    assert lines[2] == "| h200 | p | default | 1.000 (2.000) | 0.125 (0.250) |"
    assert "x86_64 Python 3.11" in stat


def test_round_autopsy_reads_rounds_and_the_step_after_each() -> None:
    ev = [{"gap_ms": g, "proposed": p, "tokens": t}
          for g, p, t in [(20.0, 0, 1), (4.0, 0, 1), (9.0, 5, 3), (8.0, 0, 1), (4.0, 0, 1)]]
    doc = {"prompt": "p", "temperature": 0.7,
           "requests": [{"row": "lookup", "seed": 0, "e2e_s": 0.045, "events": ev}]}
    lines, _ = render.TABLES["round-autopsy"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    # plain steps 20, 4, 8, 4: median 6.0; one round of 3 tokens at 9 ms, the step after 8 ms
    assert cells == ["p, T = 0.7", "lookup", "45-45", "6.0 (6.0-6.0)", "1", "3.0",
                     "9.0 (9.0-9.0)", "8.0 (8.0-8.0)"]


def test_rare_round_pools_each_stretch_and_leaves_traced_trials_out() -> None:
    trials = [{"stretch": s, "traced": tr, "round_s": r, "after_s": [a]}
              for s, tr, r, a in [(0, False, 0.010, 0.009), (0, False, 0.014, 0.011),
                                  (0, True, 0.100, 0.1), (64, False, 0.012, 0.010)]]
    doc = {"env": {}, "plain_step_ms_median": 4.0, "trials": trials}
    lines, _ = render.TABLES["rare-round"]([doc])
    assert lines[2] == "| default | 0 | 2 | 12.0 | 10.0-14.0 | 10.0 | 4.00 |"
    assert lines[3] == "| default | 64 | 1 | 12.0 | 12.0-12.0 | 10.0 | 4.00 |"


def test_a_default_row_with_more_fields_is_still_the_default() -> None:
    """From run 4 the default row carries k_max = 32 in its name; the tables find it as the
    default and label it with its own k range, so a grown name cannot drop it silently."""
    name = render.DEFAULT_PREFIX.replace(",bonus=true", ",k_max=32,bonus=true") + "+flags"
    doc = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, name: [0.5] * 3,
                             render.NS_LOOKUP: [1.0] * 3, render.NS_HYBRID: [1.0] * 3})
    doc["results"][1]["settings"]["k_max"] = 32
    lines, _ = render.TABLES["never-slower"]([doc])
    assert "| default (hybrid, cost-aware 1..32) | 2.00x |" in lines[2]
    lines, _ = render.TABLES["never-slower-goals"]([doc])
    assert "| 2.00x | 1.00x | 1.00x | met |" in lines[2]


def test_step_split_reads_each_requests_host_time_outside_its_step() -> None:
    """Two requests of one row: steps of gap 5 ms and timer 4.5 ms (0.5 ms outside, 0.2 of
    it the plan) and of 6 and 5 (1.0, 0.4): outside 0.75 ms (median of the two means)."""
    def req(gap: float, timer: float, plan: float, excess: float, restarts: int) -> dict:
        return {"row": "default", "excess": excess, "stretches": 1 + restarts,
                "restarts": restarts, "rounds": 0,
                "steps": [{"gap": gap, "timer": timer, "plan": plan}] * 3}
    doc = {"prompt": "p", "temperature": 0.7, "summary": {"default": {}},
           "requests": [req(5.0, 4.5, 0.2, 1.1, 0), req(6.0, 5.0, 0.4, 1.3, 2)]}
    lines, stat = render.TABLES["step-split"]([doc, doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == ["p, T = 0.7", "1", "default", "2", "1.200 (1.100-1.300)", "0.750",
                     "0.300", "4", "2", "0"]
    assert lines[3].split("|")[2].strip() == "2"  # the prompt's second file: the second run
    assert "in the order they ran" in stat


def test_a_default_ab_row_is_not_read_as_the_default() -> None:
    """A bench that also ran the default with one setting flipped (never_slower.py's PRICE_AB
    or OVERLAP_AB, appended after its rows) has two rows under the default's key; the goals and
    the verdict read the bare one, which the bench ran first (run 12's tables had read the
    A/B row)."""
    ab = render.NS_DEFAULT.replace("+flags", ",price_buckets=true+flags")
    doc = _ns_doc("p", 0.0, {"target-only": [1.0] * 3, render.NS_DEFAULT: [0.5] * 3,
                             render.NS_LOOKUP: [1.0] * 3, render.NS_HYBRID: [1.0] * 3,
                             ab: [0.25] * 3})
    assert render.ns_names(doc)[render.NS_DEFAULT]["name"] == render.NS_DEFAULT
    lines, _ = render.TABLES["never-slower-goals"]([doc])
    assert "| 2.00x | 1.00x | 1.00x | met |" in lines[2]


def test_price_ab_pairs_each_seed_with_and_without_the_setting() -> None:
    """Each cell: the geometric mean of the off row's E2E over the on row's, same seed, with
    the A/A control's interval. Worked by hand: control pairs e^±0.1 (σ = 0.1), n = 4, half
    width 0.098 in log; the default with it twice as fast (2.00x, on faster), the lookup the
    same with and without (1.00x, its interval holding 1); pooled over two benches, n = 8."""
    import math

    up, down = math.exp(0.1), math.exp(-0.1)
    aa = [1 / up, 1 / down, 1 / up, 1 / down]
    rows = {"target-only": [1.0] * 4, render.NS_CONTROL: aa, render.NS_DEFAULT: [1.0] * 4,
            render.NS_LOOKUP: [0.8] * 4,
            render.NS_DEFAULT.replace("+flags", ",price_buckets=true+flags"): [0.5] * 4,
            "lookup:price_buckets=true+flags": [0.8] * 4}
    docs = [_ns_doc("p", 0.0, rows), _ns_doc("q", 0.7, rows)]
    lines, stat = render.TABLES["price-ab"](docs)
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[1] == "2.00x (1.81-2.21) on faster"
    assert cells[3] == "1.00x (0.91-1.10) no difference found"
    pooled = next(x for x in lines if x.startswith("| **all benches**"))
    assert "2.00x (1.87-2.14) on faster" in pooled  # n = 8: 0.069 in log
    assert "σ = 0.100" in stat and "8 pairs" in stat
    slower = dict(rows)
    slower["lookup:price_buckets=true+flags"] = [1.6] * 4
    lines, _ = render.TABLES["price-ab"]([_ns_doc("p", 0.0, slower)])
    assert "0.50x (0.45-0.55) on slower" in lines[2]


def test_chain_ab_pairs_an_integer_setting_by_its_value() -> None:
    """CHAIN_AB's rows carry lookup_min_match_after_round=1, not =true: the chain-ab table
    pairs them with the bare rows by that value (a flag spelt "=true" would find no on row)."""
    rows = {"target-only": [1.0] * 2, render.NS_CONTROL: [1.0] * 2, render.NS_DEFAULT: [1.0] * 2,
            render.NS_LOOKUP: [1.0] * 2,
            render.NS_DEFAULT.replace("+flags", ",lookup_min_match_after_round=1+flags"):
                [0.5] * 2,
            "lookup:lookup_min_match_after_round=1+flags": [2.0] * 2}
    lines, stat = render.TABLES["chain-ab"]([_ns_doc("p", 0.0, rows)])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[1].startswith("2.00x") and cells[3].startswith("0.50x")
    assert "lookup_min_match_after_round" in stat


def test_guard_requests_reads_each_request_and_old_data_without_counts() -> None:
    """Request by request: target-only's E2E over the row's (1.0/0.25 = 4.00x, 1.0/0.8 =
    1.25x), the source's rounds and its stops and refusals, and which text each wrote; data
    from before the counts existed reads "-" for them."""
    g = {"lookup": {"measured_tok_s": [900.0, 300.0], "guard": ["asked", "asked"],
                    "measured_rounds": [24, 55], "stops": [0, 2], "refused": [0, 41],
                    "cost_scale": [[1.0, 1.25], [0.9, 3.5]]}}
    g["none"] = {"measured_tok_s": [200.0, 200.0], "measured_rounds": [8, 68]}
    doc = _ns_doc("p", 0.0, {"target-only": [1.0, 1.0], render.NS_LOOKUP: [0.25, 0.8]},
                  {render.NS_LOOKUP: g})
    # the texts: target-only wrote one text twice, the lookup it and then another
    doc["results"][0]["output_sha"] = ["aa", "aa"]
    doc["results"][1]["output_sha"] = ["aa", "bb"]
    lines, _ = render.TABLES["guard-requests"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[2:] == ["4.00x/1.25x", "24/55", "8/68", "0/2", "0/41", "1.25/3.50", "A/B"]
    doc["results"][0]["output_sha"] = ["cc", "aa"]  # target-only's first seed's text is A
    cells = [c.strip() for c in render.TABLES["guard-requests"]([doc])[0][2].strip("|").split("|")]
    assert cells[-1] == "B/C"
    old = {"lookup": {"measured_tok_s": [900.0, 300.0], "guard": ["asked", "asked"]}}
    doc = _ns_doc("p", 0.0, {"target-only": [1.0, 1.0], render.NS_LOOKUP: [0.25, 0.8]},
                  {render.NS_LOOKUP: old})
    cells = [c.strip() for c in render.TABLES["guard-requests"]([doc])[0][2].strip("|").split("|")]
    assert cells[3:] == ["-/-", "-/-", "-/-", "-/-", "-/-", "-"]


def test_step_split_ab_pairs_the_trees_in_the_order_they_ran() -> None:
    """Files alternate old, new: per prompt and row, the median gap, the mean outside the
    step's timer (µs) and the plan's, and the outside less target-only's in the same tree;
    each request's first step is left out."""
    def doc(out_ms: dict[str, float]) -> dict:
        def steps(out: float, plan: float) -> list[dict]:
            first = {"gap": 99.0, "timer": 0.0, "plan": 9.0}  # left out: a stretch's first
            return [first] + [{"gap": 4.0 + out, "timer": 4.0, "plan": plan}] * 3
        return {"prompt": "p", "temperature": 0.7,
                "requests": [{"row": row, "steps": steps(o, o / 2 if row != "target-only" else 0.0)}
                             for row, o in out_ms.items()]}
    old, new = doc({"target-only": 0.1, "default": 0.2}), doc({"target-only": 0.08, "default": 0.15})
    lines, stat = render.TABLES["step-split-ab"]([old, new])
    cells = [[c.strip() for c in x.strip("|").split("|")] for x in lines[2:]]
    assert cells[0] == ["p, T = 0.7", "target-only", "3 / 3", "4.10 → 4.08", "100 → 80", "0 → 0",
                        "+0 → +0"]
    assert cells[1] == ["p, T = 0.7", "default", "3 / 3", "4.20 → 4.15", "200 → 150", "100 → 75",
                        "+100 → +70"]
    assert "old → new" in stat


def test_the_steps_view_judges_the_plain_steps_alone() -> None:
    """Target-only's median plain step over the row's, per seed: a row whose steps ran 25%
    slower reads 0.80x broken whatever its E2E, the A/A control's step noise sets the
    interval, and a pair with a request of too few steps (None) is left out."""
    doc = _ns_doc("p", 0.7, {"target-only": [1.0, 1.0, 1.0], render.NS_CONTROL: [1.0, 1.0, 1.0],
                             render.NS_MODEL: [1.0, 1.0, 1.0], render.NS_LOOKUP: [0.5] * 3})
    steps = {"target-only": [4.0, 4.0, 4.0], render.NS_CONTROL: [4.0, 4.0, 4.0],
             render.NS_MODEL: [5.0, 5.0, 5.0], render.NS_LOOKUP: [4.0, None, 4.0]}
    for r in doc["results"]:
        r["step_ms"] = steps[r["name"]]
    lines, stat = render.TABLES["never-slower-steps"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[1] == "1.00x (1.00-1.00) held"  # the A/A control: σ = 0 here
    assert cells[3] == "1.00x (1.00-1.00) held"  # the lookup's steps: its E2E 2x apart
    assert cells[5] == "0.80x (0.80-0.80) **broken**"  # the model alone: 4 ms over 5 ms
    assert "median plain step" in stat
    assert render._step_pairs(doc, doc["results"][3]) == [0.0, 0.0]


def test_a_text_reads_as_one_letter_in_every_row_of_a_bench() -> None:
    """Letters are the bench's, not a row pair's: two rows that each wrote a new text read
    two letters, and one text two rows wrote reads one."""
    doc = _ns_doc("p", 0.0, {"target-only": [1.0, 1.0], render.NS_DEFAULT: [0.5, 0.5],
                             render.NS_LOOKUP: [0.5, 0.5]})
    for r, shas in zip(doc["results"], (["aa", "aa"], ["dd", "aa"], ["ee", "dd"]), strict=True):
        r["output_sha"] = shas
    texts = [render._texts(doc, r) for r in doc["results"]]
    assert texts == ["A/A", "B/A", "C/B"]


def test_same_text_compares_requests_that_wrote_one_text() -> None:
    """Per text target-only wrote: its median there (the A/A twin's requests with it) over
    each row's median on the same text; a text only a row wrote is no line, a row that
    never wrote the text reads "-"."""
    doc = _ns_doc("p", 0.0, {"target-only": [1.0, 2.0], render.NS_LOOKUP: [0.25, 0.5, 4.0],
                             render.NS_CONTROL: [3.0], render.NS_DEFAULT: [1.0]})
    shas = (["aa", "bb"], ["aa", "bb", "cc"], ["aa"], ["cc"])
    for r, xs in zip(doc["results"], shas, strict=True):
        r["output_sha"] = xs
    lines, _ = render.TABLES["same-text"]([doc])
    cells = [[c.strip() for c in x.strip("|").split("|")] for x in lines[2:]]
    # text A: target-only 1.0 and its twin 3.0 (median 2.0) over the lookup's 0.25
    assert cells == [["p, T = 0", "A", "2", "-", "8.00x (1)", "-", "-"],
                     ["p, T = 0", "B", "1", "-", "4.00x (1)", "-", "-"]]


def test_copy_stall_reads_each_gate_and_pattern() -> None:
    """One row per bench and gate, one cell per stall pattern: the predicted speedup (target-only
    over the replay's broken seconds) and the drafting rounds."""
    def run(gate: str, stalls: str, broken: float, drafting: int) -> dict:
        return {"gate": gate, "stalls": stalls, "target_only_s": 1.0, "broken_s": broken,
                "drafting_rounds": drafting}
    doc = {"patterns": {"none": {}, "first x5": {"0": 5.0}}, "gates": {"observed": True, "lesser": False},
           "rows": [{"bench": "p-t0.0", "source": "data/x/c1/p-t0.0.json.xz", "replays": [
               run("observed", "none", 0.25, 20), run("observed", "first x5", 1.0, 1),
               run("lesser", "none", 0.25, 20), run("lesser", "first x5", 0.5, 18)]}]}
    lines, _ = render.TABLES["copy-stall"]([doc])
    cells = [[c.strip() for c in x.strip("|").split("|")] for x in lines[2:]]
    assert cells == [["p (c1)", "observed", "4.00x (20)", "1.00x (1)"],
                     ["p (c1)", "lesser", "4.00x (20)", "2.00x (18)"]]


def test_copy_texts_groups_rows_by_the_text_they_wrote() -> None:
    """One line per prompt and distinct text, richest first: its copy bounds, the calls whose
    target-only rows wrote it (a call twice: target-only and its A/A twin), and the lookup's
    and the default's rows on it with their speeds."""
    def row(mode: str, source: str | None, sha: str, bound: float, x: float) -> dict:
        return {"name": "r", "mode": mode, "draft_source": source, "output_sha": sha * 4,
                "copy_tokens_per_round": bound, "oracle_tokens_per_round": 2 * bound,
                "vs_target_only": x}
    doc = {"benches": [{"bench": "p-t0.0", "source": "data/h200-2026-12-04-s19/never-slower-5/p",
                        "rows": [row("target-only", None, "aa", 3.0, 1.0),
                                 row("target-only", None, "aa", 3.0, 0.9),
                                 row("speculative", "lookup", "bb", 6.0, 4.5),
                                 row("speculative", "hybrid", "aa", 3.0, 2.0)]}]}
    lines, _ = render.TABLES["copy-texts"]([doc])
    cells = [[c.strip() for c in x.strip("|").split("|")] for x in lines[2:]]
    assert cells == [["p", "`bbbbbbbb`", "6.00", "12.00", "-", "4.50x (s19/5)", "-"],
                     ["p", "`aaaaaaaa`", "3.00", "6.00", "s19/5 (x2)", "-", "2.00x (s19/5)"]]


def test_after_round_replay_accounts_every_token_and_break() -> None:
    """docs/benchmarks/lookup/after_round.py on a text that copies its prompt: every answer
    token is one round's (accepted copies plus one, the last round's one maybe past the
    end), a break is a plain step right after a
    drafting round (so no more than either), and its price is one more one-row step each."""
    from core.dispatch.curve import VerifyCostCurve

    mod = load_script("docs/benchmarks/lookup/after_round.py", "after_round")
    curve = VerifyCostCurve.from_dict({"times": {"auto": {"1": 0.005, "2": 0.009, "33": 0.010}},
                                       "backend": "cuda", "context_len": 64})
    prompt = [7, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12] * 3
    answer = [1, 2, 3, 4, 5, 6, 20, 8, 9, 10, 11, 12, 21, 1, 2, 3, 4, 5, 6]
    for m, a in mod.CONFIGS:
        r = mod.replay(prompt, answer, curve, m, a)
        assert r["rounds"] == r["drafting_rounds"] + r["plain_steps"]
        # the last round may accept the answer's rest: its bonus token runs past the end
        assert len(answer) <= r["accepted"] + r["rounds"] <= len(answer) + 1
        assert r["breaks"] <= min(r["plain_steps"], r["drafting_rounds"])
        assert r["broken_s"] == pytest.approx(r["curve_s"] + r["breaks"] * 0.005)
        assert r["target_only_s"] == pytest.approx(len(answer) * 0.005)
        assert r["drafting_rounds"] > 0  # the repeats are copied


def test_a_stall_changes_what_the_replayed_policy_hears_not_what_it_is_charged() -> None:
    """docs/benchmarks/lookup/stall_replay.py's lever, after_round.replay's `stalls`, on an
    answer that copies its prompt but for one token in seven: with no stall the replay is the
    plain one; its first two rounds heard at 20x their price change only the choices (every
    token still one round's), and at the observed gate (the default) the copies stop: the
    lock-in (59 drafting rounds without the stall, 2 with it)."""
    from core.dispatch.curve import VerifyCostCurve

    mod = load_script("docs/benchmarks/lookup/after_round.py", "after_round")
    curve = VerifyCostCurve.from_dict({"times": {"auto": {"1": 0.005, "2": 0.009, "33": 0.010}},
                                       "backend": "cuda", "context_len": 64})
    base = list(range(100, 160))
    prompt = base * 3
    answer = [500 + i if i % 7 == 3 else base[i % 60] for i in range(240)]
    plain = mod.replay(prompt, answer, curve, 2)
    assert mod.replay(prompt, answer, curve, 2, stalls={}) == plain
    r = mod.replay(prompt, answer, curve, 2, stalls={0: 20.0, 1: 20.0})
    assert len(answer) <= r["accepted"] + r["rounds"] <= len(answer) + 1
    assert r["target_only_s"] == plain["target_only_s"]
    assert (plain["drafting_rounds"], r["drafting_rounds"]) == (59, 2)


def test_lookup_after_round_table_reads_each_config_and_the_measured_row() -> None:
    doc = {"configs": [[2, 0], [2, 1]], "rows": [{
        "bench": "p-t0.0", "source": "data/x/never-slower-2/p-t0.0.json.xz",
        "measured_lookup_x": 1.5,
        "replays": [{"min_match": 2, "after_round": 0, "tokens_per_round": 2.0,
                     "target_only_s": 1.0, "broken_s": 0.5},
                    {"min_match": 2, "after_round": 1, "tokens_per_round": 3.0,
                     "target_only_s": 1.0, "broken_s": 0.25}]}]}
    lines, _ = render.TABLES["lookup-after-round"]([doc])
    assert lines[0] == "| Prompt | match 2+ | match 2+, 1+ after a round | lookup, measured |"
    assert lines[2] == "| p (never-slower-2) | 2.00 / 2.00x | 3.00 / 4.00x | 1.50x |"


def _tree_doc(prompt: str, temp: float, rows: dict[str, tuple[list[float], list[str]]]) -> dict:
    """A tree-ab.sh bench JSON: each row's E2E and output hash per seed; every drafting row
    reports 10 rounds of depth 8 (proposed 80) and 30 accepted tokens."""
    def result(name: str, e2e: list[float], sha: list[str]) -> dict:
        src = {} if name.startswith("target-only") else {
            "tree" if "tree" in name else "lookup": {"rounds": 10, "proposed": 80,
                                                     "accepted": 30}}
        return {"name": name, "e2e_s": e2e, "output_sha": sha, "per_source": src,
                "settings": {"temperature": temp}}
    return {"protocol": {"prompt": {"name": prompt}},
            "environment": {"device_name": "GPU", "mlx": "0.0"},
            "results": [result(n, *v) for n, v in rows.items()]}


def test_tree_keep_ab_pairs_seeds_and_restricts_to_the_seeds_of_one_text() -> None:
    """Each ratio is per seed (the slower seed 1 of gather is paired with refeed's seed 1),
    and the same-text column keeps only the seeds where gather and refeed wrote one text."""
    doc = _tree_doc("p", 0.0, {
        "target-only+flags": ([2.0, 2.0, 2.0], ["a", "a", "a"]),
        "lookup+flags": ([1.0, 1.0, 1.0], ["a", "a", "a"]),
        "lookup:draft_source=tree+flags": ([1.0, 2.0, 1.0], ["a", "b", "a"]),
        "lookup:draft_source=tree,tree_keep=refeed+flags": ([0.5, 1.0, 1.0], ["a", "a", "a"])})
    lines, stat = render.TABLES["tree-keep-ab"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:5] == ["`p`", "0.0", "3", "1.00x (0.50-1.00, n=3)", "1.00x (1.00-2.00, n=3)"]
    assert cells[5] == "2.00x (1.00-2.00, n=3)"  # gather's E2E over refeed's: 2, 2, 1
    assert cells[6] == "1.50x (1.00-2.00, n=2)"  # seeds 0 and 2 only
    assert cells[7:] == ["2.00x (2.00-4.00, n=3)", "8.0 / 3.00", "8.0 / 3.00", "8.0 / 3.00",
                         "A / A / AB / A"]
    assert "output_sha" in stat


def test_tree_phases_splits_the_plain_step_after_a_drafting_round_from_the_rest() -> None:
    """Drafting rounds by row bucket; a plain step right after one apart from the others; the
    request's first round (after the prefill) in neither; rounds past 40 ms named by rows."""
    def rnd(rows: int, source: str, verify: float) -> dict:
        return {"rows": rows, "source": source, "verify_ms": verify, "total_ms": verify + 1}
    trace = [rnd(1, "", 50.0), rnd(1, "", 8.0), rnd(12, "tree", 12.0), rnd(1, "", 20.0),
             rnd(1, "", 10.0), rnd(33, "tree", 14.0), rnd(1, "", 18.0), rnd(65, "tree", 60.0),
             rnd(1, "", 9.0)]
    doc = {"protocol": {"prompt": {"name": "p"}}, "environment": {"specdec_tui_commit": "abc"},
           "results": [{"name": "lookup:draft_source=tree+flags", "trace": trace},
                       {"name": "untraced", "trace": []}]}
    lines, stat = render.TABLES["tree-phases"]([doc])
    assert len(lines) == 3  # an untraced row has no line
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells == ["`p`", "tree (gather)", "3 / 9", "33", "12.0 (1)", "14.0 (1)", "60.0 (1)",
                     "18.0 (3)", "9.0 (2)", "2 (1: 51, 65: 61)"]
    assert "abc" in stat


def test_tree_forward_split_reads_medians_plain_steps_and_first_calls() -> None:
    modes = ("step", "chain", "tree-chain", "tree", "tree-norope", "gather", "trim")
    scale = {"step": 1.0, "chain": 2.0, "tree": 1.5, "gather": 0.5}
    ms = {m: {"12": {"build": [1.0 * scale.get(m, 1.0), 9.0, 1.0 * scale.get(m, 1.0)],
                     "eval": [3.0 * scale.get(m, 1.0)] * 3, "first": [100.0 + i]}}
          for i, m in enumerate(modes)}
    doc = {"device": "GPU", "mlx": "0.0", "model": "m", "context": 669, "buffer": 768,
           "repeats": 3, "ms": ms}
    lines, stat = render.TABLES["tree-forward-split"]([doc])
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:3] == ["12", "1.00 + 3.00", "2.00 + 6.00"]  # medians: one slow build left out
    assert cells[-2] == "2.00 / 1.50 / 0.50"  # over the step's 4 ms
    assert cells[-1] == "100 / 101 / 102 / 103 / 105"  # step, chain, tree-chain, tree, gather
    assert "median" in stat


def test_tree_ceiling_prices_the_goal_after_the_plain_steps() -> None:
    """Target-only 1,000 ms at 4 ms a step: the refactor's 2.6x leaves 385 ms. A row of 50
    plain steps (200 ms) and 10 drafting rounds in a 400 ms request commits 20.6 tokens a
    round at 20 ms each; the goal fits 9.2 such rounds, so 22.3 tokens each. A row whose 100
    plain steps (400 ms) alone pass 385 ms: no round can; a sampled bench is left out."""
    def doc(temp: float) -> dict:
        d = _tree_doc("code-refactor-pasted", temp, {
            "target-only+flags": ([1.0], ["a"]), "lookup+flags": ([0.4], ["a"]),
            "lookup:draft_source=tree,tree_keep=refeed+flags": ([0.6], ["a"])})
        base, chain, tree = d["results"]
        base.update(median_e2e_s=1.0, step_ms=[4.0, 4.0], settings={"temperature": temp})
        chain.update(median_e2e_s=0.4, timed_requests=1, rounds_per_request=60,
                     tokens_per_request=256)
        tree.update(median_e2e_s=0.6, timed_requests=1, rounds_per_request=110,
                    tokens_per_request=256)
        return d

    lines, stat = render.TABLES["tree-ceiling"]([doc(0.0), doc(0.7)])
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert len(rows) == 2  # the T = 0.7 bench has no goal here
    assert rows[0] == ["`code-refactor-pasted`", "2.6x: 385 ms", "chain", "1", "50 (200 ms)",
                       "20.60", "20.0", "22.3"]
    assert rows[1][2] == "tree" and rows[1][4] == "100 (400 ms)"
    assert rows[1][7] == "none can: plain steps alone 400 ms"
    assert "target-only's median plain step" in stat
