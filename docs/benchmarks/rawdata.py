"""The raw benchmark data under docs/benchmarks/data/, kept xz-compressed (issue 31).

Why: every device call carries the working tree, and a call carries at most 64 MiB. The raw
JSON beside the reports was over half of the tree (6.8 of 12.6 MB), and with it the GPU
set-up (tools/device/pack.sh: the CUDA backend and the default model) no longer fit
in three calls. Compressed one file at a time with xz, the same JSON is 0.6 MB, each file
still its own diff and its own link from the pages, which cite `data/NAME.json.xz`.

Readers (render.py, real-pair/make_page.py, policy/replay.py, h200/tp_report.py, the tests)
go through `load_json` / `read_text`, which read a `.xz` file or a plain one alike, so a
result just brought back from a device call can be read before it is compressed.
`python docs/benchmarks/rawdata.py compress [FOLDER]` compresses every plain `.json` under
the data folder in place (tests/docs/test_rawdata.py fails while one is left plain);
`bench --curve` reads a `.json.xz` curve directly (core/dispatch/curve.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
# Kinds kept compressed: the raw machine output. Pages and the logs a page cites stay plain
# (people read them on the forge; `raw_log`), and so does the bench's own Markdown where a
# page links to it; a bench's Markdown twin of its JSON that no page links to is compressed
# too (`bench_twin`): by run 6 those twins were 2 of the tree's 9.2 MiB and the GPU set-up no
# longer fit in three calls. Since run 12 an uncited twin is not kept at all (197 of them,
# 0.6 MiB xz'd, left the tree then): every number a page renders is read from the JSON, and
# the device calls' results are unpacked without them (never-slower.md, run 12's "Reproduce").
COMPRESSED = (".json",)
PAGES = (Path(__file__).resolve().parents[2] / "docs", Path(__file__).resolve().parents[2] / "README.md")
XZ_PRESET = 9 | lzma.PRESET_EXTREME


# Decompressed xz files by their compressed bytes' digest: rendering every page reads 34 MB out
# of 400 files, and the docs tests render pages and copies of them again and again in one
# process (a copy has the same bytes, so it hits too). Keyed by content, never by name or
# mtime, so a file rewritten in place is read anew.
_XZ_CACHE: dict[bytes, bytes] = {}


def read_bytes(path: str | Path) -> bytes:
    """A data file's bytes, decompressed when its name ends in `.xz`."""
    p = Path(path)
    raw = p.read_bytes()
    if p.suffix != ".xz":
        return raw
    key = hashlib.blake2b(raw, digest_size=20).digest()
    if key not in _XZ_CACHE:
        try:
            _XZ_CACHE[key] = lzma.decompress(raw)
        except lzma.LZMAError as exc:
            raise ValueError(f"{p} is not a readable xz file ({exc}).") from None
    return _XZ_CACHE[key]


def read_text(path: str | Path) -> str:
    """A data file's text (UTF-8), decompressed when its name ends in `.xz`."""
    return read_bytes(path).decode("utf-8")


def load_json(path: str | Path) -> Any:
    """A data file's JSON, decompressed when its name ends in `.xz`."""
    return json.loads(read_text(path))


def write_json(path: str | Path, doc: Any) -> None:
    """Write `doc` as JSON, xz-compressed when the name ends in `.xz` (tests perturb data)."""
    p = Path(path)
    text = json.dumps(doc).encode("utf-8")
    p.write_bytes(lzma.compress(text, preset=XZ_PRESET) if p.suffix == ".xz" else text)


def find(folder: str | Path, name: str) -> Path | None:
    """`folder/name` or `folder/name.xz`, whichever exists (the plain one first)."""
    for candidate in (Path(folder) / name, Path(folder) / f"{name}.xz"):
        if candidate.is_file():
            return candidate
    return None


