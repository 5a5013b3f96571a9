"""The reading page (core/sweep/reading_page.py): HTML with no external asset and everything
the model wrote escaped, the columns and the divergence mark, the chat's origin colours, the
Markdown fallback, `sweep --read` from a saved result under the one output rule, and the page
in headless Chromium (two columns and the mark in its DOM, a screenshot taken)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from core.chat.palette import COMMITTED_STYLES
from core.cli import main
from core.sweep.judge import rejudge
from core.sweep.reading_page import reading_html, reading_markdown, reading_paths
from tests.helpers.chromium import chromium_path, run_chromium
from tests.helpers.reading import MARKUP, sample_sweep

ROOT = Path(__file__).resolve().parents[3]


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text inside <mark> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.marks: list[str] = []
        self._in_mark = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_mark = tag == "mark"

    def handle_endtag(self, tag: str) -> None:
        self._in_mark = False if tag == "mark" else self._in_mark

    def handle_data(self, data: str) -> None:
        if self._in_mark:
            self.marks.append(data)


def parsed(page: str) -> Elements:
    p = Elements()
    p.feed(page)
    return p


def test_the_page_is_self_contained_and_escapes_what_the_model_wrote():
    page = reading_html(sample_sweep())
    assert MARKUP not in page and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;amp;" in page
    tags = parsed(page).tags
    assert [t for t, _ in tags].count("script") == 0  # the model's <script> stayed text
    assert not any(t in ("link", "img", "iframe") for t, _ in tags)
    assert not re.search(r"(src|href)=|url\(|https?://", page)  # no external asset at all


def test_the_page_has_a_column_per_text_and_the_divergence_marks():
    p = parsed(reading_html(sample_sweep()))
    sections = [a for t, a in p.tags if t == "section"]
    assert [(a["data-prompt"], a["data-seed"]) for a in sections] == [("rename", "0"),
                                                                      ("rename", "1")]
    cells = [a["data-cell"] for t, a in p.tags if t == "article"]
    assert cells[:4] == ["T=0.7 target-only", "T=0.7 draft-only", "T=0.7 fixed-8 TV=0",
                         "T=0.7 cost-aware TV=1"]
    assert len(cells) == 8  # two seeds, four columns each
    # the explanation's sample, then draft-only at token 0 and cost-aware TV=1 at token 3
    assert p.marks == ["▶", *["▶0", "▶3"] * 2]


def test_tokens_are_coloured_with_the_chat_palette():
    page = reading_html(sample_sweep())
    for origin, style in COMMITTED_STYLES.items():
        hexcolour = style.color.get_truecolor().hex
        assert re.search(rf"\.o-{origin} {{ color: {hexcolour};", page), origin
    classes = [a.get("class") for t, a in parsed(page).tags if t == "span"]
    assert "o-corrected" in classes and "o-bonus" in classes and "o-target" in classes
    assert "o-draft after" in classes  # draft-only leaves at its first token
    assert "o-accepted after" in classes  # cost-aware TV=1's tokens past its divergence


def test_the_markdown_fallback_marks_and_escapes():
    md = reading_markdown(sample_sweep())
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "### rename, T = 0.7, seed 0" in md and "### rename, T = 0.7, seed 1" in md
    assert md.count("| target-only | draft-only | fixed-8 TV=0 | cost-aware TV=1 |") == 2
    assert md.count("**▶3**") == 2 and md.count("**▶0**") == 2
    assert "check **failed**" in md and "no text for this seed" not in md
    empty = reading_markdown({"kind": "specdec-tui sweep", "cells": []})
    assert "kept no texts" in empty


def _saved(tmp_path: Path, data: dict | None = None) -> Path:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data or sample_sweep()))
    return path


def test_sweep_read_renders_a_saved_result_beside_it_or_at_out(tmp_path, capsys):
    result = _saved(tmp_path)
    assert main(["sweep", "--read", str(result)]) == 0
    html, md = reading_paths(result)
    assert html.name == "result.reading.html" and md.name == "result.reading.md"
    judged = rejudge(sample_sweep())  # a saved sweep is judged again by today's checks
    assert html.read_text() == reading_html(judged)
    assert md.read_text() == reading_markdown(judged)
    # An existing page is replaced only with --force, and neither file is touched without it.
    html.write_text("old")
    assert main(["sweep", "--read", str(result)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert html.read_text() == "old"
    assert main(["sweep", "--read", str(result), "--force"]) == 0 and html.read_text() != "old"
    out = tmp_path / "page.html"
    assert main(["sweep", "--read", str(result), "--out", str(out)]) == 0
    assert out.is_file() and (tmp_path / "page.md").is_file()
    # The result itself is never an output, even with --force.
    assert main(["sweep", "--read", str(result), "--out", str(result), "--force"]) == 2
    assert "the sweep this command reads" in capsys.readouterr().err
    assert json.loads(result.read_text())["kind"] == "specdec-tui sweep"


def test_sweep_read_refuses_what_is_not_a_sweep_and_reads_an_old_one(tmp_path, capsys):
    bad = tmp_path / "bench.json"
    bad.write_text(json.dumps({"results": []}))
    assert main(["sweep", "--read", str(bad)]) == 2
    assert "is not a sweep's JSON" in capsys.readouterr().err
    old = sample_sweep()
    for row in old["texts"][0]["rows"]:
        del row["texts"]  # saved before the timed texts existed
    result = _saved(tmp_path, old)
    assert main(["sweep", "--read", str(result)]) == 0
    assert "leaves target-only&#39;s text at character 10" in reading_paths(result)[0].read_text()
    assert main(["sweep", "--out", str(tmp_path / "x.html")]) == 2  # --out only with --read


@pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed "
                    "(apt-get install -y chromium)")
def test_the_page_in_headless_chromium_shows_columns_and_the_mark(tmp_path):
    page = tmp_path / "reading.html"
    page.write_text(reading_html(sample_sweep()))
    dom = run_chromium(page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    p = parsed(dom.stdout)
    first = [a for t, a in p.tags if t == "article"][:4]
    assert len(first) == 4 and first[0]["data-cell"] == "T=0.7 target-only"
    assert "▶3" in p.marks and "class=\"diverge\"" in dom.stdout
    png = tmp_path / "reading.png"
    shot = run_chromium(page, f"--screenshot={png}", "--window-size=1400,900")
    assert shot.returncode == 0, shot.stderr[-2000:]
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert (width, height) == (1400, 900)
