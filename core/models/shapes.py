"""Shapes: random weights in a real model's shape, so kernels and timings are real (text is noise).

``shape:NAME[,bits=B][,group=G][,dense][,vocab=V][,seed=S][,layers=L]`` builds a published
config (Qwen2.5 0.5B to 72B, Llama 3.1 8B and 70B, Llama 3.2 1B, a tiny test model) with
seeded weights, quantized as it is drawn, and the noise tokenizer of its family, so shapes of
one family pair with each other. ``layers=L`` keeps the first L decoder layers (real widths).

Memory: each matrix is quantized right after it is drawn, and a decoder layer's drawn matrices
are dropped before the next layer is drawn, so building needs the quantized model plus one
layer (or the embedding and head) in the compute dtype: a 72B shape ~41 GB at 4 bits plus
~5 GB, never the whole model unquantized (145 GB in bf16).
"""

from __future__ import annotations

import zlib
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_unflatten

from core.models.bounds import check_config_bounds
from core.models.loaded import LoadedModel, ModelLoadError, compute_dtype, quantization_config
from core.models.noise_tokenizer import noise_tokenizer
from core.models.self_draft import decoder_body
from core.models.spec import check_quantization, int_option, parse_options

# Published config.json values (Hugging Face), minus what mlx-lm ignores.
# tokenizer_size: the real tokenizer's length, so shapes of one family share a tokenizer
# while their embeddings are padded differently (Qwen2.5 0.5B/1.5B: 151936 rows, 7B: 152064).
_QWEN = {"model_type": "qwen2", "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
         "max_position_embeddings": 32768, "tokenizer_family": "qwen2.5", "tokenizer_size": 151665}
# Llama 3.1 8B and 70B (Instruct): what both share; untied head, 128k context, llama3 RoPE.
_LLAMA31 = {"model_type": "llama", "vocab_size": 128256, "rms_norm_eps": 1e-5,
            "rope_theta": 500_000.0, "max_position_embeddings": 131072,
            "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "tie_word_embeddings": False, "tokenizer_family": "llama-3",
            "tokenizer_size": 128256}
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
    "qwen2.5-14b": {**_QWEN, "hidden_size": 5120, "intermediate_size": 13824,
                    "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 48,
                    "vocab_size": 152064, "tie_word_embeddings": False},
    "qwen2.5-32b": {**_QWEN, "hidden_size": 5120, "intermediate_size": 27648,
                    "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 64,
                    "vocab_size": 152064, "tie_word_embeddings": False},
    "qwen2.5-72b": {**_QWEN, "hidden_size": 8192, "intermediate_size": 29568,
                    "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
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
    "llama-3.1-8b": {**_LLAMA31, "hidden_size": 4096, "intermediate_size": 14336,
                     "num_attention_heads": 32, "num_key_value_heads": 8,
                     "num_hidden_layers": 32},
    "llama-3.1-70b": {**_LLAMA31, "hidden_size": 8192, "intermediate_size": 28672,
                      "num_attention_heads": 64, "num_key_value_heads": 8,
                      "num_hidden_layers": 80},
    # ~107k parameters: fast enough for every test on the CPU.
    "tiny": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
             "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
             "vocab_size": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
             "max_position_embeddings": 4096, "tie_word_embeddings": True,
             "tokenizer_family": "tiny", "tokenizer_size": 512},
}
# tiny-draft is tiny's first layer (same seed family): a draft that agrees often, not always.
SHAPES["tiny-draft"] = {**SHAPES["tiny"], "num_hidden_layers": 1, "seed_family": "tiny"}
SHAPE_DEFAULT_BITS = 4
SHAPE_DEFAULT_GROUP = 64


def shape_config(name: str, vocab: int | None = None, layers: int | None = None) -> dict[str, Any]:
    """The mlx-lm config dict of a named shape (``vocab`` pads the embedding differently,
    ``layers`` keeps only the first decoder layers: every matrix keeps its real shape)."""
    if name not in SHAPES:
        raise ModelLoadError(f"Unknown shape {name!r}; known shapes: {', '.join(SHAPES)}.")
    config = {
        k: v
        for k, v in SHAPES[name].items()
        if k not in ("tokenizer_family", "tokenizer_size", "seed_family")
    }
    if vocab is not None:
        config["vocab_size"] = vocab
    if layers is not None:
        if layers < 1:
            raise ModelLoadError(f"shape:{name} needs at least 1 layer, got {layers}.")
        config["num_hidden_layers"] = layers
    # before build_random_model allocates a layer: `layers=100000` climbed until killed
    check_config_bounds(config, f"shape:{name}")
    return config


def load_shape(spec: str) -> LoadedModel:
    """A random-weight model of a real shape, built layer by layer in memory (text is noise).

    Each matrix is drawn with a fixed per-tensor key in the compute dtype and quantized
    before the next one is drawn, so a 7B shape never sits in memory unquantized.
    """
    name, options = parse_options(spec, "shape:")
    unknown = set(options) - {"bits", "group", "dense", "vocab", "seed", "layers"}
    if name is None or unknown:
        raise ModelLoadError(
            f"{spec!r} is not a shape spec: use 'shape:NAME[,bits=B][,group=G][,dense][,vocab=V]"
            f"[,layers=L]' with NAME one of {', '.join(SHAPES)}."
        )
    meta = SHAPES.get(name)
    vocab = int_option(spec, options, "vocab")
    config = shape_config(name, vocab, int_option(spec, options, "layers"))
    assert meta is not None
    if config["vocab_size"] < meta["tokenizer_size"]:
        raise ModelLoadError(
            f"{spec}: vocab must be at least the tokenizer's {meta['tokenizer_size']} tokens."
        )
    dense = "dense" in options
    bits = int_option(spec, options, "bits", SHAPE_DEFAULT_BITS)
    group = int_option(spec, options, "group", SHAPE_DEFAULT_GROUP)
    seed = int_option(spec, options, "seed", 0)
    assert bits is not None and group is not None and seed is not None
    check_quantization(spec, None if dense else bits, group)
    model = build_random_model(
        config, dtype=compute_dtype(mx.bfloat16), seed_name=f"{meta.get('seed_family', name)}/{seed}",
        bits=None if dense else bits, group=group,
    )
    if not dense:
        config["quantization"] = quantization_config(model)
    config["torch_dtype"] = "bfloat16"
    tokenizer = noise_tokenizer(meta["tokenizer_family"], meta["tokenizer_size"])
    label = "dense" if dense else f"{bits}-bit"
    if "layers" in options:
        label += f", {config['num_hidden_layers']} layers"
    return LoadedModel(model, tokenizer, spec, f"{name} (random, {label})", random_weights=True,
                       kind="shape", config=config)


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
    for i, layer in enumerate(decoder_body(model).layers):
        fill(layer, f"model.layers.{i}.")
    fill(model, "", skip="model.layers")
    model.set_dtype(dtype)
    model.eval()
    mx.eval(model.parameters())
    return model
