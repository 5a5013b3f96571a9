"""Every GGUF tensor type llama.cpp users have loads, and matches llama.cpp's own dequantization.

Files are written here with gguf-py's GGUFWriter: tensors quantized with `gguf.quants.quantize`
where gguf-py implements it (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16), else random blocks with valid
float16 scales (the K- and IQ-quants, which gguf-py only dequantizes). What we load is compared
with `gguf.quants.dequantize` of the same bytes: exactly for grids MLX holds as they are, within
the requantization's own bound for the rest.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

from core import models as M
from core.models import gguf_convert as C
from core.models.gguf_header import read_gguf_header
from tests.helpers.models import one_sentence

# Where each type without a numpy quantizer keeps its float16 scale(s), in bytes of a block.
_F16_AT = {"Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
           "IQ4_NL": (0,), "IQ4_XS": (0,)}
EXACT = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K"]
REQUANTIZED = ["Q2_K", "Q3_K", "Q6_K", "IQ4_NL", "IQ4_XS"]


def raw_tensor(type_name: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """A (rows, cols) tensor of `type_name` as gguf-py's raw bytes (or floats for F32)."""
    rng = np.random.default_rng(seed)
    qtype = GGMLQuantizationType[type_name]
    if type_name not in _F16_AT:
        return gguf.quants.quantize(rng.normal(0, 0.05, (rows, cols)).astype(np.float32), qtype)
    block, size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
    for at in _F16_AT[type_name]:
        d = rng.uniform(2e-4, 2e-3, len(blocks)).astype(np.float16)
        blocks[:, at : at + 2] = d.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


