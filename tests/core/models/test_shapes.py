"""Large shapes (Qwen2.5 14B/32B/72B, Llama 3.1 8B/70B): published configs, `layers=L`, and a
build that never holds the model unquantized.

A real-width build of these draws tens of billions of normals: seconds on a GPU, many minutes
on this CPU. So the real widths are checked lazily (MLX computes shapes without computing
values: the whole build and a forward run as a graph, with evaluation switched off), and the
bound on memory is measured on a narrow model of many layers, where it shows just as well.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import _get_classes

from core import models as M
from core.models import shapes as S

# name: (hidden, layers, heads, KV heads, intermediate, vocab, rope theta, tied, rms eps,
#        parameters), from each model's published config.json (Instruct).
PUBLISHED = {
    "qwen2.5-14b": (5120, 48, 40, 8, 13824, 152064, 1e6, False, 1e-6, 14_770_033_664),
    "qwen2.5-32b": (5120, 64, 40, 8, 27648, 152064, 1e6, False, 1e-6, 32_763_876_352),
    "qwen2.5-72b": (8192, 80, 64, 8, 29568, 152064, 1e6, False, 1e-6, 72_706_203_648),
    "llama-3.1-8b": (4096, 32, 32, 8, 14336, 128256, 5e5, False, 1e-5, 8_030_261_248),
    "llama-3.1-70b": (8192, 80, 64, 8, 28672, 128256, 5e5, False, 1e-5, 70_553_706_496),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_large_shapes_have_the_published_config(name):
    hidden, layers, heads, kv, inter, vocab, theta, tied, eps, params = PUBLISHED[name]
    c = M.shape_config(name)
    got = tuple(c[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                               "num_key_value_heads", "intermediate_size", "vocab_size",
                               "rope_theta", "tie_word_embeddings", "rms_norm_eps"))
    assert got == (hidden, layers, heads, kv, inter, vocab, theta, tied, eps)
    if name.startswith("llama-3.1"):
        assert c["rope_scaling"]["rope_type"] == "llama3" and c["rope_scaling"]["factor"] == 8.0
    model_class, args_class = _get_classes(c)
    model = model_class(args_class.from_dict(c))  # lazy: nothing is allocated
    assert sum(v.size for _, v in tree_flatten(model.parameters())) == params
    # layers=L keeps every matrix's shape and only the first L layers
    two = M.shape_config(name, layers=2)
    assert two["num_hidden_layers"] == 2 and two["hidden_size"] == hidden
    assert len(model_class(args_class.from_dict(two)).layers) == 2


def test_layers_option_is_checked():
    with pytest.raises(M.ModelLoadError, match="at least 1 layer"):
        M.shape_config("qwen2.5-72b", layers=0)
    with pytest.raises(M.ModelLoadError, match="integer"):
        M.load_model("shape:qwen2.5-72b,layers=two")
    tiny = M.load_model("shape:tiny,layers=1")
    assert len(tiny.model.layers) == 1 and "1 layers" in tiny.name
    # tiny with its first layer is tiny-draft's model: same seed family, same layer 0
    x = mx.array([[5, 6, 7]])
    draft = M.load_model("shape:tiny-draft")
    assert mx.array_equal(tiny.model(x), draft.model(x))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_a_two_layer_variant_builds_and_runs_a_forward_at_real_width(name, monkeypatch):
    """The whole build path (draw, quantize, load) and a cached forward, as a graph: every
    shape and dtype is checked at the real widths without computing a value."""
    monkeypatch.setattr(mx, "eval", lambda *a, **k: None)
    loaded = M.load_model(f"shape:{name},layers=2")
    model, c = loaded.model, loaded.config
    assert loaded.random_weights and c["num_hidden_layers"] == 2 and len(model.layers) == 2
    assert (c["quantization"]["bits"], c["quantization"]["group_size"]) == (4, 64)
    mats = [m for _, m in model.named_modules() if isinstance(m, nn.QuantizedLinear)]
    assert len(mats) == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and the untied head
    assert all(m.bits == 4 for m in mats)
    assert isinstance(model.model.embed_tokens, nn.QuantizedEmbedding)
    ids = [1, 2, 3, 4, 5]
    cache = make_prompt_cache(model)
    out = model(mx.array(ids)[None], cache=cache)
    assert out.shape == (1, len(ids), c["vocab_size"])
    assert model(mx.array([[6]]), cache=cache).shape == (1, 1, c["vocab_size"])
    assert loaded.tokenizer.vocab_size <= c["vocab_size"]


def test_building_quantizes_layer_by_layer_so_peak_memory_stays_far_below_dense():
    """16 layers: a build that drew everything before quantizing would peak above the dense
    size; layer by layer it peaks near the quantized size plus one layer."""
    config = dict(M.shape_config("tiny"), hidden_size=256, intermediate_size=1024,
                  num_hidden_layers=16, tie_word_embeddings=False)
    mx.clear_cache()
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    model = S.build_random_model(config, dtype=mx.bfloat16, seed_name="bound", bits=4, group=64)
    peak = mx.get_peak_memory() - base
    dense_bytes = 2 * sum(
        v.size for _, v in tree_flatten(model_class_params(config))
    )  # what the whole model holds in bf16
    held = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    assert held < dense_bytes / 3  # 4-bit: about 0.28 of bf16
    assert peak < dense_bytes / 2, (peak, dense_bytes, held)
    del model


def model_class_params(config):
    model_class, args_class = _get_classes(config)
    return model_class(args_class.from_dict(config)).parameters()  # lazy: sizes only
