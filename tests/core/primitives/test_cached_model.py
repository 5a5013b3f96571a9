"""A draft's multi-row forwards outside a verification take the backend's default attention.

Why: on the H200 the traced model rounds of 2026-12-01 spent 10-89 ms drafting 2 tokens
(docs/benchmarks/never-slower.md), and MLX CUDA's fused multi-row attention is set up anew
(~50 ms) at each new KV length (docs/dispatch.md). A draft's catch-up and its multi-token
first step are at a new length every round, so on CUDA they run the plain attention the
target's verification already uses; on Metal and the CPU nothing changes. The backend is a
fake of the hardware query; the maths runs for real and the logits are compared.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from core.dispatch import patches
from core.dispatch.backend import BackendInfo
from core.primitives.cached_model import CachedModel
from tests.helpers.tiny import tiny_llama

H200 = BackendInfo.cuda((9, 0), "NVIDIA H200")
CPU = BackendInfo.cpu("AMD EPYC", "x86_64")
PROMPT = [5, 9, 17, 3, 44, 12, 7, 30, 2, 41, 8]


@pytest.fixture
def plain_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The query rows of every plain-attention call."""
    calls: list[int] = []
    real = patches.plain_attention

    def counting(q, *a, **k):  # noqa: ANN001, ANN002, ANN003
        calls.append(q.shape[-2])
        return real(q, *a, **k)

    monkeypatch.setattr(patches, "plain_attention", counting)
    return calls


def _model_on(backend: BackendInfo, monkeypatch: pytest.MonkeyPatch) -> CachedModel:
    monkeypatch.setattr(patches, "current_backend", lambda: backend)
    model = tiny_llama(2, 3)
    state = CachedModel.fresh(model, patches.draft_attention(model))  # as the engine builds it
    state.prefill(PROMPT)
    return state


def _reference_logits(tokens: list[int]) -> np.ndarray:
    state = CachedModel.fresh(tiny_llama(2, 3))
    state.prefill(PROMPT)
    out = state.decode(mx.array(tokens, dtype=mx.uint32), 48, compiled=False)
    return np.array(out)


@pytest.mark.parametrize("backend, plain", [(H200, True), (CPU, False)])
def test_a_multi_token_step_takes_the_backends_attention(
    backend: BackendInfo, plain: bool, plain_rows: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _reference_logits([4, 21, 33])  # unpatched: this process's real backend is the CPU
    plain_rows.clear()
    state = _model_on(backend, monkeypatch)
    got = state.decode(mx.array([4, 21, 33], dtype=mx.uint32), 48, compiled=False)
    layers = len(state.model.layers)
    assert plain_rows == ([3] * layers if plain else [])
    np.testing.assert_allclose(np.array(got), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend, plain", [(H200, True), (CPU, False)])
def test_a_lazy_catch_up_takes_the_backends_attention(
    backend: BackendInfo, plain: bool, plain_rows: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _model_on(backend, monkeypatch)
    lag = [13, 14, 15, 16, 17]
    fed = state.catch_up(PROMPT + lag + [40], chunk=512)
    assert fed == len(lag) and state.seq == PROMPT + lag
    layers = len(state.model.layers)
    assert plain_rows == ([len(lag)] * layers if plain else [])
    # the cache it built is the one a plain prefill builds: the next step's logits agree
    after = state.decode(mx.array([40], dtype=mx.uint32), 48, compiled=False)
    ref_state = CachedModel.fresh(tiny_llama(2, 3))
    ref_state.prefill(PROMPT + lag)
    ref = ref_state.decode(mx.array([40], dtype=mx.uint32), 48, compiled=False)
    np.testing.assert_allclose(np.array(after), np.array(ref), rtol=1e-4, atol=1e-4)


def test_a_cache_without_the_rule_keeps_the_models_attention(
    plain_rows: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(patches, "current_backend", lambda: H200)
    state = CachedModel.fresh(tiny_llama(2, 3))  # the target's: its verification chooses
    state.prefill(PROMPT)
    state.decode(mx.array([4, 21, 33], dtype=mx.uint32), 48, compiled=False)
    assert plain_rows == []


def test_the_engine_gives_its_draft_the_rule() -> None:
    from core.decode.engine import Engine

    engine = Engine(tiny_llama(2, 3), tiny_llama(1, 4), vocab_size=48, eos_ids=())
    assert engine._draft is not None and engine._draft.multi_row is not None
    assert engine._target.multi_row is None
    engine.reset()
    assert engine._draft.multi_row is not None


def test_a_single_row_keeps_the_fused_kernel(
    plain_rows: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    state = _model_on(H200, monkeypatch)
    state.decode(mx.array([4], dtype=mx.uint32), 48, compiled=False)
    assert plain_rows == []


class _SlowModel:
    """A forward that takes `per_token_s` a token, as a busy CPU's does; the chunks it saw."""

    def __init__(self, per_token_s: float) -> None:
        self.per_token_s, self.chunks = per_token_s, []

    def __call__(self, ids: mx.array, cache: list) -> None:  # noqa: ANN001
        import time

        self.chunks.append(int(ids.shape[1]))
        time.sleep(self.per_token_s * int(ids.shape[1]))


class _Cache:
    state = mx.zeros((1,))


def test_a_paced_prefill_stops_within_about_its_time_after_a_cancel() -> None:
    """A 512-token chunk took ~30 s on a busy CPU, and Esc waited for it: a PacedCancel sizes
    the chunks by the time the first took, so a cancel is honoured within about `within_s`."""
    import threading
    import time

    from core.primitives.cached_model import PacedCancel, prefill

    model, cancel = _SlowModel(0.004), PacedCancel(within_s=0.2)
    threading.Timer(0.6, cancel.set).start()
    began = time.monotonic()
    fed = prefill(model, [_Cache()], list(range(1000)), chunk=512, cancel=cancel)
    stopped = time.monotonic() - began
    assert 0 < fed < 1000 and fed == sum(model.chunks)
    assert model.chunks[0] == 16 and max(model.chunks) * 0.004 < 0.2 * 2, model.chunks
    assert stopped < 0.6 + 0.4, (stopped, model.chunks)
    # without pacing the chunk is the settings' own (a GPU keeps its 512 rows)
    plain = _SlowModel(0.0)
    assert prefill(plain, [_Cache()], list(range(1000)), chunk=512,
                   cancel=threading.Event()) == 1000 and plain.chunks == [512, 488]
    fast = _SlowModel(0.0)  # a fast backend grows back to the full chunk
    prefill(fast, [_Cache()], list(range(3000)), chunk=512, cancel=PacedCancel(1.0))
    assert fast.chunks[:4] == [16, 64, 256, 512], fast.chunks
