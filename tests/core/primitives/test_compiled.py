"""The compiled forward (core/primitives/compiled.py) must change speed only, never a logit or a token."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx_lm.models import llama, qwen2
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from core.decode.engine import Engine
from core.events import RunSummary
from core.primitives.compiled import BUCKETS, CompiledForward, bucket, supports
from core.settings import Settings

VOCAB = 128


def _model(mod, layers: int, seed: int, *, qwen_shape: bool, quantize: bool) -> nn.Module:
    """A llama, or a qwen2 with Qwen2.5-0.5B's attention shape (896 wide, 14/2 heads of 64,
    biases on q/k/v, tied head).

    The MLP is 256 wide, not the real 4864: the compiled step's MLP code (gate and up as one
    matmul split at their shared width, then down) is the same at any width, while on this CPU
    the real width's 4-bit matmuls were ~90% of a forward, and these tests run hundreds."""
    mx.random.seed(seed)
    if qwen_shape:
        dims = dict(hidden_size=896, intermediate_size=256, num_attention_heads=14,
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
    fused = CompiledForward(m)
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
def test_engine_tokens_identical_eager_and_compiled(mod, qwen_shape, quantize, rule):
    """A multi-round speculative run (k varies with the policy, rejections rewind both
    caches) gives the same tokens, acceptance and cache state with step eager and compiled:
    the draft's steps and the target's verifications both run the compiled forward."""
    target = _model(mod, 2, 0, qwen_shape=qwen_shape, quantize=quantize)
    draft = _model(mod, 1, 1, qwen_shape=qwen_shape, quantize=quantize)
    out = []
    for step in ("eager", "compiled"):
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
            step=step,
            seed=7,
        )
        summary = _run(engine, s)
        state = engine.cache_state()
        assert state["draft_offset"] == len(state["draft_seq"])
        assert state["target_offset"] == len(state["target_seq"])
        out.append((summary.token_ids, summary.accepted, summary.proposed, state["draft_seq"],
                    state["target_seq"]))
        report = engine.step_report()
        assert report["step"] == step
        assert (report["graphs"] > 0) == (step == "compiled")  # it really ran compiled
    assert out[0] == out[1]
    assert out[0][2] > out[0][0].__len__() // 4  # really speculative: many drafts proposed


def test_target_only_and_draft_only_compiled_match_eager():
    target = _model(llama, 2, 0, qwen_shape=False, quantize=True)
    draft = _model(llama, 1, 1, qwen_shape=False, quantize=True)
    for mode in ("target-only", "draft-only"):
        runs = []
        for step in ("eager", "compiled"):
            engine = Engine(target, draft, vocab_size=VOCAB)
            s = Settings(mode=mode, temperature=0.8, max_tokens=24, ignore_eos=True,
                         traced=False, step=step, seed=3)
            runs.append(_run(engine, s).token_ids)
            assert (engine.step_report()["graphs"] > 0) == (step == "compiled")
        assert runs[0] == runs[1], mode


def test_unsupported_layouts_are_refused_with_a_reason():
    class Bare(nn.Module):
        pass

    assert supports(Bare()) is not None
    with pytest.raises(ValueError, match="compiled step unavailable"):
        CompiledForward(Bare())


@pytest.mark.real_model
def test_default_pair_compiled_forward_equals_eager_at_each_verification_shape(
    default_pair, default_greedy
):
    """The real SmolLM2 target and its 4-bit self-draft: the compiled forward's logits and cache
    equal the eager forward's at the row counts a speculative round runs (1 row, a verification
    of 5 padded to the bucket of 8, a full 8), over a buffer grown on the way.

    Logits to float tolerance check more than the greedy tokens of a run do (a wrong logit
    that leaves the argmax alone passes a token comparison); the speculative run below checks
    the engine's rounds. The compiled buffer is cut to 2 free slots after the prefill, so the
    5-row forward must grow it (core/primitives/compiled.py `_ensure_capacity`), as the
    294-position run that this test and the next replace grew it past 256."""
    ids, reference = default_greedy
    prompt = mx.array([ids[-6:]])  # six rows of prefill: a row costs about a step on this CPU
    for lm in (default_pair.target, default_pair.draft):
        m = lm.model
        fwd = CompiledForward(m)
        ref, fast = make_prompt_cache(m), make_prompt_cache(m)
        m(prompt, cache=ref)
        m(prompt, cache=fast)
        for c in fast:  # a buffer with room for 2 rows: the 5-row forward grows it
            c.keys, c.values = c.keys[..., : c.offset + 2, :], c.values[..., : c.offset + 2, :]
        start = 0
        for rows in (1, 5, 8):
            toks = mx.array(reference[start : start + rows], dtype=mx.uint32)
            start += rows
            a = m(toks[None], cache=ref)[0]
            b = fwd.forward(toks, fast)
            assert b.shape == a.shape
            assert mx.allclose(a, b, atol=1e-4).item(), (lm.name, rows)
        assert fwd.graphs >= 2  # the 1-row and 8-row buckets were traced and ran
        assert fast[0].keys.shape[2] > 6 + 2  # the buffer grew
        n = ref[0].offset
        for c_ref, c_fast in zip(ref, fast, strict=True):
            assert c_fast.offset == n == 6 + 1 + 5 + 8
            assert mx.allclose(c_ref.keys[..., :n, :], c_fast.keys[..., :n, :], atol=1e-5).item()
            assert mx.allclose(c_ref.values[..., :n, :], c_fast.values[..., :n, :],
                               atol=1e-5).item()


