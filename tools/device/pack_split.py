"""How pack.sh's payload fills the set-up calls (three, or four when the tree needs it), each at
most 64 MiB with the tree.

Why a module: the rule decides whether a fresh GPU machine can be set up in three calls
(issue 31), so it is stated once and tested (tests/tools/device/test_pack_fit.py), not buried in a
heredoc. Every call carries the working tree that travels with it (tracked and untracked,
not ignored, files) plus its .device folder, at most CALL_BYTES in all. The payload is the
packed wheels (call 1), the xz'd CUDA backend (whole after call 2, where install.sh unpacks
it) and, with --default-model, the xz'd default model (whole after call 3, where model.sh
checks its sha256). Parts fill the calls in that order, each call leaving a margin for the
tree to grow between packing and the calls. Three calls while they hold it; a fourth (the
model's last part and model.sh) once the tree's raw data leave three too little room (run 17:
its step-split data would have left 2 MiB over the three calls, under their 3 MiB of margins):
a call costs seconds of device time, where a smaller tree would mean dropping raw data.

PAYLOAD records what pack.sh last packed (bytes), so the fit test runs anywhere without the
400 MB of downloads: pack.sh refuses a payload larger than recorded (a new MLX, a different
xz) until PAYLOAD says so, and the test then holds the new sizes.

    python3 tools/device/pack_split.py split --wheels DIR --cuda FILE \
        [--model FILE] [--margin-mib 1.5] [--tree BYTES]      # pack.sh's step: writes the parts
    python3 tools/device/pack_split.py fit            # this checkout, recorded payload
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CALL_BYTES = 64 << 20  # what one device call carries: its tree and its carried paths
CALLS = ("a", "b", "c", "d")  # the most set-up calls; `calls_for` picks 3 or 4
FEWEST = 3
# Per call, for the tree to grow between packing and the calls: only what a session edits
# between them, tens of KiB (the data lands after the calls). 2 MiB until run 14, whose data
# left the three calls 0.1 MiB short at that margin; 1.5 until run 16, whose data (0.24 MiB)
# left them 0.3 MiB short again; 1.0 keeps about 1 MiB of room for the tree's growth (about
# 0.2 MiB a run): the next shortfall needs a fourth call or raw data outside the tree.
MARGIN_MIB = 1.0
SCRIPTS_BYTES = 16 << 10  # stage.sh, install.sh, model.sh: written after the split
# What pack.sh packed last (mlx 0.32.4 + mlx-cuda-13 0.32.4 at xz -6 in a fixed order, the
# pinned default GGUF at xz -6): the wheels of PACK, the CUDA backend's tar.xz, the model's xz.
PAYLOAD = {"wheels": 1_538_643, "cuda": 75_362_464, "model": 90_467_832}
# Which call each blob must be whole after (0-based): install.sh unpacks the CUDA backend in
# call 2; model.sh reassembles the model in the last call (None: the last of those used).
LAST_CALL: dict[str, int | None] = {"wheels": 0, "cuda": 1, "model": None}


def last_call(blob: str, calls: int) -> int:
    """The call (0-based) by which `blob` must be whole, with `calls` set-up calls."""
    last = LAST_CALL[blob]
    return calls - 1 if last is None else last


class NoFit(ValueError):
    """The payload cannot be split over the calls; the message says by how much."""


@dataclass(frozen=True)
class Part:
    blob: str  # "wheels", "cuda", "model"
    index: int  # the blob's n-th part
    call: int  # 0, 1, 2: the call that carries it
    start: int  # byte offset in the blob
    size: int


def calls_for(tree: int, sizes: dict[str, int], margin_mib: float = MARGIN_MIB,
              call_bytes: int = CALL_BYTES) -> int:
    """The fewest set-up calls (3 or 4) whose plan fits and leaves the room the fit test asks
    for (`spare` at least a margin a call), so the tree can still grow a little after pack.sh.
    Raises NoFit (with the four calls' sentence) when even four do not fit."""
    for n in range(FEWEST, len(CALLS)):
        try:
            plan(tree, sizes, margin_mib, call_bytes, calls=n)
        except NoFit:
            continue
        if spare(tree, sizes, call_bytes, n) >= n * margin_mib * 2**20:
            return n
    plan(tree, sizes, margin_mib, call_bytes, calls=len(CALLS))  # NoFit says by how much
    return len(CALLS)


def budget(tree: int, margin_mib: float = MARGIN_MIB, call_bytes: int = CALL_BYTES) -> int:
    """Bytes of payload one call can carry beside the tree, its scripts and the margin."""
    return call_bytes - tree - SCRIPTS_BYTES - int(margin_mib * 2**20)


def plan(tree: int, sizes: dict[str, int], margin_mib: float = MARGIN_MIB,
         call_bytes: int = CALL_BYTES, calls: int | None = None) -> list[Part]:
    """The parts over `calls` set-up calls (None: `calls_for`'s), filling them in order
    (wheels whole in call 1, then the CUDA backend, then the model), each blob whole by its
    last call. Raises NoFit with a sentence.

    The calls are filled evenly where the order allows (each to a third of the payload), so
    the room left is shared: every call can take the same growth of the tree before pack.sh
    must run again; only when an even fill breaks the order does a call fill to its margin."""
    if calls is None:
        calls = calls_for(tree, sizes, margin_mib, call_bytes)
    room = budget(tree, margin_mib, call_bytes)
    if room <= 0:
        raise NoFit(f"the working tree ({tree / 2**20:.1f} MiB) leaves no room in a call of "
                    f"{call_bytes / 2**20:.0f} MiB: make the tree smaller")
    even = -(-sum(sizes.values()) // calls)
    if even < room:
        try:
            return _fill(tree, sizes, even, margin_mib, room, calls)
        except NoFit:
            pass
    return _fill(tree, sizes, room, margin_mib, room, calls)


def _fill(tree: int, sizes: dict[str, int], limit: int, margin_mib: float,
          room: int, calls: int) -> list[Part]:
    used = [0] * calls
    parts: list[Part] = []
    for blob in ("wheels", "cuda", "model"):
        size = sizes.get(blob, 0)
        if not size:
            continue
        if blob == "wheels":  # wheels are whole files: they do not split
            if size > room:
                raise NoFit(f"the wheels ({size / 2**20:.1f} MiB) do not fit beside the "
                            f"{tree / 2**20:.1f} MiB tree in one call")
            parts.append(Part(blob, 0, 0, 0, size))
            used[0] += size
            continue
        start, n = 0, 0
        for call in range(last_call(blob, calls) + 1):
            take = min(limit - used[call], size - start)
            if take > 0:
                parts.append(Part(blob, n, call, start, take))
                used[call] += take
                start += take
                n += 1
        if start < size:
            short = size - start
            raise NoFit(
                f"the {blob} parts do not fit in {last_call(blob, calls) + 1} calls: "
                f"{short / 2**20:.1f} MiB over, with {room / 2**20:.1f} MiB a call (64 MiB less "
                f"the {tree / 2**20:.1f} MiB working tree, the scripts and a {margin_mib:g} MiB "
                "margin): make the tree smaller (docs/benchmarks/rawdata.py)"
            )
    return parts


def per_call(tree: int, parts: Sequence[Part]) -> list[int]:
    """Bytes each call carries: its tree, scripts and parts (the calls the parts use, at
    least FEWEST)."""
    out = [tree + SCRIPTS_BYTES] * max(FEWEST, 1 + max((p.call for p in parts), default=0))
    for p in parts:
        out[p.call] += p.size
    return out


def spare(tree: int, sizes: dict[str, int], call_bytes: int = CALL_BYTES,
          calls: int = FEWEST) -> int:
    """Bytes left over in `calls` calls once everything is packed, margins not counted."""
    return calls * (call_bytes - tree - SCRIPTS_BYTES) - sum(sizes.values())


def tree_bytes(root: str | Path) -> int:
    """The working tree a device call carries: tracked and untracked, not ignored, files."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                         capture_output=True, check=True).stdout
    total = 0
    for name in out.split(b"\0"):
        if name:
            try:
                st = os.lstat(Path(root) / os.fsdecode(name))
            except FileNotFoundError:  # deleted, not yet staged
                continue
            total += st.st_size
    return total


def write_parts(parts: Sequence[Part], blobs: dict[str, Path], device: Path) -> None:
    """Each part of the CUDA backend and the model into device/<call>/<blob>.part.<n>."""
    for p in parts:
        if p.blob == "wheels":
            continue
        with open(blobs[p.blob], "rb") as f:
            f.seek(p.start)
            data = f.read(p.size)
        (device / CALLS[p.call] / f"{p.blob}.part.{p.index}").write_bytes(data)


def _check_recorded(sizes: dict[str, int]) -> None:
    over = [f"{b} {n:,} bytes (recorded {PAYLOAD[b]:,})" for b, n in sizes.items()
            if n > PAYLOAD[b]]
    if over:
        raise NoFit("the payload grew past what pack_split.py records, so the fit test no "
                    f"longer holds it: {', '.join(over)}; record the new sizes in PAYLOAD")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split", help="write the parts into .device/a, b, c[, d] (pack.sh)")
    s.add_argument("--tree", type=int, default=None,
                   help="the working tree's bytes (default: this checkout's, as a call counts)")
    s.add_argument("--wheels", type=Path, required=True, help="the folder of packed wheels")
    s.add_argument("--cuda", type=Path, required=True)
    s.add_argument("--model", type=Path, default=None)
    s.add_argument("--device", type=Path, default=Path(".device"))
    s.add_argument("--margin-mib", type=float, default=MARGIN_MIB)
    f = sub.add_parser("fit", help="whether this checkout and the recorded payload fit")
    f.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[3])
    f.add_argument("--margin-mib", type=float, default=MARGIN_MIB)
    args = ap.parse_args(argv)
    try:
        if args.command == "fit":
            tree, sizes, blobs = tree_bytes(args.root), dict(PAYLOAD), {}
        else:
            tree = tree_bytes(Path.cwd()) if args.tree is None else args.tree
            sizes = {"wheels": sum(p.stat().st_size for p in args.wheels.glob("*.whl")),
                     "cuda": args.cuda.stat().st_size,
                     "model": args.model.stat().st_size if args.model else 0}
            _check_recorded(sizes)
            blobs = {"cuda": args.cuda, **({"model": args.model} if args.model else {})}
        parts = plan(tree, sizes, args.margin_mib)
    except NoFit as exc:
        print(f"pack.sh: {exc}.", file=sys.stderr)
        return 2
    if args.command == "split":
        write_parts(parts, blobs, args.device)
    load = per_call(tree, parts)
    print("per call (MiB, with the tree): " + ", ".join(
        f"{c} {n / 2**20:.1f}" for c, n in zip(CALLS, load, strict=False)))
    print(f"set-up calls: {len(load)}; spare over them: "
          f"{spare(tree, sizes, calls=len(load)) / 2**20:.1f} MiB (tree {tree / 2**20:.1f} MiB a call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
