"""A GGUF file's header checked in Python, before MLX reads a byte of it.

MLX reads GGUF through gguflib, which trusts the file: a string length, an array length, a
dimension count or a tensor offset that runs past the end is read from wherever it points, a
removed tensor type divides by zero, a float64 metadata value is stepped over by half its
size. Any of these is a segfault (or silently wrong numbers), not an exception. So every field
MLX will follow is walked here first, the way gguflib walks it, and checked against the file:
version, counts, every string and array length, every value and element type, every tensor's
dimensions, type, offset and size. A malformed file is one `ModelLoadError` sentence.

Tensors may be of any ggml type llama.cpp's gguf package knows (their sizes are checked here;
`gguf_convert` reads those MLX does not); a type nothing here reads is one "unsupported"
sentence, never "malformed". Metadata: every scalar type but float64, strings, and flat
arrays of them.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from core.models.loaded import ModelLoadError

GGUF_MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 used 32-bit counts, which gguflib does not read
HEADER_SIZE = 24  # magic, u32 version, u64 tensor count, u64 metadata count
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY = "general.alignment"
MAX_DIMS = 4  # ggml's; gguflib's array holds 8 and only asserts
INT32_MAX = 2**31 - 1  # MLX keeps shapes, string and array lengths as int

# GGUF metadata value types: name and size (None: variable or refused).
VALUE_TYPES: dict[int, tuple[str, int | None]] = {
    0: ("uint8", 1), 1: ("int8", 1), 2: ("uint16", 2), 3: ("int16", 2), 4: ("uint32", 4),
    5: ("int32", 4), 6: ("float32", 4), 7: ("bool", 1), 8: ("string", None),
    9: ("array", None), 10: ("uint64", 8), 11: ("int64", 8), 12: ("float64", 8),
}
UINT32, STRING, ARRAY, FLOAT64 = 4, 8, 9, 12

def _tensor_types() -> dict[int, tuple[str, int, int]]:
    """ggml tensor types by id: name, weights per block, bytes per block (from gguf-py)."""
    from gguf.constants import GGML_QUANT_SIZES

    return {int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGML_QUANT_SIZES}


# Every ggml type llama.cpp's gguf package knows (the header's sizes are checked for each);
# which of them load is `gguf_convert.readable_types()`.
TENSOR_TYPES: dict[int, tuple[str, int, int]] = _tensor_types()
_REMOVED_TENSOR_TYPES = {4: "Q4_2", 5: "Q4_3"}  # dropped from ggml; gguf-py no longer knows them


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it; `dims` in ggml order (innermost first)."""

    name: str
    dims: tuple[int, ...]
    type: int
    offset: int  # from the start of the data section
    nbytes: int

    @property
    def type_name(self) -> str:
        return TENSOR_TYPES[self.type][0]


@dataclass(frozen=True)
class GGUFHeader:
    """What a checked header says: its version, metadata keys, tensors and data section."""

    version: int
    metadata_keys: tuple[str, ...]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int
    file_size: int


class _Malformed(Exception):
    """A clause saying what is wrong; `read_gguf_header` turns it into the sentence."""


class _Unsupported(Exception):
    """A valid file with a tensor type nothing here reads: said as unsupported, not malformed."""


def _readable() -> frozenset[str]:
    from core.models.gguf_convert import readable_types

    return readable_types()


