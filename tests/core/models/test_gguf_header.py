"""GGUF headers are checked in Python before MLX reads them: a broken one is a sentence, never a crash.

MLX's own reader (gguflib) follows every length and offset in a file blindly, so a file that
starts with the GGUF magic but has a damaged header segfaults `mx.load`. The fuzz test mutates
the header of a tiny valid GGUF (written here from `shape:tiny,dense`) with hypothesis and
loads each mutant in a subprocess, which must exit 0 (it still loads) or 2 (one sentence).
"""

from __future__ import annotations

import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core import models as M
from core.models.gguf_header import read_gguf_header
from tests.helpers import REPO as ROOT
from tests.helpers.models import one_sentence, write_tiny_gguf

# Loads one file the way `--target FILE` does: exit 0 when it loads, 2 with the sentence.
LOADER = """
import sys
from core.errors import UserError
from core.models import load_model
try:
    load_model(sys.argv[1])
except UserError as exc:
    print(exc)
    sys.exit(2)
print("loaded")
"""


@dataclass(frozen=True)
class Field:
    """One length, count, type, dimension or offset in the header: where it is and its width."""

    what: str
    at: int
    fmt: str  # "<I" or "<Q"


def header_fields(data: bytes) -> tuple[list[Field], int]:
    """Every structural field of a valid GGUF header (the test's own walk), and its end."""
    fields: list[Field] = [Field("version", 4, "<I"), Field("tensor count", 8, "<Q"),
                           Field("metadata count", 16, "<Q")]
    pos = 24

    def u32(what: str) -> int:
        nonlocal pos
        fields.append(Field(what, pos, "<I"))
        pos += 4
        return struct.unpack_from("<I", data, pos - 4)[0]

    def u64(what: str) -> int:
        nonlocal pos
        fields.append(Field(what, pos, "<Q"))
        pos += 8
        return struct.unpack_from("<Q", data, pos - 8)[0]

    def string(what: str) -> None:
        nonlocal pos
        n = u64(f"{what} length")
        pos += n

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    n_tensors = struct.unpack_from("<Q", data, 8)[0]
    n_kv = struct.unpack_from("<Q", data, 16)[0]
    for i in range(n_kv):
        string(f"key {i}")
        vtype = u32(f"key {i} type")
        if vtype == 8:
            string(f"key {i} value")
        elif vtype == 9:
            etype = u32(f"key {i} element type")
            count = u64(f"key {i} array length")
            for j in range(count):
                if etype == 8:
                    string(f"key {i} element {j}")
                else:
                    pos += sizes[etype]
        else:
            pos += sizes[vtype]
    for i in range(n_tensors):
        string(f"tensor {i} name")
        ndim = u32(f"tensor {i} ndim")
        for j in range(ndim):
            u64(f"tensor {i} dim {j}")
        u32(f"tensor {i} type")
        u64(f"tensor {i} offset")
    return fields, pos


class TinyGGUF(tuple):
    """(bytes, header fields, header end); a short repr keeps hypothesis' reports readable."""

    def __repr__(self) -> str:
        return f"<tiny GGUF of {len(self[0])} bytes>"


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> TinyGGUF:
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_tiny_gguf(path, M.load_model("shape:tiny,dense"))
    data = path.read_bytes()
    fields, end = header_fields(data)
    # Most fields are the vocabulary's string lengths: keep a sample of them, all the rest.
    elements = [f for f in fields if "element" in f.what]
    fields = [f for f in fields if "element" not in f.what] + elements[::29]
    return TinyGGUF((data, fields, end))


def load_in_subprocess(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LOADER, str(path)], capture_output=True, text=True, cwd=ROOT,
        timeout=120,
    )


def field_of(fields: list[Field], what: str) -> Field:
    return next(f for f in fields if f.what == what)


# --------------------------------------------------------------------------- in process


def test_the_tiny_gguf_header_reads_back(tiny_gguf, tmp_path) -> None:
    data, fields, end = tiny_gguf
    path = tmp_path / "tiny.gguf"
    path.write_bytes(data)
    header = read_gguf_header(path)
    assert header.version == 3 and len(header.tensors) == 20 and header.alignment == 32
    assert header.data_offset == end + (-end % 32)  # the test's walk agrees with the module's
    assert sum(t.nbytes for t in header.tensors) <= len(data) - header.data_offset


