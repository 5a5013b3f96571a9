"""Which model ran: `identify(loaded)` builds the ModelIdentity a bench result, a saved run, a
trace and the app all carry (the value itself, without MLX, is core/identity.py).

A number is only worth what is known about what produced it. `ModelIdentity` names a loaded
model as the user gave it (the spec), where it came from (its kind), what it is (architecture,
parameters, layers, quantization) and which bytes it was (the weights file's sha256), or, for
random weights, the shape and seed that draw them again. `identify(loaded)` builds it from a
`LoadedModel`; the value's `to_dict`/`from_dict` carry it through JSON, and a record written
before it existed reads as unknown.

Hashing is paid once per file: the sha256 of a file is cached by path, size and mtime, in
this process and in a small file in the model cache, so reloading the same GGUF costs a stat.
The default model's sha256 is pinned (core/models/fetch.py checks it before every load). A
Hugging Face download names each weights file by its sha256 already (the blob name), so a Hub
model costs no hashing at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from core.identity import UNKNOWN, ModelIdentity

HASH_CACHE_NAME = "sha256-cache.json"
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def identify(loaded: Any, base: ModelIdentity | None = None) -> ModelIdentity:
    """The identity of a `core.models.LoadedModel`; `base` is the target a `self:` draft
    derives from (its file's sha256 is the draft's too)."""
    from core.models.spec import parse_options

    spec = loaded.spec
    kind = _kind(loaded)
    bits, group, tensor_bits = _quantization(loaded.model)
    config = loaded.config or {}
    arch = config.get("model_type") or getattr(
        getattr(loaded.model, "args", None), "model_type", None
    )
    out: dict[str, Any] = {
        "spec": spec, "kind": kind, "name": loaded.name, "architecture": arch,
        "parameters": count_parameters(loaded.model), "layers": _layers(loaded),
        "bits": bits, "group_size": group, "tensor_bits": tensor_bits,
        "random_weights": bool(loaded.random_weights),
    }
    if kind == "shape":
        name, options = parse_options(spec, "shape:")
        out["shape"] = name
        out["seed"] = int(options.get("seed", 0) or 0)
    elif kind == "self":
        if base is not None:
            out["base"] = base.spec
            out["sha256"] = base.sha256
            out["shape"], out["seed"] = base.shape, base.seed
    elif kind == "default":
        from core.models.fetch import DEFAULT_GGUF_SHA256

        out["sha256"] = DEFAULT_GGUF_SHA256  # fetch_default checked it before the load
    elif kind == "gguf":
        path = Path(getattr(loaded, "source", None) or spec).expanduser()
        out["sha256"] = file_sha256(path) if path.is_file() else None
    elif kind in ("folder", "hub"):
        folder = Path(getattr(loaded, "source", None) or spec).expanduser()
        if folder.is_dir():
            out["sha256"] = folder_sha256(folder)
            if folder.parent.name == "snapshots":  # the Hugging Face cache's layout
                out["revision"] = folder.name
    return ModelIdentity(**out)


def pair_identities(pair: Any) -> dict[str, ModelIdentity | None]:
    """{"target": ..., "draft": ... or None} of a `ModelPair`."""
    target = identify(pair.target)
    draft = None
    if pair.draft is not None:
        draft = target if pair.draft is pair.target else identify(pair.draft, base=target)
    return {"target": target, "draft": draft}


def _kind(loaded: Any) -> str:
    if loaded.spec == "default":
        return "default"
    if loaded.kind in ("shape", "self", "gguf"):
        return str(loaded.kind)
    if loaded.kind == "mlx":
        return "folder" if Path(loaded.spec).expanduser().is_dir() else "hub"
    return UNKNOWN


def _layers(loaded: Any) -> int | None:
    with contextlib.suppress(Exception):
        return int(loaded.num_layers)
    n = (loaded.config or {}).get("num_hidden_layers")
    return int(n) if isinstance(n, int) else None


def _modules(model: Any) -> list[Any]:
    """Every leaf module once (a truncated self-draft shares modules; tied heads share one)."""
    import mlx.nn as nn
    from mlx.utils import tree_flatten

    seen: set[int] = set()
    out = []
    for _, m in tree_flatten(model.leaf_modules(), is_leaf=lambda x: isinstance(x, nn.Module)):
        if isinstance(m, nn.Module) and id(m) not in seen:
            seen.add(id(m))
            out.append(m)
    return out


def _quantized(m: Any) -> bool:
    return "scales" in m and isinstance(getattr(m, "bits", None), int)


def _shards(m: Any) -> int:
    """How many ranks share this module's weight (mlx's sharded linears), else 1."""
    if "Sharded" not in type(m).__name__:
        return 1
    group = getattr(m, "group", None)
    return int(group.size()) if group is not None else 1


def count_parameters(model: Any) -> int | None:
    """Parameters as the checkpoint counts them: a quantized matrix as its rows x columns,
    not its packed words, scales and biases; a sharded one as the whole matrix."""
    from mlx.utils import tree_flatten

    try:
        total = 0
        for m in _modules(model):
            n = _shards(m)
            if _quantized(m):
                rows, packed = m.weight.shape[-2:]
                total += rows * packed * 32 // m.bits * n
                if "bias" in m:
                    total += m.bias.size * (n if "AllToSharded" in type(m).__name__ else 1)
            else:
                for key, v in tree_flatten(m.parameters()):
                    scale = n if key == "weight" or "AllToSharded" in type(m).__name__ else 1
                    total += v.size * scale
        return total
    except Exception:  # an unusual module layout: unknown rather than wrong
        return None


def _quantization(model: Any) -> tuple[int | None, int | None, tuple[tuple[str, int], ...]]:
    """(commonest bits, its group size, matrices per width) over linear layers and embeddings."""
    import mlx.nn as nn

    widths: Counter[str] = Counter()
    params: Counter[tuple[int, int]] = Counter()
    for m in _modules(model):
        if _quantized(m):
            widths[str(m.bits)] += 1
            params[(m.bits, m.group_size)] += 1
        elif isinstance(m, (nn.Linear, nn.Embedding)) or "Sharded" in type(m).__name__:
            widths["dense"] += 1
    ordered = tuple(sorted(widths.items(), key=lambda kv: (-kv[1], kv[0])))
    if not params:
        return None, None, ordered
    bits, group = params.most_common(1)[0][0]
    return bits, group, ordered


# -- file digests, cached by path, size and mtime ------------------------------------------

_HASHES: dict[tuple[str, int, int], str] = {}


def _cache_file() -> Path:
    from core.models.loaded import cache_dir

    return cache_dir() / HASH_CACHE_NAME


def file_sha256(path: Path) -> str:
    """The file's sha256, hashed once per (path, size, mtime): later loads read the cache."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key in _HASHES:
        return _HASHES[key]
    if _SHA256_RE.fullmatch(path.name):  # a Hugging Face blob is named by its content's sha256
        _HASHES[key] = path.name
        return path.name
    stored = _read_cache()
    entry = stored.get(str(path))
    if isinstance(entry, dict) and entry.get("size") == st.st_size \
            and entry.get("mtime_ns") == st.st_mtime_ns and isinstance(entry.get("sha256"), str):
        _HASHES[key] = entry["sha256"]
        return entry["sha256"]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    digest = h.hexdigest()
    _HASHES[key] = digest
    stored[str(path)] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    _write_cache(stored)
    return digest


