"""docs/benchmarks/rawdata.py: the raw benchmark data is kept xz-compressed (every device call
carries the working tree, tools/device/pack_split.py counts it), read either way, and every
page's link to a data file finds it."""

from __future__ import annotations

import lzma
from pathlib import Path

from tests.helpers.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "docs" / "benchmarks"

rawdata = load_script("docs/benchmarks/rawdata.py", "bench_rawdata", register=True)

def test_the_data_folder_keeps_its_json_compressed() -> None:
    plain = [str(p.relative_to(ROOT)) for p in rawdata.uncompressed(rawdata.DATA)]
    assert plain == [], ("raw JSON left uncompressed (it travels with every device call): run "
                         f"`python docs/benchmarks/rawdata.py compress`: {plain}")


def test_rawdata_reads_both_and_compresses_in_place(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    f.write_text('{"results": [1, 2]}')
    assert rawdata.load_json(f) == {"results": [1, 2]}
    assert [p.name for p in rawdata.uncompressed(tmp_path)] == ["r.json"]
    assert rawdata.main(["compress", str(tmp_path)]) == 0
    packed = tmp_path / "r.json.xz"
    assert not f.exists() and lzma.decompress(packed.read_bytes()) == b'{"results": [1, 2]}'
    assert rawdata.load_json(packed) == {"results": [1, 2]}
    assert rawdata.find(tmp_path, "r.json") == packed
    assert list(rawdata.uncompressed(tmp_path)) == []


def test_every_page_cites_data_that_exists() -> None:
    """A page's link to data/X.json whose file is now X.json.xz would be a dead link."""
    import re

    dead = []
    for page in [*BENCH.rglob("*.md"), ROOT / "README.md", ROOT / "docs" / "dispatch.md"]:
        if "data" in page.relative_to(ROOT).parts[2:3]:
            continue  # the bench's own Markdown outputs quote their commands as they ran
        for m in re.finditer(r"\]\(((?:\.\./)*(?:benchmarks/)?data/[^)#\s]+)\)", page.read_text()):
            if not (page.parent / m[1]).exists():
                dead.append(f"{page.relative_to(ROOT)}: {m[1]}")
    assert dead == []


def test_a_benchs_markdown_twin_is_compressed_unless_a_page_cites_it(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """x.md beside x.json(.xz) is raw output too (the JSON holds its numbers): compressed,
    unless a page names it; a summary or a README with no JSON twin stays plain."""
    data = tmp_path / "data"
    run = data / "run"
    run.mkdir(parents=True)
    for name in ("a.json.xz", "a.md", "b.json", "b.md", "summary.md"):
        (run / name).write_text("x")
    monkeypatch.setattr(rawdata, "DATA", data)
    linked = {"data/run/b.md"}
    found = [p.name for p in rawdata.uncompressed(data, linked)]
    assert found == ["a.md", "b.json"]
    assert [p.name for p in rawdata.uncompressed(data, set())] == ["a.md", "b.json", "b.md"]


def test_a_log_no_page_cites_is_compressed(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A device call's log is raw output: compressed unless a page cites it (or renders a
    table from it), which keeps it plain for readers on the forge."""
    data = tmp_path / "data"
    run = data / "run"
    run.mkdir(parents=True)
    for name in ("call.log", "cited.log", "method.txt"):
        (run / name).write_text("x")
    monkeypatch.setattr(rawdata, "DATA", data)
    assert [p.name for p in rawdata.uncompressed(data, {"data/run/cited.log"})] == ["call.log"]
    assert [p.name for p in rawdata.uncompressed(data, set())] == ["call.log", "cited.log"]
    # a folder named relative to the working directory, a same-named log cited in another run
    monkeypatch.chdir(tmp_path)
    elsewhere = {"data/earlier/call.log"}
    assert [p.name for p in rawdata.uncompressed(Path("data/run"), elsewhere)] == [
        "call.log", "cited.log"]
    page = tmp_path / "page.md"
    page.write_text("<!-- generated: x from data/run/cited.log -->\n[log](data/run/other.log)\n")
    assert rawdata.linked_names([page]) == {"data/run/cited.log", "data/run/other.log"}


def test_an_xz_file_rewritten_in_place_is_read_anew(tmp_path: Path) -> None:
    """read_bytes keeps each decompressed file by its compressed bytes: a second read of the
    same bytes (the same file, or a copy) decompresses nothing, and a file rewritten in place
    (the docs tests perturb copies of the data) reads its new content."""
    f, twin = tmp_path / "r.json.xz", tmp_path / "twin.json.xz"
    rawdata.write_json(f, {"x": 1})
    twin.write_bytes(f.read_bytes())
    before = len(rawdata._XZ_CACHE)
    assert rawdata.load_json(f) == {"x": 1} and rawdata.load_json(twin) == {"x": 1}
    assert len(rawdata._XZ_CACHE) == before + 1
    rawdata.write_json(f, {"x": 2})
    assert rawdata.load_json(f) == {"x": 2} and rawdata.load_json(twin) == {"x": 1}
