"""The dense verification (core/dispatch/patches.py "dense"): a dequantized copy's matmul.

Its law: the same logits as MLX's quantized kernels (the same weights, summed in another
order), every quantized layer routed and nothing else, chosen per row count only where a
calibration measured it cheaper, and measured only on a GPU whose memory holds the copy.
Hardware is faked only through BackendInfo; the models are tiny mlx-lm llamas.
"""

from __future__ import annotations

import dataclasses

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from core.dispatch import VerifyCostCurve, calibrate, fastest_dispatch, patches, verify_cost
from core.dispatch.backend import BackendInfo, backend_info
from core.dispatch.curve import auto_dispatch
from core.dispatch.curve_cache import calibration_modes, covers, curve_key
from core.dispatch.kernels import linear_modules
from core.dispatch.patches import (
    DENSE_SHARE,
    dense_bytes,
    dense_fits,
    resolve_dispatch,
    verification_patches,
)
from core.runtime.warmer import first_round_sizes, mode_of
from core.settings import Settings
from tests.helpers.tiny import dispatch_llama as tiny_llama

GB = 1 << 30
H200 = BackendInfo.cuda((9, 0), "NVIDIA H200")
M2 = BackendInfo.metal("applegpu_g14g", "Apple M2")
CPU = BackendInfo.cpu("AMD EPYC", "x86_64")


def _curve(auto: dict[int, float], dense: dict[int, float] | None = None) -> VerifyCostCurve:
    times = {"auto": auto} if dense is None else {"auto": auto, "dense": dense}
    return VerifyCostCurve("cuda", "NVIDIA H200", 16, times)


def _logits(model: nn.Module, toks: mx.array, dispatch: str) -> np.ndarray:
    cache = make_prompt_cache(model)
    model(mx.array([[3, 1, 4, 1, 5]]), cache=cache)
    with verification_patches(model, dispatch, "fused", toks.shape[1], backend=H200):
        out = model(toks, cache=cache)
    mx.eval(out)
    trim_prompt_cache(cache, toks.shape[1])
    return np.array(out.astype(mx.float32))


@pytest.mark.parametrize("tie", [False, True])
def test_dense_gives_the_quantized_logits(tie):
    model = tiny_llama(tie=tie, dtype=mx.float32, seed=3)
    toks = mx.array([[7, 2, 9, 4, 11, 6, 1, 8, 5]])
    quantized, dense = _logits(model, toks, "auto"), _logits(model, toks, "dense")
    np.testing.assert_allclose(dense, quantized, rtol=1e-4, atol=1e-4)
    assert (dense.argmax(-1) == quantized.argmax(-1)).all()


def test_dense_routes_every_quantized_layer_once_and_restores(monkeypatch):
    model = tiny_llama(tie=True, seed=1)
    seen: list[int] = []
    real = patches._dense_apply
    monkeypatch.setattr(patches, "_dense_apply",
                        lambda m, x, how: seen.append(id(m)) or real(m, x, how))
    with verification_patches(model, "dense", "fused", 4, backend=H200):
        mx.eval(model(mx.array([[1, 2, 3, 4]])))
    quantized = {id(m) for _, m, _, s in linear_modules(model) if s.quantized}
    assert sorted(seen) == sorted(quantized)  # each layer, the tied head included, once
    seen.clear()
    mx.eval(model(mx.array([[1, 2, 3, 4]])))  # outside: MLX's own kernels again
    assert seen == []
    assert nn.QuantizedLinear.__call__.__name__ == "__call__"


def test_dense_leaves_a_dense_model_and_single_rows_alone():
    model = tiny_llama(quantize=False)
    assert dense_bytes(model) == 0
    assert isinstance(verification_patches(model, "dense", "fused", 4, backend=M2),
                      type(patches._NULL))
    # On CUDA only the attention is patched (fused at bucketed shapes): no linear layer is
    on_cuda = verification_patches(model, "dense", "fused", 4, backend=H200)
    assert on_cuda.linear is None and on_cuda.bucketed and not on_cuda.plain
    quantized = tiny_llama()
    assert isinstance(verification_patches(quantized, "dense", "fused", 1, backend=H200),
                      type(patches._NULL))


