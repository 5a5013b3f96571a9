"""The fused verification attention at bucketed shapes (core/dispatch/bucketed.py): the same
attention as MLX's own causal call, over the KV cache's whole buffer with its stale tail
masked, whatever the rows, offset and buffer; and, through a real forward under the CUDA
rules (a fake of the hardware query only), the same logits, with the shapes MLX sees
repeating from one verification to the next. The maths runs here on the CPU."""

from __future__ import annotations

from types import SimpleNamespace

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

import core.dispatch.bucketed as bucketed
import core.dispatch.patches as patches
from core.dispatch import BackendInfo, verification_patches
from core.dispatch.bucketed import ROW_BUCKETS, bucketed_attention, row_bucket
from tests.helpers.tiny import dispatch_llama

H200 = BackendInfo.cuda((9, 0), "NVIDIA H200")
CPU = BackendInfo.cpu("AMD EPYC", "x86_64")


def test_row_buckets() -> None:
    assert [row_bucket(r) for r in (2, 16, 17, 33, 64, 65)] == [16, 16, 64, 64, 64, 65]
    assert tuple(sorted(ROW_BUCKETS)) == ROW_BUCKETS


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(2, 40),
    before=st.integers(0, 300),  # cache positions before the verified rows
    spare=st.integers(0, 300),  # buffer positions past the offset (stale)
    gqa=st.sampled_from([(4, 2), (3, 1), (2, 2)]),
    seed=st.integers(0, 1000),
)
def test_the_bucketed_call_is_the_causal_attention_over_the_cache(rows, before, spare, gqa, seed):
    hq, hkv = gqa
    d = 16
    rng = np.random.default_rng(seed)
    offset = before + rows
    buf = rng.standard_normal((2, 1, hkv, offset + spare, d)).astype(np.float32)
    buf[:, :, :, offset:] = rng.standard_normal(buf[:, :, :, offset:].shape) * 50  # stale rows
    k_buf, v_buf = mx.array(buf[0]), mx.array(buf[1])
    q = mx.array(rng.standard_normal((1, hq, rows, d)).astype(np.float32))
    cache = SimpleNamespace(keys=k_buf, values=v_buf, offset=offset)
    keys, values = k_buf[:, :, :offset], v_buf[:, :, :offset]
    ref = mx.fast.scaled_dot_product_attention(q, keys, values, scale=d**-0.5, mask="causal")
    got = bucketed_attention(q, keys, values, cache, d**-0.5, "causal")
    assert got is not None and got.shape == ref.shape
    np.testing.assert_allclose(np.array(got), np.array(ref), rtol=2e-5, atol=2e-5)


@settings(max_examples=30, deadline=None)
@given(rows=st.integers(2, 40), before=st.integers(1, 300), spare=st.integers(0, 300),
       seed=st.integers(0, 1000))
def test_a_tree_mask_is_kept_at_bucketed_shapes(rows, before, spare, seed):
    """A token tree's bool mask over the cache: the same attention as MLX's own call with it,
    and none of its padding leaks into the real rows."""
    d, rng = 16, np.random.default_rng(seed)
    offset = before + rows
    buf = rng.standard_normal((2, 1, 2, offset + spare, d)).astype(np.float32)
    k_buf, v_buf = mx.array(buf[0]), mx.array(buf[1])
    q = mx.array(rng.standard_normal((1, 4, rows, d)).astype(np.float32))
    seen = rng.random((rows, offset)) < 0.6
    seen[:, 0] = True  # every row sees the context's first token, as every tree row does
    mask = mx.array(seen)
    keys, values = k_buf[:, :, :offset], v_buf[:, :, :offset]
    ref = mx.fast.scaled_dot_product_attention(q, keys, values, scale=d**-0.5, mask=mask)
    cache = SimpleNamespace(keys=k_buf, values=v_buf, offset=offset)
    got = bucketed_attention(q, keys, values, cache, d**-0.5, mask)
    assert got is not None and got.shape == ref.shape
    np.testing.assert_allclose(np.array(got), np.array(ref), rtol=2e-5, atol=2e-5)


def test_every_row_count_of_a_bucket_hands_mlx_the_same_layout(monkeypatch) -> None:
    """A cuDNN plan's key holds q's strides: a bucket's full row count (no padding) must reach
    MLX row-major like the padded ones, not as mlx-lm's transposed view."""
    seen = []
    real = mx.fast.scaled_dot_product_attention

    def spy(q, k, v, *, scale, mask=None, **kw):
        mx.eval(q)
        seen.append((q.shape, memoryview(q).strides))  # the layout MLX reads
        return real(q, k, v, scale=scale, mask=mask, **kw)

    monkeypatch.setattr(bucketed.mx.fast, "scaled_dot_product_attention", spy)
    buf = mx.zeros((1, 2, 256, 8))
    cache = SimpleNamespace(keys=buf, values=buf, offset=40)
    for rows in (15, 16):
        q = mx.zeros((1, rows, 4, 8)).transpose(0, 2, 1, 3)  # mlx-lm's layout
        bucketed_attention(q, buf[:, :, :40], buf[:, :, :40], cache, 1.0, "causal")
    assert seen[0] == seen[1] == ((1, 4, 16, 8), (2048, 512, 32, 4))


