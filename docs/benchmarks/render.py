"""Every table of docs/benchmarks/*.md, rendered from the raw JSON beside it (issue 21).

A page marks each table it generates, and each number of its prose that quotes the data:

    <!-- generated: NAME from data/FILE.json.xz[, data/OTHER.json.xz] -->
    ...table, then one line naming its statistic and its data files...
    <!-- end generated -->

    ... hybrid gained <!-- value: data/FILE.json.xz | ROW | FIELD -->1.02x<!-- /value --> ...

NAME is a key of TABLES (a function of the loaded files; bench_tables/, one module per page or
family of pages), ROW a result's `name` in the bench JSON, FIELD a key of FIELDS
(bench_tables/rows.py). Paths are relative to the page. `python docs/benchmarks/render.py`
rewrites every block and value in place; `--check` rewrites nothing and exits 1 naming each one
that differs from its data (tests/docs/test_benchmark_docs.py runs it).

Medians, minima and ratios are recomputed from each row's raw timings (`e2e_s`), not copied
from the bench's summary fields; every field is read with .get(), so a JSON with more keys
(provenance, say) renders the same. A new section: a JSON file in data/ (compressed there by
`python docs/benchmarks/rawdata.py compress`: the raw data is kept xz'd, rawdata.py says why),
a block in the page, and, if no existing NAME fits, a function in the page's module of
bench_tables/ and one line in TABLES (bench_tables/__init__.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parents[1]))  # the project root, for core.bench.report
sys.path.insert(0, str(ROOT))  # rawdata and bench_tables, beside this file

from bench_tables import TABLES  # noqa: E402
from bench_tables.never_slower import (  # noqa: E402
    DEFAULT_PREFIX,
    NS_CONTROL,
    NS_DEFAULT,
    NS_HYBRID,
    NS_LOOKUP,
    NS_MODEL,
    _norm_pairs,
    _step_pairs,
    _texts,
    ns_names,
)
from bench_tables.probes import _catch_up  # noqa: E402
from bench_tables.rows import FIELDS, Doc, row  # noqa: E402
from rawdata import load_json, read_text  # noqa: E402

# What the tests reach through this module (they load it by path, as a script).
__all__ = ["BLOCK", "DEFAULT_PREFIX", "FIELDS", "NS_CONTROL", "NS_DEFAULT", "NS_HYBRID",
           "NS_LOOKUP", "NS_MODEL", "TABLES", "VALUE", "_catch_up", "_norm_pairs", "_step_pairs",
           "_texts", "check", "load_json", "main", "ns_names", "pages", "render_page", "row"]

BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w.-]+) from (?P<src>[^>]*?) -->\n)(?P<body>.*?)"
                   r"(<!-- end generated -->)", re.S)
VALUE = re.compile(r"(<!-- value: (?P<src>[^|>]+?) \| (?P<row>[^|>]+?) \| (?P<field>[\w.:-]+) -->)"
                   r"(?P<body>.*?)(<!-- /value -->)", re.S)


# -- rewriting the pages -----------------------------------------------------------------------


TEXT_SUFFIXES = (".log", ".txt")


def _load(page: Path, src: str, cache: dict[Path, Doc] | None = None) -> list[Doc]:
    """The files a block names, each parsed once per page (values quote the same files)."""
    cache = {} if cache is None else cache
    out = []
    for s in src.split(","):
        path = (page.parent / s.strip()).resolve()
        if path not in cache:
            # a log or importtime text (plain or .xz) is read as {"name", "text"}; the rest JSON
            plain = Path(path.name.removesuffix(".xz"))
            cache[path] = ({"name": plain.name, "text": read_text(path)}
                           if plain.suffix in TEXT_SUFFIXES else load_json(path))
        out.append(cache[path])
    return out


def _link(src: str) -> str:
    """The block's files as links; where several share a folder, it is named once and each
    link reads the rest of its path (the pages' footers were a third of never-slower.md)."""
    paths = [s.strip() for s in src.split(",")]
    common = os.path.commonpath(paths) if len(paths) > 1 else ""
    if not common or common in paths:
        return ", ".join(f"[{p}]({p})" for p in paths)
    cut = len(common) + 1
    return f"in {common}/: " + ", ".join(f"[{p[cut:]}]({p})" for p in paths)


def render_page(page: Path) -> str:
    """The page with every generated block and value rewritten from its data."""
    text = page.read_text()
    cache: dict[Path, Doc] = {}
    last: list[str] = []  # the files of the block before, in page order

    def block(m: re.Match[str]) -> str:
        name, src = m["name"], m["src"]
        if name not in TABLES:
            raise KeyError(f"{page.name}: no table {name!r} in render.py's TABLES")
        lines, stat = TABLES[name](_load(page, src, cache))
        # A run's tables often read the same files: linked once, then "the same files"
        same = [s.strip() for s in src.split(",")] == last
        data = "the same files as the table before" if same else _link(src)
        last[:] = [s.strip() for s in src.split(",")]
        body = "\n".join(lines) + f"\n\n*{stat[0].upper() + stat[1:]}. Data: {data}.*\n"
        return m.group(1) + body + m.group(5)

    def value(m: re.Match[str]) -> str:
        (doc,) = _load(page, m["src"], cache)
        # a row of "-" quotes a file without bench rows (first-use.json, say)
        r = {} if m["row"] == "-" else row(doc, m["row"])
        return m.group(1) + FIELDS[m["field"]](doc, r) + m.group(6)

    return VALUE.sub(value, BLOCK.sub(block, text))


def pages(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if "data" not in p.relative_to(root).parts)


def check(root: Path = ROOT) -> list[str]:
    """Each generated block or value that differs from its data, as 'page: what'."""
    problems = []
    for page in pages(root):
        old, new = page.read_text(), render_page(page)
        if old == new:
            continue
        olds = [m.group(0) for m in (*BLOCK.finditer(old), *VALUE.finditer(old))]
        news = [m.group(0) for m in (*BLOCK.finditer(new), *VALUE.finditer(new))]
        for o, n in zip(olds, news, strict=True):
            if o != n:
                head = o.splitlines()[0][:120]
                problems.append(f"{page.relative_to(root)}: {head} differs from its data")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 on a mismatch")
    ap.add_argument("--root", type=Path, default=ROOT, help="the benchmarks folder")
    args = ap.parse_args(argv)
    if args.check:
        problems = check(args.root)
        for p in problems:
            print(p)
        return 1 if problems else 0
    for page in pages(args.root):
        new = render_page(page)
        if new != page.read_text():
            page.write_text(new)
            print(f"rewrote {page.relative_to(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
