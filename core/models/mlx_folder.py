"""mlx-lm model folders and Hugging Face repos: loaded with mlx_lm.load, saved in its format.

A folder (or a Hub repo id, downloaded once by huggingface_hub) loads through mlx-lm itself,
then gets the compute dtype. `save_mlx_folder` writes any loaded model (a converted GGUF, a
shape) back as a folder that mlx_lm.load reads, replacing nothing that is already there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

from core.models.bounds import check_config_bounds
from core.models.loaded import (
    LoadedModel,
    ModelLoadError,
    compute_dtype,
    first_line,
    quantization_config,
)


def load_mlx(path_or_repo: str, *, spec: str | None = None) -> LoadedModel:
    """Load an mlx-lm folder (or download a Hub repo first) with ``mlx_lm.load``."""
    import mlx_lm

    spec = spec or path_or_repo
    folder = Path(path_or_repo).expanduser()
    if not folder.exists():
        folder = _download_repo(path_or_repo)
    config = check_mlx_folder(folder, spec)
    text = config.get("text_config")
    declared = {**text, **config} if isinstance(text, dict) else config
    check_config_bounds(declared, spec)  # before mlx-lm builds 100000 layers
    try:
        model, tokenizer, config = mlx_lm.load(str(folder), return_config=True)
    except Exception as exc:  # mlx-lm raises many kinds; each becomes one sentence
        why = _mismatch(folder, declared)  # "bits 0 is not supported" said what, not why
        if why is not None:
            raise ModelLoadError(f"{spec} cannot load: {why}.") from exc
        raise ModelLoadError(f"mlx-lm could not load {spec} ({first_line(exc)}).") from exc
    own = _dtype_from_name(config.get("torch_dtype") or config.get("dtype")) or _param_dtype(model)
    model.set_dtype(compute_dtype(own))
    mx.eval(model.parameters())
    name = folder.name if Path(path_or_repo).expanduser().exists() else path_or_repo
    return LoadedModel(model, tokenizer, spec, name, kind="mlx", config=dict(config),
                       source=str(folder))


def check_mlx_folder(folder: Path, spec: str) -> dict[str, Any]:
    """The folder's config.json, parsed, once the folder is safe to hand to mlx-lm: its
    config.json a regular file of bounded size (a FIFO there read as "has no config.json"),
    and every file in it a regular file (a FIFO model.safetensors hung the load in MLX)."""
    from core.io.atomic import reason
    from core.io.untrusted import (
        CONFIG_MAX_BYTES,
        UntrustedFileError,
        check_folder_files,
        read_bounded,
    )

    config_path = folder / "config.json"
    if not os.path.lexists(config_path):
        raise ModelLoadError(
            f"{spec} is a folder but not an mlx-lm model folder (it has no config.json)."
        )
    try:
        check_folder_files(folder, "model folder")
        config = json.loads(read_bounded(config_path, CONFIG_MAX_BYTES, "model config"))
    except UntrustedFileError as exc:
        raise ModelLoadError(str(exc)) from None
    except OSError as exc:
        raise ModelLoadError(f"Could not read {config_path}: {reason(exc)}.") from None
    except (ValueError, RecursionError) as exc:
        raise ModelLoadError(f"{config_path} is not valid JSON ({first_line(exc)}).") from None
    if not isinstance(config, dict):
        raise ModelLoadError(f"{config_path} is not a JSON object, so {spec} was not loaded.")
    return config


# A header of tensor names is a few MB (config.json is bounded by core.io.untrusted).
MAX_HEADER_BYTES = 64 * 2**20


def _tensor_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Every tensor's name and shape from the safetensors headers alone (no tensor is read)."""
    import struct

    shapes: dict[str, tuple[int, ...]] = {}
    for file in sorted(folder.glob("model*.safetensors")):
        if not file.is_file():
            continue
        with open(file, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                continue
            (size,) = struct.unpack("<Q", head)
            if size > MAX_HEADER_BYTES:
                continue
            header = json.loads(f.read(size))
        for name, info in header.items():
            if isinstance(info, dict) and isinstance(info.get("shape"), list):
                shapes[name] = tuple(int(d) for d in info["shape"])
    return shapes


def _mismatch(folder: Path, config: dict[str, Any]) -> str | None:
    """Why a folder's weights do not fit its config.json, in words, or None when that is not
    the trouble: the layer count, else the first tensor whose shape the config contradicts.
    Asked only after mlx-lm failed, so a model it loads is never refused here."""
    import re

    try:
        shapes = _tensor_shapes(folder)
    except (OSError, ValueError):
        return None
    held = {int(m.group(1)) for n in shapes if (m := re.search(r"(?:^|\.)layers\.(\d+)\.", n))}
    declared = config.get("num_hidden_layers")
    if held and isinstance(declared, int) and declared != len(held):
        return (f"its config.json declares {declared} layers but its weights hold "
                f"{len(held)}")
    try:
        from mlx_lm.utils import _get_classes

        model_class, args_class = _get_classes(config)
        wanted = dict(tree_flatten(model_class(args_class.from_dict(config)).parameters()))
    except Exception:  # a config mlx-lm cannot even build: its own message says more
        return None
    for name, array in wanted.items():
        got, want = shapes.get(name), tuple(array.shape)
        if got is None or got == want:
            continue
        quantized = name.endswith(".weight") and name[: -len(".weight")] + ".scales" in shapes
        if quantized and len(got) == len(want) and got[:-1] == want[:-1]:
            continue  # packed columns: the row count is what the config decides
        return (f"its tensor {name} is {_dims(got)} but its config.json's sizes make it "
                f"{_dims(want)}")
    return None


def _dims(shape: tuple[int, ...]) -> str:
    return " x ".join(str(d) for d in shape) or "a scalar"


def _download_repo(repo: str) -> Path:
    from huggingface_hub import snapshot_download
    from mlx_lm.utils import DEFAULT_ALLOW_PATTERNS

    try:
        return Path(snapshot_download(repo, allow_patterns=DEFAULT_ALLOW_PATTERNS))
    except Exception as exc:  # offline, no such repo, gated, ...
        raise ModelLoadError(
            f"Could not get {repo} from the Hugging Face Hub (offline, missing or gated: "
            f"{type(exc).__name__}); pass a local mlx-lm folder or a .gguf file instead."
        ) from exc


def _dtype_from_name(name: Any) -> mx.Dtype | None:
    return {"bfloat16": mx.bfloat16, "float16": mx.float16, "float32": mx.float32}.get(str(name))


def _param_dtype(model: nn.Module) -> mx.Dtype:
    for _, v in tree_flatten(model.parameters()):
        if mx.issubdtype(v.dtype, mx.floating):
            return v.dtype
    return mx.bfloat16


def save_mlx_folder(loaded: LoadedModel, path: str | Path) -> Path:
    """Save a model (e.g. a converted GGUF) as an mlx-lm folder that ``mlx_lm.load`` reads.

    Writes config.json (with the per-module quantization), model.safetensors and the
    tokenizer files into a temporary sibling folder, then renames it, so a failed save
    never leaves a half folder; an existing non-empty folder is refused, not overwritten.
    """
    dest = Path(path).expanduser()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ModelLoadError(f"{dest} already exists and is not empty; choose a new folder.")
    if loaded.kind == "self":
        raise ModelLoadError(
            f"{loaded.spec} shares weights with its target and is not saved on its own."
        )
    config = dict(loaded.config)
    config["quantization"] = quantization_config(loaded.model)
    if not config["quantization"]:
        config.pop("quantization")
    else:
        config["quantization_config"] = config["quantization"]
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
        try:
            weights = dict(tree_flatten(loaded.model.parameters()))
            mx.save_safetensors(str(tmp / "model.safetensors"), weights, metadata={"format": "mlx"})
            (tmp / "config.json").write_text(json.dumps(dict(sorted(config.items())), indent=2))
            loaded.tokenizer._tokenizer.save_pretrained(str(tmp))
            if dest.exists():
                dest.rmdir()
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except OSError as exc:
        raise ModelLoadError(
            f"Could not save the model to {dest} ({exc.strerror or exc})."
        ) from exc
    return dest
