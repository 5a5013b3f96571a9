"""docs/benchmarks/real-pair.md and README.md's headline of it, held to the committed H200 sweep.

The page is written whole by docs/benchmarks/real-pair/make_page.py from the raw sweeps in
docs/benchmarks/data/h200-real-pair-judged/; these tests render it again from that data and
compare, so an edited number, a stale page or a machine path in it fails here, and README's
headline paragraph must be the one the script computes.
"""

from __future__ import annotations

import copy
import re
import sys

import pytest

from tests.helpers import REPO as ROOT
from tests.helpers.scripts import load_script

PAGE = ROOT / "docs" / "benchmarks" / "real-pair.md"
SWEEPS = ROOT / "docs" / "benchmarks" / "data" / "h200-real-pair-judged"
# An absolute path of a machine (the GPU's staging folder, a home, a temporary folder).
MACHINE_PATH = re.compile(r"(?<![\w.:/-])/(?:root|home|tmp|Users|work|var|opt)/")


make_page = load_script("docs/benchmarks/real-pair/make_page.py", "make_page")


@pytest.fixture(scope="module")
def sweep() -> dict:
    docs = make_page.load_sweeps(SWEEPS)
    assert len(docs) == 1, "one sweep (real-pair-judged.sh) expected in the data folder"
    return docs[0]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_committed_page_is_what_make_page_renders(tmp_path, monkeypatch):
    out = tmp_path / "real-pair.md"
    monkeypatch.setattr(sys, "argv", ["make_page.py", "--out", str(out)])
    assert make_page.main() == 0
    assert out.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8"), (
        "docs/benchmarks/real-pair.md differs from its data: run "
        "`python docs/benchmarks/real-pair/make_page.py`")
    svg = PAGE.with_name("real-pair-frontier.svg")
    assert (tmp_path / svg.name).read_text(encoding="utf-8") == svg.read_text(encoding="utf-8")


def test_the_page_names_models_without_machine_paths(sweep):
    text = PAGE.read_text(encoding="utf-8")
    spec = sweep["models"]["identities"]["target"]["spec"]
    assert spec.startswith("/"), "the raw sweep records the GPU's path; the page must cut it"
    assert spec not in text and MACHINE_PATH.search(text) is None
    for role in ("target", "draft"):
        assert sweep["models"]["identities"][role]["sha256"] in text
    assert "docs/benchmarks/real-pair/fetch.py" in text
    assert "![speed against NLL given up, measured on NVIDIA H200](real-pair-frontier.svg)" in text
    assert "| predicted, 7B target | predicted, 72B target |" in text  # apart from measured


def test_readme_quotes_the_headline_the_data_gives(sweep):
    line = make_page.headline(sweep, make_page.big_curves())
    assert _words(line) in _words((ROOT / "README.md").read_text(encoding="utf-8"))
    assert _words(line) in _words(PAGE.read_text(encoding="utf-8"))
    half = next(c for c in sweep["cells"] if c["name"] == "fixed-8 TV=0.5")
    assert f"TV 0.5 runs at {half['speedup']:.2f}x ({half['speedup_min']:.2f}-" in line
    assert f"NLL given up {half['nll_delta']:+.3f}" in line


def test_the_headline_follows_the_numbers(sweep):
    """Slower per-prompt medians drop the 'passes 1.00x' list; a cell faster than target-only
    turns the verdict, so the paragraph cannot keep saying what the data no longer does."""
    curves: list = []
    doc = copy.deepcopy(sweep)
    for c in doc["cells"]:
        if c.get("kind") == "speculative":
            for x in c["per_prompt"].values():
                x["speedup"] = min(x["speedup"], 0.99)
    assert "No prompt's median passes 1.00x at any budget." in make_page.headline(doc, curves)
    assert "no TV budget makes this pair faster" in make_page.headline(doc, curves)
    next(c for c in doc["cells"] if c["name"] == "fixed-8 TV=1")["speedup"] = 1.5
    text = make_page.headline(doc, curves)
    assert "a TV budget does make this pair faster (the best, fixed-8 TV=1, 1.50x" in text


def test_a_greedy_part_leaves_the_headline_at_the_sampled_temperature(sweep):
    """When greedy blocks join the data (cells of the same names at T = 0), the headline still
    quotes T = 0.7's cells, and the per-prompt tables come once per temperature."""
    curves: list = []
    doc = copy.deepcopy(sweep)
    greedy = copy.deepcopy(doc["cells"])
    for c in greedy:
        c.update(temperature=0.0, id=c["id"].replace("T=0.7", "T=0"), speedup=9.0)
    doc["cells"] = greedy + doc["cells"]
    doc["grid"] = {**doc["grid"], "temperatures": [0.0, 0.7]}
    assert make_page.headline(doc, curves) == make_page.headline(sweep, curves)
    lines = make_page.per_prompt_lines(doc)
    assert "### Per prompt, T = 0\n" in lines and "### Per prompt, T = 0.7\n" in lines


def test_the_page_quotes_where_each_tv_step_first_leaves_target_only(sweep):
    """One passage per TV step, the same seed's two texts split where they first differ: the
    shared text plus each continuation is each whole text, the continuations start apart, and
    the page quotes them."""
    found = make_page.departures(sweep)
    assert [d.cell["tv"] for d in found] == [0.0, 0.25, 0.5, 0.75, 1.0]
    texts = {(b["prompt"], r["name"]): r for b in sweep["texts"] for r in b["rows"]}
    page = PAGE.read_text(encoding="utf-8")
    for d in found:
        mine = next(t for t in texts[(d.prompt, d.cell["name"])]["texts"] if t["seed"] == d.seed)
        base = next(t for t in texts[(d.prompt, "target-only")]["texts"] if t["seed"] == d.seed)
        assert d.shared + d.mine == "".join(mine["pieces"])
        assert d.shared + d.theirs == "".join(base["pieces"])
        assert mine["ids"][: d.at] == base["ids"][: d.at] and mine["ids"][d.at] != base["ids"][d.at]
        assert f"**TV = {d.cell['tv']:g}** ({d.cell['name']}; {d.prompt}, seed {d.seed};" in page


def test_the_committed_reading_pages_are_what_sweep_read_renders(tmp_path):
    """docs/benchmarks/real-pair-reading.html and .md (every seed's text beside target-only's)
    are `specdec-tui sweep --read` of the raw sweep, judged again by today's checks."""
    import lzma

    from core.cli import main

    (raw,) = SWEEPS.glob("*.json.xz")
    saved = tmp_path / "sweep.json"
    saved.write_bytes(lzma.decompress(raw.read_bytes()))
    out = tmp_path / "reading.html"
    assert main(["sweep", "--read", str(saved), "--out", str(out)]) == 0
    for page in ("real-pair-reading.html", "real-pair-reading.md"):
        mine = out.with_suffix(page.rsplit(".", 1)[1] and "." + page.rsplit(".", 1)[1])
        assert mine.read_text(encoding="utf-8") == (PAGE.parent / page).read_text(
            encoding="utf-8"), (f"docs/benchmarks/{page} differs from its data: run "
                                "`specdec-tui sweep --read <the data's JSON> --out "
                                "docs/benchmarks/real-pair-reading.html --force`")
