"""core.models: every source loads, every bad input ends in one clear sentence, pairs are checked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache
from mlx_lm.utils import _get_classes

from core import models as M
from core.models import gguf as G
from tests.helpers.models import one_sentence, write_tiny_gguf

# --- helpers -------------------------------------------------------------------------------


def greedy(model, ids: list[int], n: int) -> list[int]:
    """Plain argmax decoding with a KV cache (the engine is tested elsewhere)."""
    cache = make_prompt_cache(model)
    logits = model(mx.array(ids)[None], cache=cache)
    out: list[int] = []
    for _ in range(n):
        tok = int(mx.argmax(logits[0, -1]).item())
        out.append(tok)
        logits = model(mx.array([[tok]]), cache=cache)
    return out


# --- the embedded default (real model) -----------------------------------------------------


@pytest.mark.real_model
def test_default_target_answers_the_capital_of_france(default_pair):
    target = default_pair.target
    # float32 on the CPU backend (fp16 overflows on SmolLM2), bf16 (the model's own) elsewhere
    cpu = mx.default_device().type == mx.DeviceType.cpu
    assert M.compute_dtype() == (mx.float32 if cpu else mx.bfloat16)
    assert target.model.model.norm.weight.dtype == M.compute_dtype()
    ids = M.chat_prompt_ids(
        target.tokenizer, [{"role": "user", "content": "What is the capital of France?"}]
    )
    assert target.tokenizer.decode(ids).endswith("<|im_start|>assistant\n")
    answer = target.tokenizer.decode(greedy(target.model, ids, 12))
    assert "Paris" in answer, answer
    assert default_pair.eos_ids == frozenset({2})  # <|im_end|>
    assert default_pair.vocab_size == 49152 and default_pair.speculation_ok


@pytest.mark.real_model
def test_converted_default_saves_as_mlx_folder_that_mlx_lm_loads(default_pair, tmp_path):
    import mlx_lm

    target = default_pair.target
    folder = M.save_mlx_folder(target, tmp_path / "smollm2-mlx")
    config = json.loads((folder / "config.json").read_text())
    assert config["quantization"]["bits"] == 4 and config["quantization"]["group_size"] == 32
    assert config["quantization"]["model.embed_tokens"]["bits"] == 8  # Q8_0 embeddings kept
    model, tokenizer = mlx_lm.load(str(folder))
    ids = target.tokenizer.encode("The capital of France is", add_special_tokens=False)
    assert tokenizer.encode("The capital of France is", add_special_tokens=False) == ids
    assert greedy(model, ids, 8) == greedy(target.model, ids, 8)
    again = M.load_model(str(folder))  # the folder source: same model, compute dtype applied
    assert again.kind == "mlx" and again.name == "smollm2-mlx"
    x = mx.array(ids)[None]
    assert mx.allclose(again.model(x), target.model(x), atol=1e-4)
    with pytest.raises(M.ModelLoadError, match="not empty"):
        M.save_mlx_folder(target, folder)  # never overwrites a saved model


@pytest.mark.real_model
def test_self_drafts_match_logit_shape_and_rewind(default_pair):
    target = default_pair.target
    ids = target.tokenizer.encode("One, two, three, four", add_special_tokens=False)
    full = target.model(mx.array(ids)[None])
    for draft in (default_pair.draft, M.load_model("self:layers=15", target=target)):
        assert draft.kind == "self" and draft.tokenizer is target.tokenizer
        cache = make_prompt_cache(draft.model)
        logits = draft.model(mx.array(ids)[None], cache=cache)
        assert logits.shape == full.shape
        assert can_trim_prompt_cache(cache)
        assert trim_prompt_cache(cache, 2) == 2
        again = draft.model(mx.array(ids[-2:])[None], cache=cache)  # re-feed what was rewound
        assert mx.allclose(again[0], logits[0, -2:], atol=1e-4)
    layers = M.load_model("self:layers=15", target=target)
    assert layers.model.model.layers[0] is target.model.model.layers[0]  # shared, not copied
    assert len(layers.model.layers) == 15
    q = default_pair.draft.model.model.layers[0].self_attn.q_proj
    assert (q.bits, q.group_size) == (4, 32)  # self:bits=4 means group 32


@pytest.mark.real_model
def test_default_and_a_shape_do_not_pair():
    with pytest.raises(M.IncompatiblePairError) as exc:
        M.load_pair("default", "shape:tiny")
    msg = one_sentence(exc.value)
    assert "SmolLM2" in msg and "tiny" in msg and "tokenizer" in msg


# --- bad inputs ----------------------------------------------------------------------------


def test_missing_path(tmp_path):
    for spec in (str(tmp_path / "nope.gguf"), str(tmp_path / "no" / "folder"), "nope.gguf"):
        with pytest.raises(M.ModelLoadError, match="No such file or folder") as exc:
            M.load_model(spec)
        one_sentence(exc.value)


def test_not_a_gguf_file(tmp_path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello, I am not a model\n")
    with pytest.raises(M.ModelLoadError, match="neither a GGUF file nor an mlx-lm") as exc:
        M.load_model(str(text))
    one_sentence(exc.value)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"GGUF" + bytes(100))  # the magic, then nothing usable
    with pytest.raises(M.ModelLoadError, match="GGUF") as exc:
        M.load_model(str(empty))
    one_sentence(exc.value)


def test_folder_that_is_not_a_model_and_strings_that_are_nothing(tmp_path):
    with pytest.raises(M.ModelLoadError, match="not an mlx-lm model folder") as exc:
        M.load_model(str(tmp_path))
    one_sentence(exc.value)
    with pytest.raises(M.ModelLoadError, match="is not a model") as exc:
        M.load_model("what is this?")
    one_sentence(exc.value)
    with pytest.raises(M.ModelLoadError, match="Unknown shape"):
        M.load_model("shape:gpt-5")
    with pytest.raises(M.ModelLoadError, match="only be the draft of a pair"):
        M.load_model("self:bits=3")


def test_hub_repo_that_cannot_be_fetched(monkeypatch):
    import huggingface_hub

    def offline(*a, **kw):
        raise huggingface_hub.errors.LocalEntryNotFoundError("offline")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(M.ModelLoadError, match="Hugging Face Hub") as exc:
        M.load_model("mlx-community/Qwen2.5-7B-Instruct-4bit")
    assert "mlx-community/Qwen2.5-7B-Instruct-4bit" in one_sentence(exc.value)


def test_bad_self_specs_on_a_tiny_target():
    target = M.load_model("shape:tiny")
    for spec, words in [
        ("self:layers=2", "1 <= N < 2"),
        ("self:layers=0", "1 <= N < 2"),
        ("self:bits=7", "bits in"),
        ("self:bits=3,group=48", "group 32, 64 or 128"),
        ("self:bits=x", "must be an integer"),
        ("self:depth=3", "not a self-draft"),
        ("self:layers=1,bits=3", "not a self-draft"),
    ]:
        with pytest.raises(M.ModelLoadError) as exc:
            M.derive_self_draft(target, spec)
        assert words in one_sentence(exc.value), spec


# --- GGUF conversion on a tiny file --------------------------------------------------------


def test_gguf_conversion_reproduces_the_model_it_came_from(tmp_path):
    source = M.load_model("shape:tiny,dense")
    path = write_tiny_gguf(tmp_path / "tiny.gguf", source)
    loaded = M.load_model(str(path))
    assert loaded.kind == "gguf" and loaded.name == "tiny gguf"
    ids = source.tokenizer.encode("a tiny prompt, 123", add_special_tokens=False)
    assert loaded.tokenizer.encode("a tiny prompt, 123", add_special_tokens=False) == ids
    x = mx.array(ids)[None]
    assert mx.allclose(loaded.model(x), source.model(x), atol=1e-4)  # Q/K un-permuted right
    pair = M.check_pair(loaded, source)  # a rebuilt tokenizer equals the original
    assert pair.speculation_ok and pair.eos_ids == frozenset({2})


def test_read_only_gguf_loads_from_a_copy_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(M.CACHE_ENV, str(tmp_path / "cache"))
    source = M.load_model("shape:tiny,dense")
    path = write_tiny_gguf(tmp_path / "ro.gguf", source)
    real_access = os.access

    def access(p, mode, **kw):  # as if read-only: root may write anything
        return False if Path(p) == path else real_access(p, mode, **kw)

    monkeypatch.setattr(G.os, "access", access)
    loaded = M.load_model(str(path))
    x = mx.array([[5, 6, 7]])
    assert mx.allclose(loaded.model(x), source.model(x), atol=1e-4)
    copies = list((tmp_path / "cache" / "gguf").iterdir())  # one copy, no temp leftovers
    assert len(copies) == 1 and copies[0].read_bytes() == path.read_bytes()


def test_gguf_of_another_architecture_or_tokenizer_is_refused(tmp_path):
    source = M.load_model("shape:tiny,dense")
    phi = write_tiny_gguf(tmp_path / "p.gguf", source, arch="phi3")
    with pytest.raises(M.ModelLoadError, match="only llama and qwen2") as exc:
        M.load_model(str(phi))
    one_sentence(exc.value)
    spm = write_tiny_gguf(tmp_path / "s.gguf", source, tok_model="llama")
    with pytest.raises(M.ModelLoadError, match="byte-level BPE") as exc:
        M.load_model(str(spm))
    one_sentence(exc.value)


# --- shapes and pairs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, params",
    [
        ("qwen2.5-0.5b", 494_032_768),
        ("qwen2.5-1.5b", 1_543_714_304),
        ("qwen2.5-7b", 7_615_616_512),
        ("llama-3.2-1b", 1_235_814_400),
        ("tiny", 106_816),
    ],
)
def test_shape_configs_have_the_published_parameter_counts(name, params):
    config = M.shape_config(name)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))  # lazy: nothing is allocated
    assert sum(v.size for _, v in tree_flatten(model.parameters())) == params


def test_shape_tiny_pair_can_speculate():
    pair = M.load_pair("shape:tiny", "shape:tiny-draft")
    assert pair.speculation_ok and pair.speculation_reason is None
    assert pair.vocab_size == 512 and pair.eos_ids == frozenset({2})
    assert pair.target.random_weights and pair.draft.random_weights
    q = pair.target.model.model.layers[0].mlp.down_proj
    assert (q.bits, q.group_size) == (4, 64)  # shapes default to 4-bit group 64
    ids = M.chat_prompt_ids(pair.target.tokenizer, [{"role": "user", "content": "hi"}])
    for m in (pair.target, pair.draft):
        assert m.model(mx.array(ids)[None]).shape == (1, len(ids), 512)
    # tiny-draft is tiny's first layer: same seed family, so they share the embedding
    assert mx.array_equal(
        pair.target.model.model.embed_tokens.weight, pair.draft.model.model.embed_tokens.weight
    )


def test_shapes_are_deterministic_and_seedable():
    x = mx.array([[5, 6, 7, 8]])
    a, b = M.load_model("shape:tiny"), M.load_model("shape:tiny")
    assert mx.array_equal(a.model(x), b.model(x))
    c = M.load_model("shape:tiny,seed=1")
    assert not mx.allclose(a.model(x), c.model(x))
    dense = M.load_model("shape:tiny,dense")
    assert dense.model.model.layers[0].self_attn.q_proj.weight.dtype == M.compute_dtype()
    eight = M.load_model("shape:tiny,bits=8").model.model.layers[0].self_attn.q_proj
    assert eight.bits == 8


def test_differently_padded_vocab_is_sliced_not_refused():
    pair = M.load_pair("shape:tiny", "shape:tiny,vocab=576")
    assert (pair.target.vocab_rows, pair.draft.vocab_rows, pair.vocab_size) == (512, 576, 512)
    pair = M.load_pair("shape:tiny,vocab=640", "shape:tiny,vocab=576")
    assert pair.vocab_size == 576 and pair.speculation_ok
    assert pair.draft.model(mx.array([[3, 4]])).shape[-1] == 576


def test_self_drafts_of_a_shape_and_a_target_only_pair():
    pair = M.load_pair("shape:tiny", "self:bits=2,group=64")
    q = pair.draft.model.model.layers[1].mlp.up_proj
    assert (q.bits, q.group_size) == (2, 64)
    assert pair.draft.model.model.norm is pair.target.model.model.norm  # non-matrices shared
    assert pair.target.model.model.layers[1].mlp.up_proj.bits == 4  # the target is untouched
    alone = M.load_pair("shape:tiny", None)
    assert alone.draft is None and not alone.speculation_ok and alone.speculation_reason


def test_sliding_window_cache_turns_speculation_off():
    config = dict(
        M.shape_config("tiny"),
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=8,
    )
    model = M.build_random_model(config, dtype=mx.float32, seed_name="swa", bits=None, group=64)
    swa = M.LoadedModel(
        model, M.load_model("shape:tiny").tokenizer, "swa", "tiny-swa", True, "shape", config
    )
    pair = M.check_pair(swa, M.load_model("shape:tiny-draft"))
    assert not pair.speculation_ok
    assert "tiny-swa" in pair.speculation_reason and "sliding-window" in pair.speculation_reason


def test_noise_tokenizer_round_trips_text_and_shows_noise_for_other_ids():
    tok = M.load_model("shape:tiny").tokenizer
    text = "héllo wörld 👋\n  two spaces"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    noise = tok.decode([300, 301, 400])
    assert noise.strip() and noise.isascii()  # pronounceable syllables, not empty
    assert tok.eos_token_ids == {2} and tok.convert_ids_to_tokens(2) == "<|im_end|>"