def folder_sha256(folder: Path) -> str | None:
    """A folder's weights: the one file's sha256, or the digest of the `sha256sum` listing of
    its *.safetensors files sorted by name; None when it has none."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    digests = [(file_sha256(f), f.name) for f in files]
    if len(digests) == 1:
        return digests[0][0]
    listing = "".join(f"{d}  {name}\n" for d, name in digests)
    return hashlib.sha256(listing.encode()).hexdigest()


def _read_cache() -> dict[str, Any]:
    """The kept digests (core.io.kept.read_kept: bounded, never blocking; a bad file set
    aside with one notice and rebuilt by the next `_write_cache`)."""
    from core.io.kept import read_kept

    return read_kept(_cache_file(), "sha256 cache", _check_cache) or {}


def _check_cache(doc: Any) -> dict[str, Any]:
    """Every entry a path to {size, mtime_ns, sha256}, each of its type: a digest read from
    here is stamped on reports as the model's, so a wrong one is refused, never used."""
    from core.io.kept import KeptFileError, count, mapping

    out: dict[str, Any] = {}
    for path, entry in mapping(doc, "the cache").items():
        e = mapping(entry, f"the entry of {path}")
        sha = e.get("sha256")
        if not isinstance(sha, str) or not _SHA256_RE.fullmatch(sha):
            raise KeptFileError(f"the sha256 of {path} is not a digest")
        out[path] = {"size": count(e.get("size"), f"the size of {path}"),
                     "mtime_ns": count(e.get("mtime_ns"), f"the mtime of {path}"),
                     "sha256": sha}
    return out


def _write_cache(data: dict[str, Any]) -> None:
    from core.io.atomic import write_atomic

    with contextlib.suppress(OSError):  # a read-only cache only costs a hash per process
        _cache_file().parent.mkdir(parents=True, exist_ok=True)
        write_atomic(_cache_file(), json.dumps(data, indent=1, sort_keys=True))