def test_each_kind_of_damage_is_one_sentence(tiny_gguf, tmp_path) -> None:
    data, fields, _ = tiny_gguf
    path = tmp_path / "bad.gguf"
    key0 = field_of(fields, "key 0 length")
    t0 = field_of(fields, "tensor 0 type")
    cases = [
        (key0, 2**40, "claims 1099511627776 bytes"),
        (key0, 10**7, "past the end of the file"),
        (field_of(fields, "tensor count"), 10**6, "claims 1000000 tensors"),
        (field_of(fields, "version"), 1, "version 1"),
        (field_of(fields, "tensor 0 ndim"), 9, "9 dimensions"),
        (field_of(fields, "tensor 0 dim 0"), 0, "dimension 0 of tensor"),
        (field_of(fields, "tensor 0 offset"), 2**40, "past the end of the file"),
        (field_of(fields, "key 0 type"), 12, "float64"),
        (field_of(fields, "key 0 type"), 77, "unknown value type 77"),
    ]
    for f, value, words in cases:
        bad = bytearray(data)
        struct.pack_into(f.fmt, bad, f.at, value)
        path.write_bytes(bytes(bad))
        with pytest.raises(M.ModelLoadError) as exc:
            M.load_model(str(path))
        msg = one_sentence(exc.value)
        assert words in msg and "malformed GGUF" in msg and str(path) in msg, (f, msg)
    for value, words in ((4, "Q4_2"), (99, "unknown ggml type 99")):  # valid, just unreadable
        bad = bytearray(data)
        struct.pack_into(t0.fmt, bad, t0.at, value)
        path.write_bytes(bytes(bad))
        with pytest.raises(M.ModelLoadError) as exc:
            M.load_model(str(path))
        msg = one_sentence(exc.value)
        assert words in msg and "unsupported" in msg and "malformed" not in msg, msg
    path.write_bytes(data[:20])
    with pytest.raises(M.ModelLoadError, match="fewer than a GGUF header"):
        M.load_model(str(path))


# --------------------------------------------------------------------------- the fuzz test

_INTERESTING = (0, 1, 2, 3, 7, 8, 9, 12, 31, 32, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1,
                2**32, 2**63, 2**64 - 1)


@st.composite
def mutations(draw: st.DrawFn) -> list[tuple[str, int | str, int]]:
    """A few edits of the header: a field set to an odd value, bytes flipped, or a cut."""
    edits = draw(st.lists(
        st.one_of(
            st.tuples(st.just("field"), st.integers(0, 10**6), st.one_of(
                st.sampled_from(_INTERESTING), st.integers(0, 2**64 - 1))),
            st.tuples(st.just("byte"), st.integers(0, 10**6), st.integers(0, 255)),
            st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(0)),
        ),
        min_size=1, max_size=3,
    ))
    return edits


def apply(
    data: bytes, fields: list[Field], end: int, edits: list[tuple[str, int | str, int]]
) -> bytes:
    out = bytearray(data)
    for kind, where, value in edits:
        if kind == "field":
            f = field_of(fields, where) if isinstance(where, str) else fields[where % len(fields)]
            width = 4 if f.fmt == "<I" else 8
            if f.at + width <= len(out):  # not cut away by an earlier edit
                struct.pack_into(f.fmt, out, f.at, value % 2 ** (8 * width))
        elif kind == "byte":
            if out:
                out[where % min(end, len(out))] = value
        else:
            del out[where % (end + 64) :]
    return bytes(out)


@settings(max_examples=26, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=mutations())
# Each of these segfaulted `mx.load` before the header was checked in Python.
@example(edits=[("field", "key 0 length", 2**40)])
@example(edits=[("field", "tensor count", 10**6)])
@example(edits=[("field", "tensor 19 offset", 2**40)])
@example(edits=[("field", "tensor 0 type", 4)])  # Q4_2: 0 weights per block, a division by 0
@example(edits=[("field", "tensor 0 ndim", 9)])
def test_mutated_headers_end_in_a_sentence_never_a_signal(tiny_gguf, tmp_path, edits) -> None:
    data, fields, end = tiny_gguf
    path = tmp_path / "mutant.gguf"
    path.write_bytes(apply(data, fields, end, edits))
    proc = load_in_subprocess(path)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode in (0, 2), (edits, proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in proc.stderr, (edits, proc.stdout, proc.stderr)
    if proc.returncode == 2:
        assert lines[0].endswith("."), lines
