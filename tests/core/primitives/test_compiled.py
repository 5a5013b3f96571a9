"""The compiled decode step (core/primitives/compiled.py) must change speed only, never a logit or a token."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx_lm.models import llama, qwen2
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from core.decode.engine import Engine
from core.events import RunSummary
from core.primitives.compiled import CompiledDecodeStep, supports
from core.settings import Settings

VOCAB = 128


def _model(mod, layers: int, seed: int, *, qwen_shape: bool, quantize: bool) -> nn.Module:
    """A llama, or a qwen2 with Qwen2.5-0.5B's per-layer shape (896 wide, 14/2 heads, biases)."""
    mx.random.seed(seed)
    if qwen_shape:
        dims = dict(hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                    num_key_value_heads=2, rope_theta=1_000_000.0, tie_word_embeddings=True)
    else:
        dims = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                    num_key_value_heads=2, rope_theta=10_000.0, tie_word_embeddings=False)
    args = mod.ModelArgs(model_type="x", num_hidden_layers=layers, rms_norm_eps=1e-6,
                         vocab_size=VOCAB, **dims)
    m = mod.Model(args)
    # Sharper logits than the default init, so greedy paths are not decided by ties.
    m.update(nn.utils.tree_map(lambda p: p * 4.0 if p.ndim == 2 else p, m.parameters()))
    if quantize:
        nn.quantize(m, group_size=64, bits=4)
    mx.eval(m.parameters())
    return m


CASES = [
    pytest.param(llama, False, False, id="llama-dense"),
    pytest.param(llama, False, True, id="llama-4bit"),
    pytest.param(qwen2, True, True, id="qwen2.5-shape-4bit"),
]


@pytest.mark.parametrize(("mod", "qwen_shape", "quantize"), CASES)
def test_fused_step_logits_and_cache_equal_the_model_forward(mod, qwen_shape, quantize):
    """Step by step over 300 tokens (past a buffer growth), with a trim in the middle as after
    a rejection: logits agree to float tolerance and the caches hold the same keys/values."""
    m = _model(mod, 2, 0, qwen_shape=qwen_shape, quantize=quantize)
    fused = CompiledDecodeStep(m)
    ref, fast = make_prompt_cache(m), make_prompt_cache(m)
    prompt = mx.array([[3, 5, 7, 11, 13, 17]])
    m(prompt, cache=ref)
    m(prompt, cache=fast)
    tok = mx.array([1])
    worst = 0.0
    for i in range(300):
        a = m(tok[None], cache=ref)[0]
        b = fused.step(tok, fast)
        worst = max(worst, mx.abs(a - b).max().item())
        tok = mx.argmax(a, axis=-1)
        if i == 120:  # a rejection: both rewind three positions, then continue
            trim_prompt_cache(ref, 3)
            trim_prompt_cache(fast, 3)
    assert worst < 1e-4
    for c_ref, c_fast in zip(ref, fast, strict=True):
        assert c_ref.offset == c_fast.offset == 6 + 300 - 3
        n = c_ref.offset
        assert mx.allclose(c_ref.keys[..., :n, :], c_fast.keys[..., :n, :], atol=1e-5).item()
        assert mx.allclose(c_ref.values[..., :n, :], c_fast.values[..., :n, :], atol=1e-5).item()


def _run(engine: Engine, settings: Settings) -> RunSummary:
    items = list(engine.generate([3, 5, 7, 11, 13, 17, 19, 23], settings))
    summary = items[-1]
    assert isinstance(summary, RunSummary)
    return summary


