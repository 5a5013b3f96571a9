"""core/io/untrusted.py's read_bounded_xz: an xz'd curve (the repository keeps its raw
benchmark JSON compressed) is read like a plain one, and stays bounded: a small file that
decompresses past the bound, a damaged stream and a truncated one are each one sentence."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from core.dispatch.curve import CalibrationError, read_curve_file
from core.io.untrusted import UntrustedFileError, read_bounded_xz

CURVE = {"backend": "cuda", "device_name": "NVIDIA H200", "context_len": 64, "repeats": 3,
         "times": {"auto": {"1": 0.001, "2": 0.0011, "3": 0.0012}}}


def test_an_xz_curve_reads_as_the_plain_one(tmp_path: Path) -> None:
    plain, packed = tmp_path / "c.json", tmp_path / "c.json.xz"
    plain.write_text(json.dumps(CURVE))
    packed.write_bytes(lzma.compress(plain.read_bytes()))
    a, b = read_curve_file(plain), read_curve_file(packed)
    assert a.to_dict() == b.to_dict()
    assert b.t_verify(2, "auto") == pytest.approx(0.0011)


def test_a_plain_file_is_returned_as_it_is(tmp_path: Path) -> None:
    f = tmp_path / "c.json"
    f.write_bytes(b"abc")
    assert read_bounded_xz(f, 10, "curve file") == b"abc"


def test_an_xz_bomb_is_refused_at_the_bound(tmp_path: Path) -> None:
    bomb = tmp_path / "b.json.xz"
    bomb.write_bytes(lzma.compress(b" " * (4 << 20)))  # 4 MiB of spaces: ~600 bytes of xz
    assert bomb.stat().st_size < 4096
    with pytest.raises(UntrustedFileError, match=r"holds more than 1 MiB once decompressed"):
        read_bounded_xz(bomb, 1 << 20, "curve file")
    assert len(read_bounded_xz(bomb, 8 << 20, "curve file")) == 4 << 20


def test_a_damaged_or_truncated_xz_is_one_sentence(tmp_path: Path) -> None:
    bad = tmp_path / "d.json.xz"
    bad.write_bytes(b"not xz at all")
    with pytest.raises(CalibrationError, match=r"d\.json\.xz is not a readable xz file"):
        read_curve_file(bad)
    cut = tmp_path / "t.json.xz"
    cut.write_bytes(lzma.compress(json.dumps(CURVE).encode())[:40])
    with pytest.raises(UntrustedFileError, match=r"t\.json\.xz is a truncated xz file"):
        read_bounded_xz(cut, 1 << 20, "curve file")
