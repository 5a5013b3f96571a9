"""tools/device/pack_split.py: the GPU set-up fits in three calls, or four (issue 31).

Each device call carries at most 64 MiB, the working tree included; pack.sh's payload (the
CUDA backend and the default model, xz'd) fills three of them, or four once the tree's raw data
leave three too little room (run 17). When the tree grew to 12 MiB
(most of it raw benchmark JSON) the payload no longer fit and nothing said so until a lease
was spent. These tests hold this checkout's tree against the payload pack_split.py records,
and check the split's rules on sizes whose answer is known (the data folder's compression:
tests/docs/test_rawdata.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO as ROOT
from tests.helpers.scripts import load_script

DEVICE_TOOLS = ROOT / "tools" / "device"
MIB = 1 << 20


# its dataclasses look their module up: registered in sys.modules
split = load_script("tools/device/pack_split.py", "bench_pack_split", register=True)


def test_this_checkout_sets_up_in_four_calls_at_most_with_room_to_spare() -> None:
    tree = split.tree_bytes(ROOT)
    parts = split.plan(tree, split.PAYLOAD)  # raises NoFit, with the sentence, when it cannot
    calls = split.per_call(tree, parts)
    assert len(calls) in (3, 4)
    assert all(n <= split.CALL_BYTES - split.MARGIN_MIB * MIB for n in calls), calls
    # Room to spare: the tree may grow by a few MiB more before the set-up breaks again.
    left = split.spare(tree, split.PAYLOAD, calls=len(calls))
    assert left >= len(calls) * split.MARGIN_MIB * MIB, (
        f"the tree ({tree / MIB:.1f} MiB) leaves {left / MIB:.1f} MiB over the {len(calls)} "
        "calls; shrink it (docs/benchmarks/rawdata.py compress)")


def test_a_fourth_call_only_where_three_leave_too_little_room() -> None:
    """Run 16's tree (9.4 MiB) set up in three calls with room to spare; run 17's raw data
    (1.2 MiB more) left three calls 2 MiB over their payload, under the 3 MiB their margins
    keep, so it takes four; a tree too large for four still says by how much."""
    assert split.calls_for(int(9.3 * MIB), split.PAYLOAD) == 3
    assert split.calls_for(int(10.6 * MIB), split.PAYLOAD) == 4
    parts = split.plan(int(10.6 * MIB), split.PAYLOAD)
    assert max(p.call for p in parts if p.blob == "model") == 3
    assert max(p.call for p in parts if p.blob == "cuda") <= 1
    with pytest.raises(split.NoFit, match=r"the model parts do not fit in 4 calls"):
        split.plan(24 * MIB, split.PAYLOAD)


def test_the_old_twelve_mib_tree_does_not_fit_three_calls() -> None:
    """The control: the tree before the data was compressed (12.0 MiB) must fail in three."""
    with pytest.raises(split.NoFit, match=r"the model parts do not fit in 3 calls: .* MiB over"):
        split.plan(12_610_948, split.PAYLOAD, calls=3)


def test_parts_keep_the_order_the_calls_need() -> None:
    sizes = {"wheels": 2 * MIB, "cuda": 70 * MIB, "model": 90 * MIB}
    parts = split.plan(5 * MIB, sizes)
    assert split.calls_for(5 * MIB, sizes) == 3
    for blob in split.LAST_CALL:
        mine = [p for p in parts if p.blob == blob]
        assert sum(p.size for p in mine) == sizes[blob]
        assert max(p.call for p in mine) <= split.last_call(blob, 3)  # whole when unpacked
        assert [p.start for p in mine] == sorted(p.start for p in mine)
        assert all(a.start + a.size == b.start for a, b in zip(mine, mine[1:], strict=False))
    calls = split.per_call(5 * MIB, parts)
    assert max(calls) - min(calls) <= 1, "the calls share the room evenly"
    assert max(calls) <= split.CALL_BYTES - 2 * MIB


def test_an_even_fill_gives_way_to_the_order() -> None:
    """A CUDA backend larger than two even thirds must fill calls 1 and 2 to their margin."""
    sizes = {"wheels": MIB, "cuda": 110 * MIB, "model": 20 * MIB}
    parts = split.plan(4 * MIB, sizes)
    assert max(p.call for p in parts if p.blob == "cuda") == 1
    room = split.budget(4 * MIB)
    assert split.per_call(4 * MIB, parts)[0] == 4 * MIB + split.SCRIPTS_BYTES + room


def test_split_writes_parts_that_reassemble(tmp_path: Path) -> None:
    device = tmp_path / ".device"
    for c in split.CALLS:
        (device / c).mkdir(parents=True)
    (device / "a" / "x-1.0-py3-none-any.whl").write_bytes(b"w" * 1000)
    cuda, model = tmp_path / "cuda.tar.xz", tmp_path / "model.xz"
    cuda.write_bytes(bytes(range(256)) * 40_000)  # 10 MB
    model.write_bytes(bytes(reversed(range(256))) * 60_000)  # 15 MB
    argv = ["split", "--tree", str(50 * MIB), "--wheels", str(device / "a"), "--cuda", str(cuda),
            "--model", str(model), "--device", str(device)]
    assert split.main(argv) == 0
    for blob, src in (("cuda", cuda), ("model", model)):
        found = sorted(device.glob(f"*/{blob}.part.*"), key=lambda p: int(p.suffix[1:]))
        assert b"".join(p.read_bytes() for p in found) == src.read_bytes()
    for c in split.CALLS:
        carried = sum(p.stat().st_size for p in (device / c).iterdir())
        assert 50 * MIB + carried <= split.CALL_BYTES - 2 * MIB


def test_split_refuses_a_payload_larger_than_recorded(tmp_path: Path, capsys) -> None:
    (tmp_path / "a").mkdir()
    big = tmp_path / "cuda.tar.xz"
    with open(big, "wb") as f:
        f.truncate(split.PAYLOAD["cuda"] + 1)
    assert split.main(["split", "--tree", "0", "--wheels", str(tmp_path / "a"), "--cuda", str(big),
                       "--device", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "record the new sizes in PAYLOAD" in err and "cuda" in err


def test_pack_sh_splits_through_pack_split() -> None:
    text = (DEVICE_TOOLS / "pack.sh").read_text()
    assert "pack_split.py split" in text


def test_tree_bytes_counts_untracked_files_but_not_ignored_ones(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("big/\n")
    (tmp_path / "kept.txt").write_bytes(b"x" * 100)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "blob").write_bytes(b"x" * 10_000)
    assert split.tree_bytes(tmp_path) == 100 + len("big/\n")