class _Reader:
    """Little-endian reads from a buffer that never step past its end."""

    def __init__(self, buf: mmap.mmap | bytes, size: int) -> None:
        self.buf, self.size, self.pos = buf, size, 0

    def need(self, n: int, what: str) -> int:
        if n < 0 or self.pos + n > self.size:
            raise _Malformed(
                f"{what} at byte {self.pos} needs {n} bytes, past the end of the file "
                f"({self.size} bytes)"
            )
        start = self.pos
        self.pos += n
        return start

    def u32(self, what: str) -> int:
        return int(struct.unpack_from("<I", self.buf, self.need(4, what))[0])

    def u64(self, what: str) -> int:
        return int(struct.unpack_from("<Q", self.buf, self.need(8, what))[0])

    def string(self, what: str) -> str:
        n = self.u64(f"the length of {what}")
        if n > INT32_MAX:
            raise _Malformed(f"{what} claims {n} bytes")
        start = self.need(n, what)
        try:
            return bytes(self.buf[start : start + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise _Malformed(f"{what} is not valid UTF-8") from None

    def skip_string(self, what: str) -> None:
        n = self.u64(f"the length of {what}")
        if n > INT32_MAX:
            raise _Malformed(f"{what} claims {n} bytes")
        start = self.need(n, what)
        try:  # MLX hands every string to Python, which needs UTF-8
            bytes(self.buf[start : start + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise _Malformed(f"{what} is not valid UTF-8") from None


def _value(r: _Reader, vtype: int, what: str) -> int | None:
    """Step over one metadata value of `vtype`; a uint32's value is returned (for alignment)."""
    if vtype not in VALUE_TYPES:
        raise _Malformed(f"{what} has unknown value type {vtype}")
    if vtype == FLOAT64:  # MLX steps over 4 of its 8 bytes, misreading all that follows
        raise _Malformed(f"{what} is a float64, which MLX's GGUF reader misreads")
    if vtype == STRING:
        r.skip_string(what)
        return None
    if vtype == ARRAY:
        etype = r.u32(f"the element type of {what}")
        count = r.u64(f"the length of {what}")
        if etype == ARRAY:
            raise _Malformed(f"{what} is an array of arrays, which MLX does not read")
        if etype not in VALUE_TYPES:
            raise _Malformed(f"{what} has unknown element type {etype}")
        if etype == FLOAT64:
            raise _Malformed(f"{what} holds float64 values, which MLX's GGUF reader misreads")
        if count > INT32_MAX:
            raise _Malformed(f"{what} claims {count} elements")
        if etype == STRING:
            if count * 8 > r.size - r.pos:  # each string needs at least its length field
                raise _Malformed(f"{what} claims {count} strings, more than the file holds")
            _skip_strings(r, count, what)
        else:
            size = VALUE_TYPES[etype][1]
            assert size is not None
            r.need(count * size, f"the {count} elements of {what}")
        return None
    size = VALUE_TYPES[vtype][1]
    assert size is not None
    start = r.need(size, what)
    return int(struct.unpack_from("<I", r.buf, start)[0]) if vtype == UINT32 else None


_U64 = struct.Struct("<Q").unpack_from


def _skip_strings(r: _Reader, count: int, what: str) -> None:
    """`skip_string` for each of an array's strings, inlined: vocabularies hold 100k and more."""
    buf, size, pos = r.buf, r.size, r.pos
    for i in range(count):
        if pos + 8 > size:
            r.pos = pos
            r.need(8, f"the length of element {i} of {what}")
        n = _U64(buf, pos)[0]
        pos += 8
        if n > INT32_MAX:
            raise _Malformed(f"element {i} of {what} claims {n} bytes")
        if pos + n > size:
            r.pos = pos
            r.need(n, f"element {i} of {what}")
        try:
            buf[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError:
            raise _Malformed(f"element {i} of {what} is not valid UTF-8") from None
        pos += n
    r.pos = pos


def _tensor(r: _Reader, i: int) -> TensorInfo:
    name = r.string(f"the name of tensor {i}")
    label = f"tensor {name!r}" if name else f"tensor {i}"
    ndim = r.u32(f"the dimension count of {label}")
    if not 1 <= ndim <= MAX_DIMS:
        raise _Malformed(f"{label} has {ndim} dimensions (1 to {MAX_DIMS} are allowed)")
    dims = tuple(r.u64(f"dimension {j} of {label}") for j in range(ndim))
    for j, d in enumerate(dims):
        if not 1 <= d <= INT32_MAX:
            raise _Malformed(f"dimension {j} of {label} is {d}")
    ttype = r.u32(f"the type of {label}")
    if ttype not in TENSOR_TYPES:
        what = _REMOVED_TENSOR_TYPES.get(ttype, f"of unknown ggml type {ttype}")
        raise _Unsupported(f"{label} is {what}, a tensor type that is unsupported here")
    if TENSOR_TYPES[ttype][0] not in _readable():
        raise _Unsupported(
            f"{label} is {TENSOR_TYPES[ttype][0]}, a tensor type that is unsupported here "
            "(neither MLX nor llama.cpp's gguf package reads it)"
        )
    offset = r.u64(f"the data offset of {label}")
    _, per_block, block_bytes = TENSOR_TYPES[ttype]
    if per_block > 1 and dims[0] % per_block:
        raise _Malformed(
            f"{label} is {TENSOR_TYPES[ttype][0]} but its rows of {dims[0]} weights are not "
            f"whole blocks of {per_block}"
        )
    weights = 1
    for d in dims:
        weights *= d
    nbytes = -(-weights // per_block) * block_bytes
    return TensorInfo(name, dims, ttype, offset, nbytes)


def _parse(buf: mmap.mmap | bytes, size: int) -> GGUFHeader:
    r = _Reader(buf, size)
    if size < HEADER_SIZE:
        raise _Malformed(f"it has {size} bytes, fewer than a GGUF header's {HEADER_SIZE}")
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise _Malformed("it does not start with the GGUF magic bytes")
    r.pos = 4
    version = r.u32("the version")
    if version not in VERSIONS:
        raise _Malformed(f"it is GGUF version {version}, and only versions 2 and 3 load here")
    n_tensors = r.u64("the tensor count")
    n_kv = r.u64("the metadata count")
    # Each metadata entry takes at least 13 bytes, each tensor entry at least 28.
    if n_kv > (size - r.pos) // 13:
        raise _Malformed(f"it claims {n_kv} metadata entries, more than the file can hold")
    if n_tensors > (size - r.pos) // 28:
        raise _Malformed(f"it claims {n_tensors} tensors, more than the file can hold")
    alignment = DEFAULT_ALIGNMENT
    keys: list[str] = []
    for i in range(n_kv):
        key = r.string(f"the name of metadata entry {i}")
        what = f"metadata {key!r}" if key else f"metadata entry {i}"
        vtype = r.u32(f"the value type of {what}")
        value = _value(r, vtype, what)
        if key == ALIGNMENT_KEY and vtype == UINT32:
            if not value:
                raise _Malformed(f"{ALIGNMENT_KEY} is 0")
            alignment = value
        keys.append(key)
    tensors = [_tensor(r, i) for i in range(n_tensors)]
    data_offset = r.pos + (alignment - r.pos % alignment) % alignment
    if tensors and data_offset > size:
        raise _Malformed(f"its data section starts at byte {data_offset}, past the end")
    for t in tensors:
        end = data_offset + t.offset + t.nbytes
        if end > size:
            raise _Malformed(
                f"tensor {t.name!r} ({t.nbytes} bytes at data offset {t.offset}) ends at byte "
                f"{end}, past the end of the file ({size} bytes)"
            )
    return GGUFHeader(version, tuple(keys), tuple(tensors), alignment, data_offset, size)


def read_gguf_header(path: str | os.PathLike[str], spec: str | None = None) -> GGUFHeader:
    """Walk and check a GGUF header the way MLX will read it; one sentence if it is malformed."""
    path = Path(path)
    spec = spec or str(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return _checked(b"", 0, spec)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _checked(buf, size, spec)
    except OSError as exc:
        raise ModelLoadError(f"Could not read {spec} ({exc.strerror or exc}).") from None


def _checked(buf: mmap.mmap | bytes, size: int, spec: str) -> GGUFHeader:
    try:
        return _parse(buf, size)
    except _Malformed as exc:
        raise ModelLoadError(f"{spec} is a malformed GGUF file: {exc}.") from None
    except _Unsupported as exc:
        raise ModelLoadError(f"{spec} cannot be loaded: {exc}.") from None