@pytest.mark.real_model
def test_default_pair_greedy_identical_eager_and_compiled(default_pair, default_greedy):
    """The real SmolLM2 pair, 32 greedy tokens: speculative decoding with step compiled (the
    draft's steps and the target's verifications compiled) gives, token for token, the first
    eager target-only tokens of the session's shared reference (tests/helpers/greedy_reference.py).

    Greedy speculative must equal greedy target-only, so a compiled forward that changed a token,
    or a speculative round that kept a wrong draft, fails it. k at most 7 under the heuristic
    policy (+2 after a full acceptance, -1 otherwise): the first verification is the full bucket
    of 8 rows, and as drafts are rejected the next ones run every count from 7 down to 2, each
    padded to 8 (core/primitives/compiled.py), so padded rows are masked on the real model.
    32 tokens, not 256: the rounds past the first dozen repeat those row counts, and on this
    CPU a row costs about a decode step (24 s here against 150 s for 256 tokens); the logits
    at each shape are checked to tolerance by the test above."""
    ids, reference = default_greedy
    engine = Engine.from_pair(default_pair)
    s = Settings(rule="greedy", temperature=0.0, k=7, k_max=7, policy="heuristic",
                 max_tokens=32, ignore_eos=True, traced=False, step="compiled")
    *rounds, summary = engine.generate(ids, s)
    assert engine.step_report()["graphs"] > 0  # the compiled forwards were built and ran
    assert len(reference) >= s.max_tokens
    assert summary.token_ids == reference[: s.max_tokens]
    rows = {e.rows for e in rounds}
    assert 8 in rows and set(range(2, 8)) <= rows  # the full and every padded verification ran
    assert 2 * sum(e.accepted for e in rounds) > s.max_tokens  # most came from accepted drafts


@pytest.mark.parametrize(("mod", "qwen_shape", "quantize"), CASES)
def test_projections_are_merged_and_exact(mod, qwen_shape, quantize):
    """q/k/v and gate/up run as one matmul each, and each projection's output is unchanged."""
    from core.primitives.compiled import merge_linears

    m = _model(mod, 2, 0, qwen_shape=qwen_shape, quantize=quantize)
    step = CompiledForward(m)
    assert all(f is not None for f in step._qkv) and all(f is not None for f in step._gate_up)
    attn = m.model.layers[0].self_attn
    x = mx.random.normal((1, 1, m.args.hidden_size), key=mx.random.key(0))
    q, k, v = step._qkv[0](x)
    for got, proj in ((q, attn.q_proj), (k, attn.k_proj), (v, attn.v_proj)):
        assert mx.allclose(got, proj(x), atol=1e-5).item()
    assert merge_linears([attn.q_proj, nn.Linear(4, 4)]) is None  # inputs differ: no stacking