def glob_json(folder: str | Path, recursive: bool = False) -> list[Path]:
    """Every `.json` and `.json.xz` in `folder`, sorted by the name they read as."""
    folder = Path(folder)
    found = [*folder.glob("**/*.json" if recursive else "*.json"),
             *folder.glob("**/*.json.xz" if recursive else "*.json.xz")]
    return sorted(found, key=lambda p: (str(plain_name(p)), p.suffix == ".xz"))


def plain_name(path: Path) -> Path:
    """The name a data file reads as: `x.json.xz` -> `x.json`."""
    return path.with_suffix("") if path.suffix == ".xz" else path


def linked_names(pages: Sequence[Path] = PAGES) -> set[str]:
    """The file names the pages (docs/**/*.md outside the data folder, README.md) link to or
    cite: a plain file any of them names stays plain."""
    texts = []
    for root in pages:
        files = [root] if root.is_file() else [p for p in root.rglob("*.md") if DATA not in p.parents]
        texts += [f.read_text(encoding="utf-8", errors="replace") for f in files if f.is_file()]
    return {m for t in texts for m in re.findall(r"[\w./-]+\.(?:md|log)\b", t)}


def bench_twin(path: Path, linked: set[str]) -> bool:
    """A bench's Markdown report beside its JSON (`x.md` with `x.json` or `x.json.xz`), cited
    by no page: the JSON holds every number, so the twin travels compressed."""
    if path.suffix != ".md" or not any(
        (path.with_suffix(ext)).is_file() for ext in (".json", ".json.xz")
    ):
        return False
    return not _cited(path, linked)


def _cited(path: Path, linked: set[str]) -> bool:
    """Whether a page names `path` by its place in the data folder (a bare name is no cite).
    The path is resolved first: a relative one (`compress docs/benchmarks/data/...`) was read
    by its bare name, which any cite of a same-named log elsewhere matched, so run 9's logs
    stayed plain."""
    path = path.resolve()
    rel = path.relative_to(DATA.parent).as_posix() if DATA.parent in path.parents else path.name
    return any(name.endswith(rel) or rel.endswith(name) for name in linked if "/" in name)


def raw_log(path: Path, linked: set[str]) -> bool:
    """A device call's log under the data folder that no page cites or renders from: raw
    output like the JSON, so it travels compressed (by run 8 such logs were 0.8 MiB of a 9.2
    MiB tree, and the GPU set-up no longer fit in three calls). A cited log stays plain."""
    return path.suffix == ".log" and not _cited(path, linked)


def uncompressed(folder: str | Path = DATA, linked: set[str] | None = None) -> Iterator[Path]:
    """Every file under `folder` of a kind kept compressed that is still plain: raw JSON, the
    bench's Markdown twins no page cites, and the logs no page cites."""
    names = linked_names() if linked is None else linked
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file() and (p.suffix in COMPRESSED or bench_twin(p, names) or raw_log(p, names)):
            yield p


def compress(path: Path) -> Path:
    """`path` replaced by `path.xz` (its bytes checked to read back the same first)."""
    raw = path.read_bytes()
    packed = lzma.compress(raw, preset=XZ_PRESET)
    if lzma.decompress(packed) != raw:
        raise RuntimeError(f"xz did not read {path} back the same; left it plain.")
    out = path.with_name(path.name + ".xz")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(packed)
    tmp.replace(out)
    path.unlink()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compress", help="compress every plain .json (and uncited bench .md) "
                       "under the data folder")
    c.add_argument("folder", nargs="?", type=Path, default=DATA)
    cat = sub.add_parser("cat", help="print a data file, decompressed")
    cat.add_argument("path", type=Path)
    args = ap.parse_args(argv)
    if args.command == "cat":
        sys.stdout.write(read_text(args.path))
        return 0
    before = after = 0
    for p in list(uncompressed(args.folder)):
        before += p.stat().st_size
        after += compress(p).stat().st_size
        print(f"compressed {p}")
    print(f"{before / 2**20:.2f} MiB -> {after / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
