"""GGUF files as mlx-lm llama or qwen2 models: weights renamed, Q/K rows un-permuted, quantized.

llama.cpp's GGUF holds a model's tensors under its own names, with a llama's Q/K rows permuted
for interleaved RoPE, blocks of weights quantized (types mixed per tensor), and the tokenizer
in its metadata. This module turns all of that into an ordinary HF-layout mlx-lm model and a
TokenizerWrapper; anything it cannot read is one ModelLoadError sentence. Files of only the
types `mx.load` reads right (F32, F16, Q4_0, Q4_1, Q8_0) are read by it directly; any other
file goes through `gguf_convert` (llama.cpp's gguf-py, converted once and cached).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from core.io.atomic import atomic_writer, write_atomic
from core.models.bounds import check_config_bounds
from core.models.gguf_convert import NATIVE, TOKENIZER_FILE, cached_or_converted
from core.models.gguf_header import read_gguf_header
from core.models.loaded import (
    LoadedModel,
    ModelLoadError,
    cache_dir,
    compute_dtype,
    first_line,
    quantization_config,
    wrap_tokenizer,
)

# GGUF Q4_0 / Q4_1 / Q8_0 blocks are 32 weights wide; converted tensors use groups of 32 too.
GGUF_GROUP_SIZE = 32
ARCHITECTURES = ("llama", "qwen2")  # mlx_lm.models modules of the same names
GGUF_MAGIC = b"GGUF"

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


def is_gguf(path: Path) -> bool:
    """Whether ``path`` starts with the GGUF magic bytes (unreadable files are not GGUF)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def load_gguf(
    path: Path, *, spec: str | None = None, name: str | None = None, progress: bool = False
) -> LoadedModel:
    """Load a llama or qwen2 GGUF into mlx-lm, keeping its tensors quantized.

    ``progress`` shows a first load's conversion on stderr (else core logs a warning, which
    the app shows).

    RoPE: llama.cpp stores Q/K rows permuted for its interleaved rotary layout. We un-permute
    them (rows of weight, scales and biases alike) instead of setting
    ``rope_traditional=True``, so the module is an ordinary HF-layout llama: a saved folder is
    interchangeable with mlx-lm conversions, and code that inspects weights sees what a Hub
    checkpoint has. It costs one row gather per Q/K tensor at load time.
    """
    spec = spec or str(path)
    # MLX's GGUF reader trusts every length and offset in the file (a broken header is a
    # segfault), so the header is walked and checked in Python first.
    header = read_gguf_header(path, spec)
    tokenizer_file = None
    try:
        if all(t.type_name in NATIVE for t in header.tensors):
            weights, meta = mx.load(str(_writable_copy(Path(path))), return_metadata=True)
        else:
            weights, meta, folder = cached_or_converted(Path(path), spec, progress)
            tokenizer_file = folder / TOKENIZER_FILE
    except ModelLoadError:
        raise
    except (ValueError, RuntimeError, OSError, TypeError, KeyError) as exc:
        raise ModelLoadError(f"{spec} is not a readable GGUF file ({first_line(exc)}).") from exc
    try:
        return _build(weights, meta, spec, name, tokenizer_file)
    except ModelLoadError:
        raise
    except Exception as exc:  # metadata that parses but makes no model: one sentence, no trace
        raise ModelLoadError(
            f"{spec} does not describe a usable llama model ({first_line(exc)})."
        ) from exc


def _build(
    weights: dict[str, mx.array],
    meta: dict[str, Any],
    spec: str,
    name: str | None,
    tokenizer_file: Path | None = None,
) -> LoadedModel:
    """The model and tokenizer from what mx.load read (a checked header, any metadata)."""
    arch = _meta(meta, "general.architecture")
    if arch is None or not weights:
        raise ModelLoadError(
            f"{spec} is not a GGUF model file (it has no architecture or tensors)."
        )
    if arch not in ARCHITECTURES:
        raise ModelLoadError(
            f"{spec} is a {arch!r} GGUF; only llama and qwen2 GGUF files load here (convert "
            "others to an mlx-lm folder with mlx_lm.convert)."
        )
    if "rope_freqs.weight" in weights:
        raise ModelLoadError(
            f"{spec} uses per-frequency RoPE factors (Llama 3.1 style), which this GGUF loader "
            "does not read; use an mlx-lm folder of the model instead."
        )
    config = _gguf_config(meta, weights, spec, arch)
    _check_config(config, weights, spec)
    weights = _gguf_to_mlx_names(weights, config)

    import importlib

    family = importlib.import_module(f"mlx_lm.models.{arch}")
    model = family.Model(family.ModelArgs.from_dict(config))
    quant = _quantization_of(weights)

    def predicate(p: str, m: nn.Module) -> bool | dict[str, Any]:
        return quant.get(p, False)

    nn.quantize(model, class_predicate=predicate)
    try:
        model.load_weights(list(weights.items()), strict=True)
    except ValueError as exc:
        raise ModelLoadError(
            f"{spec} has tensors that do not fit a llama model ({first_line(exc)})."
        ) from exc
    model.set_dtype(compute_dtype(mx.bfloat16))
    model.eval()
    mx.eval(model.parameters())
    config["quantization"] = quantization_config(model)
    tokenizer = gguf_tokenizer(meta, spec, tokenizer_file)
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
        with open(path, "rb") as src, atomic_writer(dest) as out:
            shutil.copyfileobj(src, out, 1 << 20)
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


