"""GGUF tensors MLX cannot read, converted once with llama.cpp's gguf-py and cached by sha256.

`mx.load` reads F32, F16, Q4_0, Q4_1 and Q8_0 correctly, turns K-quants into wrong numbers and
fails on Q5_0, so a file holding any other type (the Q4_K_M and Q5_K_M files people download
for llama.cpp) is read here with llama.cpp's own `gguf` package instead:

- grids that are affine in blocks of 32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, and the 32-weight
  sub-blocks of Q4_K and Q5_K) are copied onto MLX's affine quantization exactly: the same
  integers, the same scale and offset per group of 32 (no rounding beyond float32);
- every other type gguf-py dequantizes (Q2_K, Q3_K, Q6_K, IQ*, TQ*, MXFP4, ...) is requantized
  with `mx.quantize`, group 32, at the smallest MLX width at or above the source's bits per
  weight (Q2_K -> 3, Q3_K -> 4, IQ4_* -> 5, Q6_K -> 8): an affine grid cannot land on another
  grid, so it gets at least the source's resolution;
- BF16 stays float.

The result is cached under ``cache_dir()/gguf-mlx/<sha256>-v<N>/`` (weights as safetensors,
metadata as JSON), so the next load of the same file reads it without gguf-py. The file's
sha256 is itself remembered by path, size and mtime, so a later load hashes nothing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from core.io.atomic import unlink_quietly, write_atomic
from core.io.kept import KeptFileError, count, mapping, read_kept
from core.models.loaded import ModelLoadError, cache_dir, first_line

log = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"  # beside the converted weights
CONVERT_VERSION = 1  # bump when the cached layout or the conversion rules change
GROUP = 32
MLX_BITS = (2, 3, 4, 5, 6, 8)
NATIVE = frozenset({"F32", "F16", "Q4_0", "Q4_1", "Q8_0"})  # mx.load reads these right
# Types whose values are scale * q + offset with one scale and offset per 32 weights.
AFFINE_BITS = {"Q4_0": 4, "Q4_1": 4, "Q5_0": 5, "Q5_1": 5, "Q8_0": 8, "Q4_K": 4, "Q5_K": 5}
_CHUNK_WEIGHTS = 1 << 22  # rows per conversion step: ~4M weights (16 MB of float32)

Progress = Callable[[int, int, str], None]  # (bytes done, bytes in all, tensor name)


@functools.cache
def readable_types() -> frozenset[str]:
    """Tensor types this loader reads: MLX's own plus every type gguf-py dequantizes."""
    from gguf import quants

    return NATIVE | {"BF16"} | {t.name for t in quants._type_traits}