def test_the_dense_copy_is_made_once_per_layer_and_freed_with_it():
    model = tiny_llama(seed=2)
    layer = model.model.layers[0].self_attn.q_proj
    w = patches._dense_weight(layer)
    assert patches._dense_weight(layer) is w
    assert w.shape == (layer.weight.shape[0], layer.weight.shape[1] * 32 // layer.bits)
    key = id(layer)
    del model, layer
    import gc

    gc.collect()
    assert key not in patches._dense


def test_dense_bytes_counts_two_bytes_a_quantized_weight():
    for tie in (False, True):
        model = tiny_llama(hidden=64, inter=128, layers=2, vocab=96, tie=tie)
        linears = [m for _, m in model.named_modules() if isinstance(m, nn.QuantizedLinear)]
        weights = sum(m.weight.shape[0] * m.weight.shape[1] * 32 // m.bits for m in linears)
        head = 96 * 64 if tie else 0  # a tied head multiplies by the embedding's weights
        assert dense_bytes(model) == 2 * (weights + head)


def test_dense_is_measured_only_on_a_gpu_that_holds_the_copy():
    model = tiny_llama()
    need = dense_bytes(model)
    big = dataclasses.replace(H200, memory_bytes=140 * GB)
    assert dense_fits(model, big)
    assert dense_fits(model, dataclasses.replace(M2, memory_bytes=11 * GB))
    assert not dense_fits(model, dataclasses.replace(CPU, memory_bytes=140 * GB))  # CPU: never
    assert not dense_fits(model, H200)  # memory unknown: not measured
    tight = dataclasses.replace(H200, memory_bytes=int(need / DENSE_SHARE) - 1)
    assert not dense_fits(model, tight)
    assert dense_fits(model, dataclasses.replace(H200, memory_bytes=int(need / DENSE_SHARE) + 1))
    assert not dense_fits(tiny_llama(quantize=False), big)


def test_backend_info_reads_the_memory_each_backend_reports():
    cuda = backend_info(lambda: ("cuda", {"compute_capability_major": 9, "total_memory": 150 * GB}))
    assert cuda.memory_bytes == 150 * GB and cuda.cuda_capability == (9, 0)
    metal = backend_info(lambda: ("metal", {"architecture": "applegpu_g14g", "memory_size": 16 * GB,
                                            "max_recommended_working_set_size": 11 * GB}),
                         environ={})
    assert metal.memory_bytes == 11 * GB and metal.metal_generation == 14
    assert backend_info(lambda: ("metal", {"architecture": "applegpu_g14g", "memory_size": 8 * GB}),
                        environ={}).memory_bytes == 8 * GB
    assert backend_info(lambda: ("cpu", {"memory_size": 8 * GB})).memory_bytes is None
    assert backend_info(lambda: ("cuda", {"total_memory": "?"})).memory_bytes is None


def test_auto_takes_the_dense_copy_exactly_where_it_measured_cheaper():
    curve = _curve({1: 5.0, 2: 6.0, 8: 12.0, 33: 14.0}, {1: 5.5, 2: 6.5, 8: 7.0, 33: 8.0})
    assert [auto_dispatch(curve, r) for r in (1, 2, 8, 20, 33)] == [
        "auto", "auto", "dense", "dense", "dense"]
    assert auto_dispatch(_curve({1: 5.0, 8: 12.0}), 8) == "auto"  # not measured: MLX's own
    assert auto_dispatch(None, 8) == "auto"
    price = verify_cost(curve, "auto")
    assert price(2) == 6.0 and price(33) == 8.0  # the policy prices what will run
    assert verify_cost(curve, "dense")(2) == 6.5  # forced: its own measurement
    assert resolve_dispatch("auto", 33, curve) == "dense"
    assert resolve_dispatch("gemv", 33, curve) == "gemv"


def test_fastest_takes_the_cheapest_of_every_measured_family():
    curve = _curve({4: 10.0, 16: 12.0}, {4: 9.0, 16: 11.0})
    curve.times["gemm"] = {4: 8.0, 16: 12.5}
    assert fastest_dispatch(curve, 4) == "gemm"
    assert fastest_dispatch(curve, 16) == "dense"
    assert verify_cost(curve, "fastest")(16) == 11.0


def test_calibration_modes_and_the_kept_curve_key_name_the_dense_copy():
    s = Settings()
    assert calibration_modes(s) == ("auto",)
    assert calibration_modes(s, dense=True) == ("auto", "dense")
    assert calibration_modes(dataclasses.replace(s, dispatch="fastest"), True) == (
        "auto",
        "gemm",
        "dense",
    )
    assert calibration_modes(dataclasses.replace(s, dispatch="gemv"), True) == ("auto",)
    assert calibration_modes(dataclasses.replace(s, dispatch="dense")) == ("auto", "dense")
    ident = {"target": {"sha256": "ab" * 32, "kind": "file"}}
    with_dense = curve_key(ident, H200, "0.32.4", s, dense=True)
    without = curve_key(ident, H200, "0.32.4", s)
    assert with_dense["modes"] == ["auto", "dense"] and without["modes"] == ["auto"]
    rows = {r: 1.0 for r in range(1, 10)}
    old = _curve(rows)  # kept before the dense copy was measured: not enough for the new key
    assert covers(old, s) and not covers(old, s, with_dense["modes"])
    assert covers(_curve(rows, rows), s, with_dense["modes"])


def test_calibrate_measures_the_dense_mode_beside_mlx_own():
    model = tiny_llama()
    curve = calibrate(model, rows=[1, 2, 4], repeats=1, context=8, modes=("auto", "dense"))
    assert set(curve.times) == {"auto", "dense"}
    assert sorted(curve.times["dense"]) == [1, 2, 4]
    assert all(t > 0 for t in curve.times["dense"].values())


def test_the_warm_up_runs_the_dense_copy_where_the_run_will():
    curve = _curve(
        {r: 10.0 for r in range(1, 34)}, {r: (11.0 if r < 4 else 5.0) for r in range(1, 34)}
    )
    s = Settings(mode="speculative", policy="fixed", k=6)
    assert mode_of(s, 1, curve) == "auto"  # a single row is never patched
    assert mode_of(s, 3, curve) == "auto" and mode_of(s, 4, curve) == "dense"
    assert mode_of(s, 4, None) == "auto"
    sizes = [w for w in first_round_sizes(s, 32, curve=curve) if w.kind == "verify"]
    assert {(w.rows, w.mode) for w in sizes} >= {(3, "auto"), (4, "dense"), (7, "dense")}


def test_a_speculative_run_on_the_dense_copy_commits_target_only_tokens_and_says_so(
    monkeypatch,
):
    """Greedy, lookup drafts: with a curve where the dense copy is cheaper from 2 rows, "auto"
    verifies through it, every multi-row round names it, and the tokens are target-only's."""
    from core.decode.engine import Engine
    from core.dispatch.patches import DENSE_KERNEL
    from tests.helpers.engine import run

    model = tiny_llama(vocab=96, seed=5)
    prompt = [5, 9, 2, 7, 3, 5, 9, 2, 7, 3, 5, 9, 2]
    s = Settings(rule="greedy", temperature=0.0, max_tokens=24, ignore_eos=True, traced=False,
                 mode="speculative", draft_source="lookup", policy="fixed", k=4)
    plain = run(Engine(model, None, vocab_size=96), prompt, s.replace(mode="target-only"))[1]
    calls: list[int] = []
    real = patches._dense_apply
    monkeypatch.setattr(patches, "_dense_apply",
                        lambda m, x, how: calls.append(x.shape[-2]) or real(m, x, how))
    engine = Engine(model, None, vocab_size=96)
    engine.set_cost_curve(_curve({r: 10.0 for r in range(1, 34)}, {r: 5.0 for r in range(1, 34)}))
    events, summary = run(engine, prompt, s)
    assert summary.token_ids == plain.token_ids
    multi = [e for e in events if e.rows > 1]
    assert multi and all(e.kernel == DENSE_KERNEL for e in multi)
    assert all(e.kernel != DENSE_KERNEL for e in events if e.rows <= 1)
    assert calls and min(calls) > 1  # the verification ran the copy; single rows never did


def test_cuda_auto_takes_the_fused_attention_where_measured_cheaper_and_prices_both_savings():
    """On CUDA "auto" verifies with the plain attention; a curve that measured "fused" beside
    it switches per R, and the price adds the dense copy's and the fused attention's savings."""
    from core.dispatch.curve import fused_cheaper
    from core.dispatch.curve_cache import target_fused
    from core.dispatch.patches import resolve_verify_attention

    curve = _curve({2: 10.0, 8: 20.0}, {2: 11.0, 8: 14.0})
    curve.times["fused"] = {2: 9.0, 8: 25.0}
    assert fused_cheaper(curve, 2) and not fused_cheaper(curve, 8)
    assert resolve_verify_attention("auto", 2, H200, curve) == "fused"
    assert resolve_verify_attention("auto", 8, H200, curve) == "plain"
    assert resolve_verify_attention("plain", 2, H200, curve) == "plain"  # forced stays
    price = verify_cost(curve, "auto")
    assert price(2) == 9.0  # fused saves 1, dense saves nothing
    assert price(8) == 14.0  # dense saves 6, fused nothing
    metal = dataclasses.replace(curve, backend="metal")
    assert not fused_cheaper(metal, 2)  # elsewhere "auto" is already the fused one
    assert target_fused(H200) and not target_fused(M2) and not target_fused(CPU)
    s = Settings()
    assert calibration_modes(s, dense=True, fused=True) == ("auto", "dense", "fused")
    assert calibration_modes(s.replace(verify_attention="plain"), fused=True) == ("auto",)


def test_a_calibration_interleaves_its_modes_call_by_call(monkeypatch):
    """Each R is timed in every mode before the next R: the modes meet the same KV lengths
    and the same stretch of the host's time (one after another, the H200 timed the same
    unpatched forward 1.6x dearer in the last mode than in the first). Each timed pass starts
    one mode later, so no mode is always the first call after a new R."""
    seen: list[tuple[str, int]] = []
    real = patches.verification_patches

    def spy(model, dispatch="auto", attention="auto", rows=2, **kw):
        seen.append((dispatch, rows))
        return real(model, dispatch, attention, rows, **kw)

    import sys

    monkeypatch.setattr(sys.modules["core.dispatch.calibrate"], "verification_patches", spy)
    calibrate(tiny_llama(), rows=[1, 3], repeats=2, context=8, modes=("auto", "dense"), warmup=0)
    assert seen == [("auto", 1), ("dense", 1), ("auto", 3), ("dense", 3),
                    ("dense", 1), ("auto", 1), ("dense", 3), ("auto", 3)]


def test_one_row_is_priced_as_the_least_of_its_modes_and_no_verification_below_it():
    """One row is the same forward in every mode (no patch applies to it): its price is the
    least of their timings, under every dispatch setting. Two savings read off a noisy
    "auto" no longer add up to more than all of it: run 8's pasted refactor had a plain step
    priced at 0.12 ms (auto 10.4, dense 5.6, fused 4.9 at one row), so no round could pay."""
    curve = _curve({1: 10.36, 2: 16.73, 8: 13.63}, {1: 5.60, 2: 21.26, 8: 7.0})
    curve.times["fused"] = {1: 4.87, 2: 74.43, 8: 6.5}
    for dispatch in ("auto", "fastest", "dense", "gemv"):
        assert verify_cost(curve, dispatch)(1) == 4.87
    price = verify_cost(curve, "auto")
    assert price(2) == 16.73  # neither saves at 2 rows
    # at 8 rows dense saves 6.63 and fused 7.13, more than all of auto's 13.63 together
    assert price(8) == 4.87
    assert [price(r) >= price(1) for r in range(1, 34)] == [True] * 33


def test_a_copy_that_lost_everywhere_is_released_after_the_calibration(monkeypatch):
    """The dense copies are dropped when the calibration found them dearer at every R (a 7B
    target's copy is 14 GB), and kept when they won somewhere."""
    from core.dispatch.patches import dense_lost, release_dense

    assert dense_lost({"auto": {1: 1.0, 2: 2.0, 8: 3.0}, "dense": {1: 0.5, 2: 2.5, 8: 3.0}})
    assert not dense_lost({"auto": {2: 2.0, 8: 3.0}, "dense": {2: 2.5, 8: 2.9}})
    assert not dense_lost({"auto": {2: 2.0}})  # not measured: nothing to release
    model = tiny_llama(seed=4)
    with verification_patches(model, "dense", "fused", 3, backend=H200):
        mx.eval(model(mx.array([[1, 2, 3]])))
    layers = {id(m) for _, m, _, s in linear_modules(model) if s.quantized}
    assert layers <= set(patches._dense)
    assert release_dense(model) == len(layers) and not layers & set(patches._dense)
    import sys

    cal = sys.modules["core.dispatch.calibrate"]
    monkeypatch.setattr(cal, "dense_lost", lambda times: True)
    calibrate(model, rows=[1, 2], repeats=1, context=8, modes=("auto", "dense"))
    assert not layers & set(patches._dense)
    monkeypatch.setattr(cal, "dense_lost", lambda times: False)
    calibrate(model, rows=[1, 2], repeats=1, context=8, modes=("auto", "dense"))
    assert layers <= set(patches._dense)


def test_a_fixed_k_run_on_cuda_calibrates_first_so_auto_can_choose(monkeypatch):
    """On CUDA "auto" chooses its attention (and the dense copy) by a curve, so even a
    fixed-k run wants one until it has it; elsewhere only the cost-aware policy and
    dispatch=fastest do."""
    import core.dispatch.backend as backend_module
    from core.dispatch.curve_cache import curve_wanted

    fixed = Settings(mode="speculative", policy="fixed", k=4)
    monkeypatch.setattr(backend_module, "current_backend", lambda: H200)
    assert curve_wanted(None, fixed)
    assert not curve_wanted(_curve({1: 1.0}), fixed)  # has one: measured once
    assert not curve_wanted(None, fixed.replace(verify_attention="plain"))  # forced: no choice
    monkeypatch.setattr(backend_module, "current_backend", lambda: CPU)
    assert not curve_wanted(None, fixed)
    assert curve_wanted(None, fixed.replace(policy="cost-aware"))
    # a forced dense copy runs without a curve; priced by one, it needs "dense" measured
    assert not curve_wanted(None, fixed.replace(dispatch="dense"))
    assert curve_wanted(_curve({1: 1.0}), fixed.replace(policy="cost-aware", dispatch="dense"))