def _gguf_config(
    meta: dict[str, Any], weights: dict[str, mx.array], spec: str, arch: str = "llama"
) -> dict[str, Any]:
    """mlx-lm's config from the ``{arch}.*`` metadata (llama and qwen2 share the keys)."""

    def need(key: str) -> Any:
        value = _meta(meta, f"{arch}.{key}")
        if value is None:
            raise ModelLoadError(f"{spec} lacks the GGUF metadata key {arch}.{key}.")
        return value

    hidden = int(need("embedding_length"))
    heads = int(need("attention.head_count"))
    vocab = _meta(meta, f"{arch}.vocab_size") or len(_meta(meta, "tokenizer.ggml.tokens") or [])
    config: dict[str, Any] = {
        "model_type": arch,
        "hidden_size": hidden,
        "num_hidden_layers": int(need("block_count")),
        "intermediate_size": int(need("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(_meta(meta, f"{arch}.attention.head_count_kv", heads)),
        "head_dim": int(_meta(meta, f"{arch}.rope.dimension_count", hidden // heads)),
        # stored as float32: 1e-5 arrives as 9.9999997e-06; keep the intended decimal
        "rms_norm_eps": float(f"{float(need('attention.layer_norm_rms_epsilon')):.6g}"),
        "rope_theta": float(_meta(meta, f"{arch}.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(_meta(meta, f"{arch}.context_length", 4096)),
        "vocab_size": int(vocab or weights["token_embd.weight"].shape[0]),
        "tie_word_embeddings": "output.weight" not in weights,
        "rope_traditional": False,
        "torch_dtype": "bfloat16",
    }
    scaling = _meta(meta, f"{arch}.rope.scaling.type")
    if scaling == "linear":
        config["rope_scaling"] = {
            "type": "linear",
            "factor": float(_meta(meta, f"{arch}.rope.scaling.factor")),
        }
    elif scaling not in (None, "none"):
        raise ModelLoadError(
            f"{spec} uses RoPE scaling {scaling!r}, which this GGUF loader does not read."
        )
    return config


def _check_config(config: dict[str, Any], weights: dict[str, mx.array], spec: str) -> None:
    """Metadata numbers that agree with the tensors, before a model of that size is built.

    A damaged count (a billion layers, zero heads) would otherwise build a huge model or
    divide by zero before the tensors are ever compared with it.
    """
    layers = {k.split(".")[1] for k in weights if k.startswith("blk.") and k.count(".") >= 2}
    sizes = ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
             "num_key_value_heads", "head_dim", "max_position_embeddings", "vocab_size")
    for key in sizes:
        if int(config[key]) < 1:
            raise ModelLoadError(f"{spec} gives {key} = {config[key]}, which must be positive.")
    check_config_bounds(config, spec)  # a billion layers is refused before the layer count
    if config["num_hidden_layers"] != len(layers):
        raise ModelLoadError(
            f"{spec} says it has {config['num_hidden_layers']} layers but holds tensors for "
            f"{len(layers)}."
        )
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    if heads % kv:
        raise ModelLoadError(f"{spec} has {heads} attention heads, not a multiple of {kv} KV heads.")
    embed = weights.get("token_embd.weight")
    scales = weights.get("token_embd.scales")
    width = None if embed is None else (
        scales.shape[-1] * GGUF_GROUP_SIZE if scales is not None else embed.shape[-1]
    )
    if width is not None and width != config["hidden_size"]:
        raise ModelLoadError(
            f"{spec} gives an embedding length of {config['hidden_size']}, but its token "
            f"embeddings are {width} wide."
        )


def _gguf_to_mlx_names(weights: dict[str, mx.array], config: dict[str, Any]) -> dict[str, mx.array]:
    """Rename llama.cpp tensors to mlx-lm's and undo llama.cpp's Q/K row permutation."""
    arch = config["model_type"]
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
                raise ModelLoadError(f"Unexpected GGUF tensor {key} in a {arch} model.")
            new = f"model.layers.{idx}.{_GGUF_NAMES[part]}"
            # llama.cpp permutes only a llama's Q/K rows (qwen2 keeps NEOX RoPE, unpermuted)
            if arch == "llama" and part in ("attn_q", "attn_k"):
                heads = "num_attention_heads" if part == "attn_q" else "num_key_value_heads"
                value = _unpermute_rows(value, config[heads])
        else:
            raise ModelLoadError(f"Unexpected GGUF tensor {key} in a {arch} model.")
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


# --- the tokenizer in the metadata ---------------------------------------------------------

# llama.cpp's pre-tokenizer names -> regex for tokenizers' Split (None: ByteLevel's own regex).
_LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen2's: llama3's with single digits (llama.cpp's LLM_ARCH 'qwen2' pre-tokenizer).
_QWEN2_REGEX = _LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
_SPLIT_REGEX = {"llama-bpe": _LLAMA3_REGEX, "llama3": _LLAMA3_REGEX, "qwen2": _QWEN2_REGEX}
_PRE_TOKENIZERS = ("smollm", "gpt2", "default", "llama-bpe", "llama3", "qwen2")


def gguf_tokenizer(
    meta: dict[str, Any], spec: str = "this GGUF", cache_file: Path | None = None
) -> Any:
    """Rebuild the tokenizer stored in GGUF metadata as a TokenizerWrapper.

    Byte-level BPE (``tokenizer.ggml.model == 'gpt2'``) only: vocab and merges from the
    metadata, the pre-tokenizer from llama.cpp's named rule, token types 3/4 as special
    tokens, the chat template and EOS from the metadata. With ``cache_file`` (a converted
    file's cache) the rebuilt tokenizer is saved there once and read from it afterwards:
    rebuilding Qwen's 151,936 tokens and 151,387 merges costs seconds.
    """
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

    def token(key: str) -> str | None:
        idx = _meta(meta, f"tokenizer.ggml.{key}_token_id")
        return tokens[idx] if idx is not None and 0 <= idx < len(tokens) else None

    bos = token("bos")
    source: dict[str, Any]
    if cache_file is not None and cache_file.is_file():
        source = {"tokenizer_file": str(cache_file)}
    else:
        tok = _bpe_tokenizer(meta, pre, tokens, bos)
        source = {"tokenizer_object": tok}
        if cache_file is not None:
            try:  # read back from the file: no deep copy of the object either
                write_atomic(cache_file, tok.to_str())
                source = {"tokenizer_file": str(cache_file)}
            except OSError:
                pass
    hf = PreTrainedTokenizerFast(
        **source,
        bos_token=bos,
        eos_token=token("eos"),
        unk_token=token("unknown"),
        pad_token=token("padding"),
        chat_template=_meta(meta, "tokenizer.chat_template"),
        clean_up_tokenization_spaces=False,
    )
    return wrap_tokenizer(hf, byte_level=True)


def _bpe_tokenizer(meta: dict[str, Any], pre: str, tokens: list[str], bos: str | None) -> Any:
    """The `tokenizers` BPE the metadata describes (vocab, merges, pre-tokenizer, specials)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    merges = [tuple(m.split(" ", 1)) for m in _meta(meta, "tokenizer.ggml.merges", [])]
    types = _meta(meta, "tokenizer.ggml.token_type") or [1] * len(tokens)
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=pre not in _SPLIT_REGEX)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    elif pre in _SPLIT_REGEX:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(_SPLIT_REGEX[pre]), behavior="isolated"), byte_level]
        )
        if pre == "qwen2":  # Qwen2's tokenizer.json normalizes to NFC first
            from tokenizers import normalizers

            tok.normalizer = normalizers.NFC()
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    specials = [
        AddedToken(t, special=True, normalized=False)
        for t, ty in zip(tokens, types, strict=False)
        if ty in (3, 4)
    ]
    tok.add_special_tokens(specials)
    if _meta(meta, "tokenizer.ggml.add_bos_token", False) and bos is not None:
        from tokenizers import processors

        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])]
        )
    return tok