def write_gguf(path: Path, tensors: dict[str, tuple[str, np.ndarray]], arch: str = "llama",
               meta: dict | None = None) -> Path:
    """A GGUF of `tensors` (name -> (type, raw)) and `meta` (key -> value), via GGUFWriter."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in (meta or {}).items():
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        else:
            w.add_array(key, value)
    for name, (type_name, raw) in tensors.items():
        qtype = GGMLQuantizationType[type_name]
        if type_name in ("F32", "F16"):
            w.add_tensor(name, raw)
        else:
            w.add_tensor(name, raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def loaded_matrix(weights: dict[str, mx.array], name: str) -> tuple[np.ndarray, int]:
    """A converted tensor as float32 and the bits it was stored at (32 for float)."""
    base = name.removesuffix(".weight")
    if f"{base}.scales" not in weights:
        return np.array(weights[name].astype(mx.float32)), 32
    wq, s, b = weights[name], weights[f"{base}.scales"], weights[f"{base}.biases"]
    bits = wq.shape[-1] * 32 // (s.shape[-1] * C.GROUP)
    return np.array(mx.dequantize(wq, s, b, group_size=C.GROUP, bits=bits)), bits


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(M.CACHE_ENV, str(tmp_path / "cache"))


@pytest.mark.parametrize("type_name", EXACT + REQUANTIZED + ["BF16"])
def test_each_type_matches_gguf_py_within_the_requantization_bound(tmp_path, type_name):
    rows, cols = 8, 512  # whole 256-weight super-blocks for the K- and IQ4_XS types
    raw = raw_tensor(type_name, rows, cols)
    path = write_gguf(tmp_path / f"{type_name}.gguf", {"blk.0.ffn_up.weight": (type_name, raw)})
    header = read_gguf_header(path)  # a valid file of any of these types passes the walk
    assert header.tensors[0].type_name == type_name
    weights, _, _ = C.cached_or_converted(path, str(path))
    got, bits = loaded_matrix(weights, "blk.0.ffn_up.weight")
    ref = gguf.quants.dequantize(raw, GGMLQuantizationType[type_name]).reshape(rows, cols)
    err = np.abs(got - ref).reshape(rows, -1, C.GROUP)
    groups = ref.reshape(rows, -1, C.GROUP)
    scale = np.abs(ref).max() + 1e-30
    if type_name == "BF16":
        assert bits == 32 and err.max() == 0
    elif type_name in EXACT:  # the source's own integers, scale and offset: float32 rounding only
        assert bits == C.AFFINE_BITS[type_name]
        assert err.max() <= 1e-6 * scale, err.max()
    else:  # requantized at group 32: within one step of its grid over the group's range
        assert bits == C.requantized_bits(type_name) and bits in C.MLX_BITS
        step = (groups.max(-1) - groups.min(-1)) / (2**bits - 1)
        assert (err.max(-1) <= step + 1e-6 * scale).all(), (err.max(-1) / step).max()
        assert err.mean() < (step.mean() / 2)  # rounding, not a systematic shift
    assert C.requantized_bits("Q6_K") == 8 and C.requantized_bits("Q2_K") == 3


def test_the_conversion_is_cached_by_the_files_sha256(tmp_path, monkeypatch):
    raw = raw_tensor("Q6_K", 4, 256)
    path = write_gguf(tmp_path / "a.gguf", {"blk.0.ffn_up.weight": ("Q6_K", raw)})
    first, _, folder = C.cached_or_converted(path, str(path))
    assert folder.name.startswith(C.file_sha256(path)) and (folder / "weights.safetensors").is_file()
    copy = tmp_path / "b.gguf"
    copy.write_bytes(path.read_bytes())  # another name, the same bytes: the same cache entry

    def no_conversion(*a, **k):
        raise AssertionError("converted again")

    monkeypatch.setattr(C, "convert_gguf", no_conversion)
    again, _, folder2 = C.cached_or_converted(copy, str(copy))
    assert folder2 == folder
    assert mx.array_equal(again["blk.0.ffn_up.weight"], first["blk.0.ffn_up.weight"])


def test_a_type_nothing_reads_is_unsupported_not_malformed(tmp_path):
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType.Q8_K]
    raw = np.zeros((2, 256 // block * size), dtype=np.uint8)
    path = write_gguf(tmp_path / "q8k.gguf", {"blk.0.ffn_up.weight": ("Q8_K", raw)})
    with pytest.raises(M.ModelLoadError) as exc:
        M.load_model(str(path))
    msg = one_sentence(exc.value)
    assert "Q8_K" in msg and "unsupported" in msg and "malformed" not in msg, msg


# --- a tiny qwen2 model end to end -----------------------------------------------------------

QWEN = {"model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
        "vocab_size": 512, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
        "max_position_embeddings": 4096, "tie_word_embeddings": False}
# Per GGUF tensor kind, the type it is written as: a Q4_K_M-like mix of every exact grid.
KINDS = {"attn_q": "Q4_K", "attn_k": "Q5_0", "attn_v": "Q8_0", "attn_output": "Q5_K",
         "ffn_gate": "Q4_1", "ffn_up": "Q5_1", "ffn_down": "Q4_0"}
_MLX = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj"}


def test_a_tiny_qwen2_gguf_gives_the_float_models_logits(tmp_path):
    """Mixed K-quant / legacy / BF16 tensors, attention biases, no Q/K permutation (NEOX RoPE):
    the loaded model's logits equal those of a float model holding gguf-py's dequantized
    weights."""
    from mlx_lm.models import qwen2

    source = M.load_model("shape:tiny,dense")  # its noise tokenizer (512 tokens)
    tokens = source.tokenizer.convert_ids_to_tokens(list(range(QWEN["vocab_size"])))
    rng = np.random.default_rng(1)
    h, f, v = QWEN["hidden_size"], QWEN["intermediate_size"], QWEN["vocab_size"]
    kv = h // QWEN["num_attention_heads"] * QWEN["num_key_value_heads"]
    out_rows = {"attn_q": (h, h), "attn_k": (kv, h), "attn_v": (kv, h), "attn_output": (h, h),
                "ffn_gate": (f, h), "ffn_up": (f, h), "ffn_down": (h, f)}
    tensors: dict[str, tuple[str, np.ndarray]] = {}
    reference: dict[str, mx.array] = {}
    embed = gguf.quants.quantize(rng.normal(0, 0.5, (v, h)).astype(np.float32),
                                 GGMLQuantizationType.BF16)
    tensors["token_embd.weight"] = ("BF16", embed)
    reference["model.embed_tokens.weight"] = mx.array(
        gguf.quants.dequantize(embed, GGMLQuantizationType.BF16))
    head = raw_tensor("Q6_K", v, h, seed=9)  # requantized at 8 bits: the only inexact tensor
    tensors["output.weight"] = ("Q6_K", head)
    ones = np.ones(h, dtype=np.float32)
    tensors["output_norm.weight"] = ("F32", ones)
    reference["model.norm.weight"] = mx.array(ones)
    for i in range(QWEN["num_hidden_layers"]):
        for kind, type_name in KINDS.items():
            raw = raw_tensor(type_name, *out_rows[kind], seed=100 * i + len(tensors))
            tensors[f"blk.{i}.{kind}.weight"] = (type_name, raw)
            reference[f"model.layers.{i}.{_MLX[kind]}.weight"] = mx.array(
                gguf.quants.dequantize(raw, GGMLQuantizationType[type_name]))
        for kind, n in (("attn_q", h), ("attn_k", kv), ("attn_v", kv)):
            bias = rng.normal(0, 0.1, n).astype(np.float32)
            tensors[f"blk.{i}.{kind}.bias"] = ("F32", bias)
            reference[f"model.layers.{i}.{_MLX[kind]}.bias"] = mx.array(bias)
        for kind, mlx_name in (("attn_norm", "input_layernorm"),
                               ("ffn_norm", "post_attention_layernorm")):
            tensors[f"blk.{i}.{kind}.weight"] = ("F32", ones)
            reference[f"model.layers.{i}.{mlx_name}.weight"] = mx.array(ones)
    meta = {
        "general.name": "tiny qwen2", "qwen2.block_count": 2, "qwen2.context_length": 4096,
        "qwen2.embedding_length": h, "qwen2.feed_forward_length": f,
        "qwen2.attention.head_count": 4, "qwen2.attention.head_count_kv": 2,
        "qwen2.rope.freq_base": 1e6, "qwen2.attention.layer_norm_rms_epsilon": 1e-6,
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [3 if i < 3 else 1 for i in range(v)],
        "tokenizer.ggml.eos_token_id": 2,
    }
    path = write_gguf(tmp_path / "tiny-qwen2.gguf", tensors, arch="qwen2", meta=meta)
    loaded = M.load_model(str(path))
    assert loaded.kind == "gguf" and loaded.config["model_type"] == "qwen2"
    assert loaded.config["quantization"]["lm_head"]["bits"] == 8  # Q6_K -> 8 bits
    ref_model = qwen2.Model(qwen2.ModelArgs.from_dict(QWEN))
    reference["lm_head.weight"] = mx.array(gguf.quants.dequantize(head, GGMLQuantizationType.Q6_K))
    ref_model.load_weights(list(reference.items()), strict=True)
    x = mx.array([[5, 17, 300, 42, 7, 511, 64, 3]])
    got, want = loaded.model(x), ref_model(x)
    # The 8-bit head adds at most one 8-bit step per weight; everything before it is exact.
    head_err = np.abs(np.array(loaded.model.lm_head(mx.eye(h))) - np.array(reference["lm_head.weight"]).T)
    hidden = np.abs(np.array(ref_model.model(x))).sum(-1).max()
    assert float(mx.abs(got - want).max()) <= head_err.max() * hidden + 1e-3
    assert (np.array(got.argmax(-1)) == np.array(want.argmax(-1))).mean() >= 0.75
    # Again from the cache: the same model, and the tokenizer read back from its saved file.
    again = M.load_model(str(path))
    assert mx.allclose(again.model(x), got, atol=1e-5)
    text = "a tiny prompt, 123"
    assert again.tokenizer.encode(text) == loaded.tokenizer.encode(text)


@pytest.mark.parametrize("kind", ["fifo", "lie"])
def test_a_hostile_sha256_memo_is_set_aside_and_the_file_hashed(tmp_path, kind, caplog) -> None:
    """The conversion cache's memo is a kept file: a FIFO never blocks the load, and a digest
    that is not one never names the folder loaded."""
    import hashlib
    import json
    import os

    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"gguf bytes" * 50)
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert C.file_sha256(weights) == digest
    memo = next((tmp_path / "cache" / "gguf-mlx" / "sha256").iterdir())
    memo.unlink()
    if kind == "fifo":
        os.mkfifo(memo)
    else:
        st = weights.stat()
        memo.write_text(json.dumps({"path": str(weights.resolve()), "size": st.st_size,
                                    "mtime_ns": st.st_mtime_ns, "sha256": "../elsewhere"}))
    with caplog.at_level("WARNING", logger="core"):
        assert C.file_sha256(weights) == digest
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(memo) in said[0], said
    assert json.loads(memo.read_text())["sha256"] == digest