@pytest.mark.parametrize(("mod", "qwen_shape", "quantize"), CASES)
@pytest.mark.parametrize("rule", ["greedy", "lossless", "mentored"])
def test_engine_tokens_identical_with_and_without_the_fused_draft(mod, qwen_shape, quantize, rule):
    """A multi-round speculative run (k varies with the policy, rejections rewind the draft)
    gives the same tokens, acceptance and cache state with fused_draft on and off."""
    target = _model(mod, 2, 0, qwen_shape=qwen_shape, quantize=quantize)
    draft = _model(mod, 1, 1, qwen_shape=qwen_shape, quantize=quantize)
    out = []
    for fused in (False, True):
        engine = Engine(target, draft, vocab_size=VOCAB, eos_ids=())
        s = Settings(
            rule=rule,
            temperature=0.0 if rule == "greedy" else 1.0,
            tv_budget=0.4,
            policy="heuristic",
            k=2,
            max_tokens=40,
            ignore_eos=True,
            traced=False,
            fused_draft=fused,
            seed=7,
        )
        summary = _run(engine, s)
        state = engine.cache_state()
        assert state["draft_offset"] == len(state["draft_seq"])
        out.append((summary.token_ids, summary.accepted, summary.proposed, state["draft_seq"]))
    assert out[0] == out[1]
    assert out[0][2] > out[0][0].__len__() // 4  # really speculative: many drafts proposed


def test_target_only_and_draft_only_fused_match_unfused():
    target = _model(llama, 2, 0, qwen_shape=False, quantize=True)
    draft = _model(llama, 1, 1, qwen_shape=False, quantize=True)
    for mode in ("target-only", "draft-only"):
        runs = []
        for fused in (False, True):
            engine = Engine(target, draft, vocab_size=VOCAB)
            s = Settings(mode=mode, temperature=0.8, max_tokens=24, ignore_eos=True,
                         traced=False, fused_draft=fused, seed=3)
            runs.append(_run(engine, s).token_ids)
        assert runs[0] == runs[1], mode


def test_unsupported_layouts_are_refused_with_a_reason():
    class Bare(nn.Module):
        pass

    assert supports(Bare()) is not None
    with pytest.raises(ValueError, match="fused decode step unavailable"):
        CompiledDecodeStep(Bare())


@pytest.mark.real_model
def test_default_pair_greedy_identical_with_the_fused_draft(default_pair):
    """The real SmolLM2 pair: greedy speculative output is the same token for token.

    One engine for both runs: the fused run starts from the caches the unfused one left (the
    engine keeps the prompt both share, its multi-turn rule), so it prefills neither model
    again, ~70 rows at ~0.2 s a row on this CPU. Its draft steps still all go through the
    fused step (built on the first fused request), over the same mlx-lm KV caches."""
    from core.models import chat_prompt_ids

    ids = chat_prompt_ids(default_pair.target.tokenizer,
                          [{"role": "user", "content": "Name three colours."}])
    engine = Engine.from_pair(default_pair)
    runs = []
    for fused in (False, True):
        s = Settings(rule="greedy", temperature=0.0, k=3, max_tokens=12, traced=False,
                     fused_draft=fused)
        runs.append([it for it in engine.generate(ids, s)][-1].token_ids)
    assert engine.drafter("model").state_.compiled  # the fused step was built and ran
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("mod", "qwen_shape", "quantize"), CASES)
def test_projections_are_merged_and_exact(mod, qwen_shape, quantize):
    """q/k/v and gate/up run as one matmul each, and each projection's output is unchanged."""
    from core.primitives.compiled import merge_linears

    m = _model(mod, 2, 0, qwen_shape=qwen_shape, quantize=quantize)
    step = CompiledDecodeStep(m)
    assert all(f is not None for f in step._qkv) and all(f is not None for f in step._gate_up)
    attn = m.model.layers[0].self_attn
    x = mx.random.normal((1, 1, m.args.hidden_size), key=mx.random.key(0))
    q, k, v = step._qkv[0](x)
    for got, proj in ((q, attn.q_proj), (k, attn.k_proj), (v, attn.v_proj)):
        assert mx.allclose(got, proj(x), atol=1e-5).item()
    assert merge_linears([attn.q_proj, nn.Linear(4, 4)]) is None  # inputs differ: no stacking