def test_a_new_plan_is_told_once_per_shape() -> None:
    """`took_new_plan` is true after the first call at a (row bucket, buffer length) the
    process had not asked for, false after a repeat (another row count of the same bucket,
    the cache's offset moved), true again when the buffer grows or the bucket changes, and
    false once read: the engine asks it after each round (core/decode/speculative.py)."""
    bucketed.took_new_plan()
    head, d = 2, 8
    buf = mx.zeros((1, head, 256 + 7, d))  # a length no other test uses: new to the process

    def call(rows: int, offset: int, length: int) -> bool:
        b = buf[:, :, :length]
        cache = SimpleNamespace(offset=offset, keys=b, values=b)
        bucketed_attention(mx.ones((1, head, rows, d)), b[:, :, :offset],
                           b[:, :, :offset], cache, d**-0.5, "causal")
        return bucketed.took_new_plan()

    assert call(3, 40, 256 + 7)
    assert not bucketed.took_new_plan()  # read: forgotten
    assert not call(5, 41, 256 + 7)  # the same bucket and buffer
    assert call(20, 60, 256 + 7)  # the next bucket
    assert call(3, 70, 256 + 6)  # another buffer length
    assert not call(1, 70, 256 + 6)  # one row: MLX's own call, no plan of ours
    assert not call(3, 70, 256 + 6)


def test_it_declines_what_it_does_not_cover() -> None:
    q = mx.zeros((1, 2, 3, 8))
    k = mx.zeros((1, 2, 10, 8))
    cache = SimpleNamespace(keys=mx.zeros((1, 2, 16, 8)), values=mx.zeros((1, 2, 16, 8)), offset=10)
    assert bucketed_attention(q[:, :, :1], k, k, cache, 1.0, None) is None  # one row
    assert bucketed_attention(q, k, k, cache, 1.0, mx.zeros((3, 10))) is None  # additive
    assert bucketed_attention(q, k, k, cache, 1.0, mx.zeros((3, 9), mx.bool_)) is None  # shape
    assert bucketed_attention(q, k, k, SimpleNamespace(bits=4, offset=10), 1.0, "causal") is None
    assert bucketed_attention(q, k, k, None, 1.0, "causal") is None  # no cache
    assert bucketed_attention(q, k[:, :, :9], k[:, :, :9], cache, 1.0, "causal") is None


@pytest.mark.parametrize("context", [40, 250])  # 250: the verification crosses the 256 step
def test_a_forward_under_the_cuda_rules_keeps_the_logits_at_repeating_shapes(context, monkeypatch):
    """The tiny llama's verification forward with verify_attention "fused" on (a fake) CUDA:
    MLX's fused call sees the cache's buffer and the row bucket, so consecutive verifications
    at growing offsets ask the same shapes; the logits match the unpatched forward."""
    model = dispatch_llama()
    cache = make_prompt_cache(model)
    rng = np.random.default_rng(0)
    mx.eval(model(mx.array(rng.integers(0, 96, (1, context))), cache=cache))
    seen: list[tuple] = []
    real = mx.fast.scaled_dot_product_attention

    def spy(q, k, v, *, scale, mask=None, **kw):
        seen.append((q.shape, k.shape, None if mask is None or isinstance(mask, str) else mask.shape))
        return real(q, k, v, scale=scale, mask=mask, **kw)

    monkeypatch.setattr(bucketed.mx.fast, "scaled_dot_product_attention", spy)
    shapes = set()
    for rows in (3, 5, 3, 9):
        toks = mx.array(rng.integers(0, 96, (1, rows)))
        ref = model(toks, cache=cache)
        mx.eval(ref)
        trim_prompt_cache(cache, rows)
        seen.clear()
        with verification_patches(model, "auto", "fused", rows, backend=H200):
            got = model(toks, cache=cache)
        mx.eval(got)
        trim_prompt_cache(cache, rows - 1)  # the KV length advances by one, as in a loop
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-4, atol=1e-4)
        assert len(seen) == len(model.layers)
        shapes |= set(seen)
        assert all(q[2] == 16 for q, _, _ in seen)  # the rows' bucket
    if context == 40:  # one buffer throughout: one shape for every verification
        assert len(shapes) == 1


def test_off_cuda_fused_stays_mlx_s_own_call(monkeypatch) -> None:
    """On Metal and the CPU a verification's fused attention is MLX's own call (no plan per
    shape to reuse there): nothing is padded."""
    model = dispatch_llama()
    cache = make_prompt_cache(model)
    mx.eval(model(mx.array(np.arange(20)[None] % 96), cache=cache))
    called = []
    monkeypatch.setattr(patches, "bucketed_attention", lambda *a: called.append(1))
    with verification_patches(model, "auto", "fused", 4, backend=CPU):
        mx.eval(model(mx.array([[1, 2, 3, 4]]), cache=cache))
    assert not called
    with verification_patches(model, "auto", "fused", 4, backend=H200):  # the spy is live
        mx.eval(model(mx.array([[1, 2, 3, 4]]), cache=cache))
    assert len(called) == len(model.layers)