def requantized_bits(type_name: str) -> int:
    """The smallest MLX width at or above the source type's bits per weight (8 at most)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    bpw = size * 8 / block
    return next((b for b in MLX_BITS if b >= bpw), 8)


# --- the cache ------------------------------------------------------------------------------


def cached_or_converted(
    path: Path, spec: str, progress: bool = False
) -> tuple[dict[str, mx.array], dict[str, Any], Path]:
    """The file's tensors in MLX form (GGUF names), its metadata and its cache folder.

    Converted on first use; the folder also keeps the rebuilt tokenizer (`TOKENIZER_FILE`),
    which loads in a fraction of the time a 150k-token vocabulary takes to rebuild.
    """
    digest = file_sha256(path, progress)
    folder = cache_dir() / "gguf-mlx" / f"{digest}-v{CONVERT_VERSION}"
    weights_file, meta_file = folder / "weights.safetensors", folder / "metadata.json"
    meta = read_kept(meta_file, "converted model's metadata", lambda d: mapping(d, "it"))
    if meta is not None and weights_file.is_file():
        try:
            return mx.load(str(weights_file)), meta, folder
        except (OSError, ValueError, RuntimeError) as exc:  # a damaged cache: convert again
            log.warning(f"The converted copy of {spec} in {folder} is damaged "
                        f"({first_line(exc)}), so it is converted again.")
    weights, meta = convert_gguf(path, spec, progress)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".weights-{os.getpid()}.safetensors"
        try:
            mx.save_safetensors(str(tmp), weights, metadata={"format": "mlx"})
            os.replace(tmp, weights_file)
        finally:
            unlink_quietly(tmp)
        write_atomic(meta_file, json.dumps(meta))  # written last: its presence means complete
    except OSError as exc:  # a read-only cache costs a conversion per load, not the load
        log.warning(f"Could not cache the converted {spec} in {folder} "
                    f"({exc.strerror or exc}); the next load converts it again.")
    return weights, meta, folder


def file_sha256(path: Path, progress: bool = False) -> str:
    """The file's sha256, remembered by absolute path, size and mtime (hashing 1 GB costs ~3 s)."""
    st = path.stat()
    real = str(path.resolve())
    memo = cache_dir() / "gguf-mlx" / "sha256" / (hashlib.sha1(real.encode()).hexdigest() + ".json")
    stamp = {"path": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    saved = read_kept(memo, "remembered sha256", _check_memo)
    if saved is not None and {k: saved[k] for k in stamp} == stamp:
        return str(saved["sha256"])
    h = hashlib.sha256()
    with _bar(progress, f"Hashing {path.name}", st.st_size) as advance, open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
            advance(len(chunk))
    digest = h.hexdigest()
    with contextlib.suppress(OSError):
        memo.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(memo, json.dumps({**stamp, "sha256": digest}))
    return digest


def _check_memo(doc: Any) -> dict[str, Any]:
    """A memo as `file_sha256` writes it; its digest names the folder loaded, so it must be one."""
    d = mapping(doc, "the memo")
    sha = d.get("sha256")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise KeptFileError("its sha256 is not a digest")
    if not isinstance(d.get("path"), str):
        raise KeptFileError("its path is not text")
    return {"path": d["path"], "size": count(d.get("size"), "its size"),
            "mtime_ns": count(d.get("mtime_ns"), "its mtime_ns"), "sha256": sha}


# --- the conversion -------------------------------------------------------------------------


def convert_gguf(
    path: Path, spec: str, progress: bool = False
) -> tuple[dict[str, mx.array], dict[str, Any]]:
    """Read every tensor with gguf-py into MLX form; metadata as plain JSON-able values."""
    from gguf import GGUFReader

    start = time.perf_counter()
    try:
        reader = GGUFReader(str(path), "r")
    except (ValueError, OSError, KeyError) as exc:
        raise ModelLoadError(f"{spec} is not a readable GGUF file ({first_line(exc)}).") from exc
    meta = _metadata(reader)
    types = sorted({t.tensor_type.name for t in reader.tensors} - NATIVE)
    total = sum(int(t.n_bytes) for t in reader.tensors)
    said = (f"Converting {Path(spec).name} for MLX once ({', '.join(types)} tensors; "
            "the result is cached, so the next load is quick).")
    if not progress:
        log.warning(said)  # the app shows core's warnings; the CLI has its bar instead
    weights: dict[str, mx.array] = {}
    with _bar(progress, f"Converting {Path(spec).name}", total) as advance:
        for t in reader.tensors:
            dims = tuple(int(d) for d in t.shape)  # ggml order: innermost first
            matrix = t.name.endswith(".weight")  # a module's weight: MLX may quantize it
            converted = convert_tensor(t.tensor_type.name, np.asarray(t.data), dims, advance,
                                       quantize=matrix)
            base = t.name.removesuffix(".weight")
            for suffix, value in converted.items():
                weights[f"{base}{suffix}" if suffix else t.name] = value
    mx.eval(weights)
    if not progress:
        log.warning(f"Converted {Path(spec).name} in {time.perf_counter() - start:.0f} s.")
    return weights, meta


def _metadata(reader: Any) -> dict[str, Any]:
    """Every metadata value as a plain Python value (what `_meta` in gguf.py reads)."""
    out: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        value = field.contents()
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        out[key] = value
    return out


def convert_tensor(
    type_name: str,
    data: np.ndarray,
    dims: tuple[int, ...],
    advance: Callable[[int], None] = lambda n: None,
    *,
    quantize: bool = True,
) -> dict[str, mx.array]:
    """One GGUF tensor as MLX arrays: ``{"": float}`` or ``{".weight", ".scales", ".biases"}``.

    Keys are suffixes for a ``.weight`` tensor's module (``""`` keeps the tensor's own name).
    ``data`` is gguf-py's raw view of the tensor (bytes for quantized types).
    """
    from gguf import quants
    from gguf.constants import GGMLQuantizationType

    qtype = GGMLQuantizationType[type_name]
    shape = tuple(reversed(dims))  # row-major: outermost first
    cols = dims[0]
    if type_name in ("F32", "F16", "BF16"):
        value = data if type_name != "BF16" else quants.dequantize(data, qtype)
        advance(data.nbytes)
        arr = mx.array(np.ascontiguousarray(value).reshape(shape))
        return {"": arr.astype(mx.bfloat16) if type_name == "BF16" else arr}
    raw = data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)
    rows = raw.shape[0]
    if not quantize or len(dims) != 2 or cols % GROUP:  # not a matrix MLX quantizes: keep it as float
        advance(data.nbytes)
        value = quants.dequantize(raw, qtype).reshape(shape)
        return {"": mx.array(value.astype(np.float32))}
    step = max(1, _CHUNK_WEIGHTS // cols)
    parts: list[tuple[mx.array, mx.array, mx.array]] = []
    for lo in range(0, rows, step):
        chunk = raw[lo : lo + step]
        w = quants.dequantize(chunk, qtype).astype(np.float32, copy=False)
        if type_name in AFFINE_BITS:
            parts.append(_exact(type_name, chunk, w))
        else:
            wq, s, b = mx.quantize(mx.array(w), group_size=GROUP, bits=requantized_bits(type_name))
            mx.eval(wq, s, b)
            parts.append((wq, s, b))
        advance(chunk.nbytes)
    wq, s, b = (mx.concatenate([p[i] for p in parts]) for i in range(3))
    return {".weight": wq, ".scales": s, ".biases": b}


def _exact(type_name: str, blocks_2d: np.ndarray, w: np.ndarray) -> tuple[mx.array, ...]:
    """The source's own integers, scales and offsets in MLX's affine layout (group 32)."""
    from gguf.quants import Q4_K

    bits = AFFINE_BITS[type_name]
    rows = blocks_2d.shape[0]
    _, size = _sizes(type_name)
    blocks = blocks_2d.reshape(-1, size)
    f16 = lambda a: a.copy().view(np.float16).astype(np.float32)  # noqa: E731
    d = f16(blocks[:, 0:2])
    if type_name in ("Q4_K", "Q5_K"):
        sc, mn = Q4_K.get_scale_min(blocks[:, 4:16].copy())
        scale = d * sc.astype(np.float32)
        offset = -f16(blocks[:, 2:4]) * mn.astype(np.float32)
    elif type_name in ("Q4_1", "Q5_1"):
        scale, offset = d, f16(blocks[:, 2:4])
    else:  # symmetric: q - 8, q - 16, int8 as q - 128
        scale, offset = d, d * -float(1 << (bits - 1))
    scale = scale.reshape(rows, -1)
    offset = offset.reshape(rows, -1)
    grouped = w.reshape(rows, -1, GROUP)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((grouped - offset[..., None]) / scale[..., None])
    q = np.where(scale[..., None] == 0, 0, q).clip(0, (1 << bits) - 1).astype(np.uint8)
    return _pack(q.reshape(rows, -1), bits), mx.array(scale), mx.array(offset)


def _sizes(type_name: str) -> tuple[int, int]:
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    return GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]


def _pack(q: np.ndarray, bits: int) -> mx.array:
    """Integers to MLX's packing: a little-endian bit stream per row, read as uint32."""
    if bits == 8:
        return mx.array(np.ascontiguousarray(q).view(np.uint32))
    if bits == 4:
        pairs = q.reshape(q.shape[0], -1, 2)
        return mx.array(np.ascontiguousarray(pairs[..., 0] | (pairs[..., 1] << 4)).view(np.uint32))
    stream = ((q[..., None] >> np.arange(bits, dtype=np.uint8)) & 1).reshape(q.shape[0], -1)
    return mx.array(np.packbits(stream, axis=-1, bitorder="little").view(np.uint32))


# --- progress on stderr ---------------------------------------------------------------------


@contextlib.contextmanager
def _bar(progress: bool, message: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich byte bar on stderr while the block runs; yields ``advance(n)``."""
    if not progress:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    ) as bar:
        task = bar.add_task(message, total=total)
        yield lambda n: bar.advance(task, n)