@pytest.mark.parametrize(("mod", "qwen_shape", "quantize"), CASES)
def test_every_row_count_1_to_33_matches_the_model_forward(mod, qwen_shape, quantize):
    """Forwards of 1..33 rows (every bucket, padded rows masked out), one after another over a
    growing cache: each row's logits equal the model's own forward to float tolerance, and
    the caches hold the same keys/values. Graphs: one per bucket per buffer size, none on a
    replay of a shape already traced."""
    m = _model(mod, 2, 0, qwen_shape=qwen_shape, quantize=quantize)
    fwd = CompiledForward(m)
    ref, fast = make_prompt_cache(m), make_prompt_cache(m)
    prompt = mx.array([[3, 5, 7, 11]])
    m(prompt, cache=ref)
    m(prompt, cache=fast)
    worst = 0.0
    for rows in range(1, 34):
        toks = mx.random.randint(0, VOCAB, (rows,), key=mx.random.key(rows)).astype(mx.uint32)
        a = m(toks[None], cache=ref)[0]
        b = fwd.forward(toks, fast)
        assert b.shape == a.shape
        worst = max(worst, mx.abs(a - b).max().item())
    assert worst < 1e-4
    n = ref[0].offset
    assert fast[0].offset == n == 4 + sum(range(1, 34))
    for c_ref, c_fast in zip(ref, fast, strict=True):
        assert mx.allclose(c_ref.keys[..., :n, :], c_fast.keys[..., :n, :], atol=1e-5).item()
    assert len(BUCKETS) <= fwd.graphs <= 3 * len(BUCKETS)  # buckets x the buffer sizes seen
    trim_prompt_cache(fast, 40)  # a rewind is the offset moved back: no copy
    buffer = fast[0].keys
    for rows in (1, 5, 12, 20, 33):  # every bucket at the buffer's size now: traced once
        fwd.forward(mx.zeros((rows,), mx.uint32), fast)
        trim_prompt_cache(fast, rows)
    traced = fwd.graphs
    for rows in (1, 5, 12, 20, 33):  # replays: no new graph
        fwd.forward(mx.zeros((rows,), mx.uint32), fast)
        trim_prompt_cache(fast, rows)
    assert fwd.graphs == traced
    assert fast[0].keys.shape == buffer.shape  # no growth, no copy of the buffer


def test_buckets_pad_to_the_next_size_and_wider_forwards_run_eager():
    assert [bucket(r) for r in (1, 2, 8, 9, 16, 17, 32, 33, 64)] == [1, 8, 8, 16, 16, 32, 32, 64, 64]
    assert bucket(65) is None


def test_padded_rows_are_masked_out_of_the_real_rows():
    """The rows padded into a bucket change no real row's logits: three real rows after
    different padding tokens (the same graph) give the same logits."""
    m = _model(llama, 2, 0, qwen_shape=False, quantize=False)
    fwd = CompiledForward(m)
    outs = []
    for pad in (0, 7):
        cache = make_prompt_cache(m)
        m(mx.array([[3, 5, 7, 11]]), cache=cache)
        toks = mx.array([9, 4, 2] + [pad] * 5, dtype=mx.uint32)
        width = fwd.forward(toks, cache)  # 8 rows: the 8-row bucket, no padding of its own
        assert width.shape[0] == 8
        trim_prompt_cache(cache, 8)
        outs.append(fwd.forward(toks[:3], cache))  # 3 rows padded to 8 with zeros
    assert mx.array_equal(outs[0], outs[1]).item()
    trim_prompt_cache(cache, 3)
    last = fwd.forward(toks[:3], cache, last=2)  # the last rows alone: one slice
    assert mx.array_equal(last, outs[1][1:]).item()


def test_layouts_it_does_not_reproduce_say_why():
    """A rotating (sliding-window) cache is not reproduced: supports() says so in words."""
    from mlx_lm.models import gemma2

    args = gemma2.ModelArgs(model_type="gemma2", hidden_size=32, num_hidden_layers=2,
                            intermediate_size=64, num_attention_heads=2, head_dim=16,
                            rms_norm_eps=1e-6, vocab_size=VOCAB, num_key_value_heads=1)
    why = supports(gemma2.Model(args))
    assert why is not None and " " in why


def test_step_auto_runs_what_the_pair_s_curve_chose_and_a_sharded_target_runs_eager():
    """auto: compiled where the engine's curve chose it (core/dispatch/curve.py `run_step`),
    eager where it did not or without one; every run's summary says which ran."""
    from core.dispatch.curve import VerifyCostCurve

    target = _model(llama, 2, 0, qwen_shape=False, quantize=False)
    s = Settings(mode="target-only", temperature=0.0, max_tokens=6, ignore_eos=True,
                 traced=False, step="auto")
    engine = Engine(target, vocab_size=VOCAB)
    assert _run(engine, s).step == "eager"  # no calibration yet
    for chosen in ("compiled", "eager"):
        engine.set_cost_curve(VerifyCostCurve("cpu", "", 16, {"auto": {1: 1e-3},
                                                              "compiled": {1: 1e-3}}, step=chosen))
        summary = _run(engine, s)
        assert summary.step == chosen
    assert summary.graphs > 0  # the compiled run's graphs stay counted
    engine.spmd = object()  # a sharded target: its collectives are not traced
    engine._use_step(s.replace(step="compiled"))
    assert engine.step_report()["step"] == "eager"
