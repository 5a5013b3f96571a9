"""core.dispatch: kernel prediction against MLX's rules, the cost curve, the verification
patches (same logits, exact restore) and calibration on the CPU backend.

Hardware is faked only through BackendInfo (the rules and the maths stay real); models are
tiny mlx-lm llamas built here so every test runs in well under a second.
"""

from __future__ import annotations

import importlib
import json
import types
from collections import Counter
from collections.abc import Callable

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_lm.models import base, llama
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

import core.dispatch as dp
from core.dispatch import (
    BackendInfo,
    CalibrationError,
    KernelPredictor,
    LinearShape,
    VerifyCostCurve,
    backend_info,
    calibrate,
    fastest_dispatch,
    kernels,
    linear_shapes,
    patches,
    plain_attention,
    predict_kernel,
    verification_patches,
    verify_cost,
)
from core.settings import SettingsError
from tests.helpers.tiny import dispatch_llama as tiny_llama

M2 = BackendInfo.metal("applegpu_g14g", "Apple M2")
M3_MAX = BackendInfo.metal("applegpu_g15s", "Apple M3 Max")
M5_MAX = BackendInfo.metal("applegpu_g17s", "Apple M5 Max", os_version="26.2")
H200 = BackendInfo.cuda((9, 0), "NVIDIA H200")
CPU = BackendInfo.cpu("AMD EPYC", "x86_64")


def q4(role: str, k: int, n: int, count: int = 1, dtype: str = "bfloat16") -> LinearShape:
    return LinearShape(role, k, n, 4, 64, True, dtype, count=count)


# Qwen2.5-7B: hidden 3584, 28 heads / 4 KV heads of 128, MLP 18944, vocab 152064, 28 layers.
QWEN7B = [
    q4("attention", 3584, 3584, 56),  # q_proj, o_proj
    q4("attention", 3584, 512, 56),  # k_proj, v_proj
    q4("mlp", 3584, 18944, 56),  # gate_proj, up_proj
    q4("mlp", 18944, 3584, 28),  # down_proj
    q4("lm_head", 3584, 152064, 1),
]


# --- prediction ----------------------------------------------------------------------------------


def test_cuda_sm90_4bit_group64_switches_to_qmm_sm80_at_8_rows():
    shape = q4("attention", 3584, 3584)
    kernels = {r: predict_kernel(shape, r, H200) for r in range(1, 17)}
    assert all(kernels[r] == "qmv" for r in range(1, 8))
    assert all(kernels[r] == "qmm_sm80" for r in range(8, 17))
    assert KernelPredictor([shape], H200).boundary() == {"attention": 8}


def test_cuda_paths_the_sm80_kernel_refuses():
    # qmm_sm80 needs fp16/bf16 activations and N % 128 == 0; otherwise qmm_naive from 8 rows.
    assert predict_kernel(q4("mlp", 3584, 3584, dtype="float32"), 8, H200) == "qmm_naive"
    assert predict_kernel(q4("mlp", 3584, 3584 + 64), 8, H200) == "qmm_naive"
    assert predict_kernel(q4("mlp", 3584, 3584 + 64), 7, H200) == "qmv"
    # the sm90 kernel needs group_size >= K: then it is qmv only for a single row.
    assert predict_kernel(q4("mlp", 64, 256), 1, H200) == "qmv"
    assert predict_kernel(q4("mlp", 64, 256), 2, H200) == "qmm_sm90"
    # dense: gemv only for one row without a bias, cuBLASLt otherwise
    dense = LinearShape("mlp", 896, 4864, dtype="bfloat16")
    assert predict_kernel(dense, 1, H200) == "gemv"
    assert predict_kernel(dense, 2, H200) == "cublasLt"
    assert predict_kernel(LinearShape("attention", 896, 896, bias=True), 1, H200) == "cublasLt"


def test_m2_qwen7b_attention_switches_at_10_rows_mlp_at_6():
    p = KernelPredictor(QWEN7B, M2)
    assert p.boundary() == {"attention": 10, "mlp": 6, "lm_head": 6}
    attn, kv = QWEN7B[0], QWEN7B[1]
    for r in range(1, 10):
        assert predict_kernel(attn, r, M2) == "qmv_fast"  # M1/M2 never take qmv_wide
        assert predict_kernel(kv, r, M2) == "qmv_fast"
    # split-K: 512 // (ceil(N/32) * ceil(M/32)) = 4 for N = 3584; 28 (K/64 = 56's divisor) for N = 512
    assert predict_kernel(attn, 10, M2) == "qmm_t_splitk"
    assert kernels.metal_split_k(10, 3584, 3584, 64) == 4
    assert kernels.metal_split_k(10, 512, 3584, 64) == 28
    gate_up, down = QWEN7B[2], QWEN7B[3]
    assert predict_kernel(gate_up, 5, M2) == "qmv_fast"
    assert predict_kernel(gate_up, 6, M2) == "qmm_t"  # 592 column tiles: no split
    assert predict_kernel(down, 6, M2) == "qmm_t_splitk"
    assert p.family(5) == "qmv_fast"
    assert p.family(6) == "attn:qmv_fast mlp:qmm_t"
    assert p.family(10) == "attn:qmm_t_splitk mlp:qmm_t"
    # the MLP and the head hold most of the weights, so the whole forward switches at 6
    assert p.forward_boundary() == 6


def test_m3_max_runs_qmv_wide_from_two_rows_up_to_its_limit():
    for shape in QWEN7B:
        assert predict_kernel(shape, 1, M3_MAX) == "qmv_fast"
        limit = kernels.qmv_batch_limit(shape.k, shape.n, M3_MAX)
        assert limit in (13, 15)
        for r in range(2, limit):
            assert predict_kernel(shape, r, M3_MAX) == "qmv_wide"
        assert dp.is_matrix_kernel(predict_kernel(shape, limit, M3_MAX))
    assert KernelPredictor(QWEN7B, M3_MAX).family(2) == "qmv_wide"


def test_cpu_has_one_per_row_kernel_and_no_boundary():
    dense = LinearShape("mlp", 64, 128, dtype="float32")
    for r in range(1, 33):
        assert predict_kernel(QWEN7B[0], r, CPU) == "cpu_qmm_t"
        assert predict_kernel(dense, r, CPU) == "cpu_gemm"
    p = KernelPredictor([*QWEN7B, dense], CPU)
    assert set(p.boundary().values()) == {None}
    assert p.forward_boundary() is None
    assert p.family(9) == "cpu_qmm_t"


@pytest.mark.parametrize(
    ("arch", "limits"),
    [
        ("applegpu_g13g", (14, 10, 6)),  # M1
        ("applegpu_g14s", (14, 10, 6)),  # M2 Pro/Max
        ("applegpu_g14d", (32, 18, 12)),  # M2 Ultra
        ("applegpu_g15g", (13, 15, 13)),  # M3
        ("applegpu_g16s", (13, 15, 13)),  # M4 Pro/Max
        ("applegpu_g17g", (33, 25, 13)),  # M5
        ("applegpu_g17d", (32, 18, 12)),  # an Ultra of any generation
        ("applegpu_g12g", (18, 12, 10)),  # older
    ],
)
def test_metal_qmv_batch_limit_table(arch: str, limits: tuple[int, int, int]):
    b = BackendInfo.metal(arch)
    got = tuple(
        kernels.qmv_batch_limit(k, n, b) for k, n in ((2048, 2048), (4096, 1024), (4096, 4097))
    )
    assert got == limits


def test_metal_vector_and_matrix_variants():
    # K = 64 or 128: qmv_quad whatever the chip; K not a multiple of 512 (4-bit): plain qmv
    assert predict_kernel(q4("attention", 128, 512), 3, M3_MAX) == "qmv_quad"
    assert predict_kernel(q4("attention", 2880, 2880), 1, M2) == "qmv"
    assert kernels.qmv_fast_k_alignment(4) == 512 and kernels.qmv_fast_k_alignment(8) == 256
    assert kernels.qmv_fast_k_alignment(2) == 512 and kernels.qmv_fast_k_alignment(1) == 1024
    # NAX needs gen >= 17, macOS >= 26.2 and half-precision activations
    gate_up = QWEN7B[2]
    assert M5_MAX.nax_available
    assert predict_kernel(gate_up, 13, M5_MAX) == "qmm_t_nax"
    old_os = BackendInfo.metal("applegpu_g17s", os_version="26.1")
    assert not old_os.nax_available
    assert predict_kernel(gate_up, 13, old_os) == "qmm_t"
    assert predict_kernel(q4("mlp", 3584, 18944, dtype="float32"), 13, M5_MAX) == "qmm_t"
    # dense: gemv_wide for 2..15 half-precision rows on M3+, steel GEMM after; M2 has no gemv_wide
    dense16 = LinearShape("mlp", 896, 4864, dtype="float16")
    assert predict_kernel(dense16, 1, M3_MAX) == "gemv"
    assert all(predict_kernel(dense16, r, M3_MAX) == "gemv_wide" for r in range(2, 16))
    assert predict_kernel(dense16, 16, M3_MAX).startswith("steel_gemm")
    assert predict_kernel(dense16, 2, M2).startswith("steel_gemm")


def test_backend_info_reads_the_injected_device_and_the_arch_override():
    def metal():
        return "metal", {"architecture": "applegpu_g14g", "device_name": "Apple M2"}

    b = backend_info(metal, environ={})
    assert (b.backend, b.metal_generation, b.metal_size) == ("metal", 14, "g")
    assert b.device_name == "Apple M2"
    b = backend_info(metal, environ={"MLX_METAL_GPU_ARCH": "applegpu_g15s"})
    assert (b.architecture, b.metal_generation, b.metal_size) == ("applegpu_g15s", 15, "s")

    def cuda():
        return "cuda", {"device_name": "NVIDIA H200", "architecture": "sm_90",
                        "compute_capability_major": 9, "compute_capability_minor": 0}

    b = backend_info(cuda, environ={"MLX_METAL_GPU_ARCH": "applegpu_g15s"})
    assert (b.backend, b.cuda_capability, b.architecture) == ("cuda", (9, 0), "sm_90")
    assert BackendInfo.cuda("sm_120").cuda_capability == (12, 0)
    assert backend_info(lambda: ("cpu", {"device_name": "x"}), environ={}).backend == "cpu"
    # this test machine really is the CPU backend
    assert backend_info().backend == "cpu"


def test_linear_shapes_of_a_quantized_llama():
    m = tiny_llama(hidden=64, inter=128, layers=3, vocab=96)
    shapes = {(s.role, s.k, s.n): s for s in linear_shapes(m)}
    head_dim = 64 // 4
    assert set(shapes) == {
        ("attention", 64, 64),  # q_proj, o_proj
        ("attention", 64, 2 * head_dim),  # k_proj, v_proj
        ("mlp", 64, 128),  # gate_proj, up_proj
        ("mlp", 128, 64),  # down_proj
        ("lm_head", 64, 96),
    }
    assert shapes[("attention", 64, 64)].count == 2 * 3
    assert set(shapes[("attention", 64, 64)].names) == {"q_proj", "o_proj"}
    assert shapes[("mlp", 128, 64)].count == 3
    assert shapes[("lm_head", 64, 96)].count == 1
    assert all(s.quantized and s.bits == 4 and s.group_size == 64 for s in shapes.values())
    assert all(s.dtype == "float32" for s in shapes.values())


def test_linear_shapes_count_a_tied_embedding_as_the_head():
    m = tiny_llama(tie=True, vocab=128)
    heads = [s for s in linear_shapes(m) if s.role == "lm_head"]
    assert len(heads) == 1 and (heads[0].k, heads[0].n, heads[0].quantized) == (64, 128, True)
    dense = tiny_llama(tie=True, vocab=128, quantize=False)
    heads = [s for s in linear_shapes(dense) if s.role == "lm_head"]
    assert len(heads) == 1 and (heads[0].k, heads[0].n, heads[0].quantized) == (64, 128, False)


def test_family_is_cached_per_rows(monkeypatch: pytest.MonkeyPatch):
    p = KernelPredictor(tiny_llama(), M2)
    first = {r: p.family(r) for r in range(1, 18)}
    assert first[1] == "qmv_quad" and first[14] == "qmm_t"  # K = 64; limit 14 for small shapes

    def boom(*a, **k):
        raise AssertionError("predict_kernel called again")

    monkeypatch.setattr(kernels, "predict_kernel", boom)
    assert {r: p.family(r) for r in range(1, 18)} == first
    assert p.per_shape(3)[0].kernel == "qmv_quad"


# --- the curve ---------------------------------------------------------------------------------

H200_MS = {1: 8.45, 2: 13.4, 3: 17.3, 4: 20.8, 5: 25.0, 6: 29.3, 7: 33.0, 8: 16.3, 9: 16.7,
           10: 16.4, 12: 17.1, 16: 17.4}


def h200_curve(**kw) -> VerifyCostCurve:
    times = {"auto": {r: ms / 1e3 for r, ms in H200_MS.items()}}
    return VerifyCostCurve("cuda", "NVIDIA H200", 128, times, draft_step_s=3.6e-3, **kw)


def test_t_verify_exact_interpolated_and_extrapolated():
    c = h200_curve()
    assert all(c.t_verify(r) == c.times["auto"][r] for r in H200_MS)  # measured: exact
    assert c.t_verify(11) == pytest.approx((16.4 + 17.1) / 2 / 1e3)
    assert c.t_verify(14) == pytest.approx((17.1 + 17.4) / 2 / 1e3)
    assert c.t_verify(20) == pytest.approx((17.4 + (17.4 - 17.1)) / 1e3)  # from (12, 16)
    assert c.draft_step_s == 3.6e-3
    assert c.rows == sorted(H200_MS)
    # a mode that was not measured is an error; "auto" falls back to what was measured
    with pytest.raises(KeyError):
        c.t_verify(3, "plain")
    only_gemv = VerifyCostCurve("cpu", "", 16, {"gemv": {1: 1.0, 2: 2.0}})
    assert only_gemv.t_verify(3) == pytest.approx(3.0)


def test_boundary_is_the_first_10_percent_drop():
    c = h200_curve(predicted_boundary=8)
    assert c.boundary() == 8 and c.prediction_agrees
    assert not h200_curve(predicted_boundary=10).prediction_agrees
    linear = VerifyCostCurve("cpu", "", 16, {"auto": {r: 0.01 * r for r in range(1, 9)}})
    assert linear.boundary() is None and linear.prediction_agrees
    # a 5% dip is noise, not a boundary
    dip = VerifyCostCurve("cpu", "", 16, {"auto": {1: 1.0, 2: 2.0, 3: 1.9, 4: 4.0}})
    assert dip.boundary() is None
    # a predicted boundary beyond the measured rows cannot be seen: no disagreement
    assert VerifyCostCurve("metal", "", 16, linear.times, predicted_boundary=14).prediction_agrees


def test_curve_round_trips_through_json():
    c = h200_curve(predicted_boundary=8, kernels={1: "qmv", 8: "qmm_sm80"},
                   role_kernels={8: {"attention": "qmm_sm80"}})
    d = json.loads(json.dumps(c.to_dict()))
    assert d["boundary"] == 8 and d["prediction_agrees"] is True
    back = VerifyCostCurve.from_dict(d)
    assert back == c
    with pytest.raises(CalibrationError):
        VerifyCostCurve.from_dict(
            {"backend": "cuda", "times": {"auto": {"x": 1}}, "context_len": 1}
        )


def test_fastest_dispatch_and_verify_cost_read_the_cheaper_measured_mode():
    auto = {r: t / 1e3 for r, t in {1: 8.6, 4: 25.2, 7: 35.6, 8: 21.5}.items()}
    gemm = {r: t / 1e3 for r, t in {1: 8.9, 4: 23.5, 7: 23.5, 8: 20.8}.items()}
    both = VerifyCostCurve("cuda", "H200", 800, {"auto": auto, "gemm": gemm})
    assert [fastest_dispatch(both, r) for r in (1, 4, 7, 8)] == ["auto", "gemm", "gemm", "gemm"]
    assert fastest_dispatch(None, 7) == "auto"
    assert fastest_dispatch(h200_curve(), 7) == "auto"  # no gemm measured: MLX's own choice
    assert verify_cost(both, "fastest")(7) == pytest.approx(0.0235)
    assert verify_cost(both, "fastest")(1) == pytest.approx(0.0086)
    assert verify_cost(both, "gemm")(4) == pytest.approx(0.0235)
    assert verify_cost(both, "auto")(4) == pytest.approx(0.0252)
    assert verify_cost(both, "gemv")(4) == pytest.approx(0.0252)  # not measured: the default


# --- verification patches ----------------------------------------------------------------------


def _prefilled(model: nn.Module, n: int = 11, seed: int = 1) -> list:
    cache = make_prompt_cache(model)
    toks = mx.array(np.random.default_rng(seed).integers(0, 96, (1, n)))
    mx.eval(model(toks, cache=cache))
    return cache


def _rows_tokens(rows: int, seed: int) -> mx.array:
    return mx.array(np.random.default_rng(100 + seed).integers(0, 96, (1, rows)))


class _QmmSpy:
    """Records the row count M of every quantized matmul a linear layer runs."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.real = mx.quantized_matmul

    def __call__(self, x, *a, **k):
        self.rows.append(x.size // x.shape[-1])
        return self.real(x, *a, **k)


@pytest.mark.parametrize("dispatch", ["gemv", "gemm"])
def test_forced_dispatch_keeps_the_quantized_logits(dispatch: str, monkeypatch: pytest.MonkeyPatch):
    model = tiny_llama()
    cache = _prefilled(model)
    boundary = kernels.qmv_batch_limit(64, 128, M2)  # 14 for every shape of this model on an M2
    spy = _QmmSpy()
    monkeypatch.setattr(mx, "quantized_matmul", spy)
    for rows in range(1, 10):
        toks = _rows_tokens(rows, rows)
        ref = model(toks, cache=cache)
        mx.eval(ref)
        trim_prompt_cache(cache, rows)
        spy.rows.clear()
        with verification_patches(model, dispatch, "fused", rows, backend=M2):
            got = model(toks, cache=cache)
        mx.eval(got)
        trim_prompt_cache(cache, rows)
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-5, atol=1e-5)
        if rows > 1:  # the override really ran: vectors one by one, or padded to the limit
            assert set(spy.rows) == ({1} if dispatch == "gemv" else {boundary})
        else:
            assert set(spy.rows) == {1}


@pytest.mark.parametrize("dispatch", ["gemv", "gemm"])
def test_forced_dispatch_keeps_the_dense_logits(dispatch: str):
    model = tiny_llama(quantize=False, dtype=mx.float16)
    cache = _prefilled(model)
    plan = patches._plan_for(model)
    # on an M3 Max, fp16 dense layers run gemv_wide up to 15 rows: gemm pads them to 16
    assert set(plan.gemm(M3_MAX).values()) == {16}
    for rows in range(1, 10):
        toks = _rows_tokens(rows, rows)
        ref = model(toks, cache=cache).astype(mx.float32)
        mx.eval(ref)
        trim_prompt_cache(cache, rows)
        with verification_patches(model, dispatch, "fused", rows, backend=M3_MAX):
            got = model(toks, cache=cache).astype(mx.float32)
        mx.eval(got)
        trim_prompt_cache(cache, rows)
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=2e-2, atol=2e-2)


def test_plain_attention_matches_the_fused_kernel():
    rng = np.random.default_rng(0)
    b, hq, hkv, d = 1, 4, 2, 16
    for lq, s in ((1, 1), (5, 5), (5, 12), (3, 40)):
        q = mx.array(rng.standard_normal((b, hq, lq, d)), dtype=mx.float32)
        k = mx.array(rng.standard_normal((b, hkv, s, d)), dtype=mx.float32)
        v = mx.array(rng.standard_normal((b, hkv, s, d)), dtype=mx.float32)
        causal = mx.arange(s - lq, s)[:, None] >= mx.arange(s)[None]
        additive = mx.where(causal, 0.0, -1e9)[None, None]
        for mask in (None, "causal", causal, additive):
            ref = mx.fast.scaled_dot_product_attention(q, k, v, scale=d**-0.5, mask=mask)
            got = plain_attention(q, k, v, scale=d**-0.5, mask=mask)
            np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("offset", [0, 11])
def test_plain_verify_attention_keeps_the_logits(offset: int, monkeypatch: pytest.MonkeyPatch):
    model = tiny_llama()
    calls: list[int] = []
    real_plain = patches.plain_attention

    def counting(q, *a, **k):
        calls.append(q.shape[-2])
        return real_plain(q, *a, **k)

    monkeypatch.setattr(patches, "plain_attention", counting)
    cache = _prefilled(model, offset) if offset else None
    for rows in range(1, 8):
        toks = _rows_tokens(rows, rows)
        ref = model(toks, cache=cache)
        mx.eval(ref)
        if cache is not None:
            trim_prompt_cache(cache, rows)
        calls.clear()
        with verification_patches(model, "auto", "plain", rows, backend=CPU):
            got = model(toks, cache=cache)
        mx.eval(got)
        if cache is not None:
            trim_prompt_cache(cache, rows)
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-5, atol=1e-5)
        # one plain attention per layer for multi-row queries; a single row keeps the fused kernel
        assert calls == ([rows] * len(model.layers) if rows > 1 else [])


def _state() -> tuple:
    return (
        nn.QuantizedLinear.__dict__["__call__"],
        nn.Linear.__dict__["__call__"],
        nn.QuantizedEmbedding.__dict__["as_linear"],
        llama.scaled_dot_product_attention,
        getattr(patches._tls, "linear", None),
        getattr(patches._tls, "plain", False),
        len(patches._installed),
    )


def test_everything_is_restored_after_exit_and_after_an_exception():
    model = tiny_llama(tie=True)
    x = _rows_tokens(6, 0)
    before_state = _state()
    assert before_state[3] is base.scaled_dot_product_attention
    before = np.array(model(x))
    with verification_patches(model, "gemv", "plain", 6, backend=M2):
        assert llama.scaled_dot_product_attention is not base.scaled_dot_product_attention
        assert nn.QuantizedLinear.__dict__["__call__"] is not before_state[0]
        assert nn.QuantizedEmbedding.__dict__["as_linear"] is not before_state[2]
        mx.eval(model(x))
    assert _state() == before_state
    assert np.array_equal(np.array(model(x)), before)
    with (
        pytest.raises(RuntimeError, match="inside"),
        verification_patches(model, "gemm", "plain", 6, backend=M2),
    ):
        mx.eval(model(x))
        raise RuntimeError("inside")
    assert _state() == before_state
    assert np.array_equal(np.array(model(x)), before)


def test_nested_patches_restore_in_order_and_single_rows_patch_nothing():
    model = tiny_llama()
    before = _state()
    with verification_patches(model, "gemv", "plain", 4, backend=M2):
        inner_state = _state()
        with verification_patches(model, "gemm", "fused", 4, backend=M2):
            assert patches._tls.plain is False and set(patches._tls.linear.values()) == {14}
        assert _state() == inner_state
    assert _state() == before
    with verification_patches(model, "gemv", "plain", 1, backend=M2):
        assert _state() == before
    with verification_patches(model, "auto", "fused", 5, backend=M2):
        assert _state() == before


def test_only_the_patched_model_changes_path(monkeypatch: pytest.MonkeyPatch):
    target, draft = tiny_llama(seed=0), tiny_llama(seed=1)
    spy = _QmmSpy()
    monkeypatch.setattr(mx, "quantized_matmul", spy)
    toks = _rows_tokens(5, 0)
    with verification_patches(target, "gemv", "fused", 5, backend=M2):
        mx.eval(draft(toks))
        assert set(spy.rows) == {5}  # the draft shares the classes but not the plan
        spy.rows.clear()
        mx.eval(target(toks))
        assert set(spy.rows) == {1}


def test_patch_arguments_are_checked_and_auto_attention_follows_the_backend():
    model = tiny_llama()
    with pytest.raises(SettingsError):
        verification_patches(model, "matrix", "auto", 4)
    with pytest.raises(SettingsError):
        verification_patches(model, "auto", "flash", 4)
    assert dp.resolve_verify_attention("auto", 5, H200) == "plain"
    assert dp.resolve_verify_attention("auto", 5, M2) == "fused"
    assert dp.resolve_verify_attention("auto", 5, CPU) == "fused"
    measured = VerifyCostCurve("metal", "", 128, {"fused": {5: 0.03}, "plain": {5: 0.02}})
    assert dp.resolve_verify_attention("auto", 5, M2, measured) == "plain"
    assert dp.resolve_verify_attention("fused", 5, H200, measured) == "fused"


# --- calibration -------------------------------------------------------------------------------


class FakeClock:
    """calibrate's perf_counter, moved only by the calls a test charges: the times stored are
    then exact, on a machine of any speed or load (a tiny model's real milliseconds are noise:
    under load its draft step measured dearer than the target's forward)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    # the module: the attribute core.dispatch.calibrate is the function
    module = importlib.import_module("core.dispatch.calibrate")
    monkeypatch.setattr(module, "time", types.SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def charged(model: llama.Model, clock: FakeClock,
            seconds: Callable[[mx.array], float]) -> llama.Model:
    """`model`, each call of which (a forward, not a compiled step) first moves `clock` on by
    seconds(inputs), then runs for real."""

    class Charged(type(model)):  # type: ignore[misc]
        def __call__(self, inputs: mx.array, *args: object, **kwargs: object) -> mx.array:
            clock.now += seconds(inputs)
            return super().__call__(inputs, *args, **kwargs)

    model.__class__ = Charged
    return model


def test_calibration_stores_the_timed_medians_per_rows_and_advances_the_kv_length(clock):
    """Per mode and R, the median of the timed forwards (warm-up left out); the draft's chained
    step; the KV length one further per call. The n-th forward over R rows (n counted per R,
    the context's prefill is R = 16) costs n * R ms: with 1 warm-up and 5 timed passes, the
    modes interleaved at each R and each timed pass starting one mode later (the first timed
    pass auto, gemv; then gemv, auto; ...; the warm-up gemv, auto), auto's timed calls are 3, 6,
    7, 10, 11 (median 7R ms), gemv's 4, 5, 8, 9, 12 (8R ms): neither is always first."""
    forwards: Counter[int] = Counter()

    def verify_ms(toks: mx.array) -> float:
        r = int(toks.shape[1])
        forwards[r] += 1
        return forwards[r] * r * 1e-3 if r in (1, 4, 8) else 0.0

    target = charged(tiny_llama(hidden=256, inter=1024, vocab=512), clock, verify_ms)
    draft = charged(tiny_llama(hidden=64, inter=128, layers=1, vocab=512), clock,
                    lambda _: 0.5e-3)
    seen: list[tuple[int, int]] = []
    curve = calibrate(target, draft, rows=[1, 4, 8], repeats=5, context=16, warmup=1,
                      modes=("auto", "gemv"), progress=lambda d, t, _: seen.append((d, t)))
    assert curve.times["auto"] == pytest.approx({1: 7e-3, 4: 28e-3, 8: 56e-3})
    assert curve.times["gemv"] == pytest.approx({1: 8e-3, 4: 32e-3, 8: 64e-3})
    assert forwards == {16: 1, 1: 12, 4: 12, 8: 12}  # the prefill, then 2 modes x 6 passes
    # the draft chain's share per step: DRAFT_CHAIN charged calls, timed as one chain
    assert curve.draft_step_s == pytest.approx(0.5e-3)
    # no cheaper R anywhere, as the CPU's one loop per row (cpu_qmm_t) predicts
    assert curve.boundary() is None and curve.predicted_boundary is None and curve.prediction_agrees
    assert curve.kernels == {1: "cpu_qmm_t", 4: "cpu_qmm_t", 8: "cpu_qmm_t"}
    # every call advanced the KV length by exactly one: 2 modes x (1 warm-up + 5) passes x 3 R
    assert curve.calls == 2 * 6 * 3
    assert curve.context_end == 16 + curve.calls
    assert seen[-1] == (curve.calls + 6, curve.calls + 6)
    assert (curve.backend, curve.context_len, curve.repeats) == ("cpu", 16, 5)



def test_the_target_s_untimed_pass_runs_on_a_gpu_and_not_on_the_cpu(clock):
    """`warmup` unset: a GPU's first use compiles kernels, so one untimed pass of the target's
    forwards comes first there; the CPU compiles none, and its ~0.2 s rows make that pass a
    quarter of a first start's calibration, so it times every pass. Same charges as above:
    the n-th forward over R rows costs n * R ms (medians of calls 2..4 or 1..3)."""
    from tests.helpers.forward_rows import H200

    def run(backend):  # noqa: ANN001, ANN202
        forwards: Counter[int] = Counter()

        def verify_ms(toks: mx.array) -> float:
            r = int(toks.shape[1])
            forwards[r] += 1
            return forwards[r] * r * 1e-3 if r in (1, 4) else 0.0

        target = charged(tiny_llama(hidden=256, inter=1024, vocab=512), clock, verify_ms)
        curve = calibrate(target, rows=[1, 4], repeats=3, context=16, backend=backend)
        return curve, forwards

    cpu, seen = run(None)  # this machine: MLX's CPU backend
    assert seen == {16: 1, 1: 3, 4: 3} and cpu.calls == 6
    assert cpu.times["auto"] == pytest.approx({1: 2e-3, 4: 8e-3})  # calls 1..3: median 2R
    gpu, seen = run(H200)
    assert seen == {16: 1, 1: 4, 4: 4} and gpu.calls == 8
    assert gpu.times["auto"] == pytest.approx({1: 3e-3, 4: 12e-3})  # calls 2..4: median 3R


def test_calibration_times_the_draft_as_the_engine_runs_it_eager_or_compiled(clock, monkeypatch):
    """The draft step is timed as the engine runs it: a chain of DRAFT_CHAIN steps with no host
    sync inside, through the compiled forward with step compiled. A plain step (a model call)
    is charged 1 ms, a compiled one 0.25 ms (it never calls the model), so the price says
    which ran; the curve records the step it priced."""
    from core.primitives.compiled import CompiledForward

    chain = importlib.import_module("core.dispatch.calibrate").DRAFT_CHAIN
    compiled: list[int] = []
    real_forward = CompiledForward.forward

    def forward(self: CompiledForward, tokens: mx.array, cache: list,
                last: int | None = None) -> mx.array:
        compiled.append(cache[0].offset)
        clock.now += 0.25e-3
        return real_forward(self, tokens, cache, last)

    monkeypatch.setattr(CompiledForward, "forward", forward)
    target = tiny_llama(vocab=128)
    draft = charged(tiny_llama(layers=1, vocab=128, seed=1), clock, lambda _: 1e-3)
    plain = calibrate(target, draft, rows=[1, 2], repeats=5, context=8)
    assert plain.draft_step_s == pytest.approx(1e-3) and compiled == []
    assert plain.step == "eager"
    assert plain.draft_step_sampled_s == pytest.approx(1e-3)  # the fake clock charges the model
    assert set(plain.accept_s) == {"greedy", "sampled"}
    assert set(plain.accept_s["sampled"]) == {1, 2}  # the acceptance at the rows asked for
    fused = calibrate(target, draft, rows=[1, 2], repeats=5, context=8, step="compiled")
    assert fused.draft_step_s == pytest.approx(0.25e-3)
    assert fused.step == "compiled"
    # every pass (warm-up included) proposes DRAFT_CHAIN compiled steps greedy, then sampled,
    # the first feeding the prompt's last token (the cache trimmed back after each proposal)
    assert compiled == list(range(7, 7 + chain)) * (2 * (1 + 5))


def test_calibration_refuses_bad_requests():
    model = tiny_llama()
    for kw in ({"rows": 0}, {"repeats": 0}, {"context": 0}, {"modes": ("fast",)}, {"rows": [0, 2]}):
        with pytest.raises(CalibrationError):
            calibrate(model, **kw)

    class NoVocab(nn.Module):  # no args.vocab_size, no embedding: no tokens can be drawn
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(8, 8)

    with pytest.raises(CalibrationError, match="vocabulary size"):
        calibrate(NoVocab(), rows=2, repeats=1, context=4)


def _flat_curve(backend: str = "cuda", rows: int = 17) -> VerifyCostCurve:
    times = {r: 0.010 for r in range(1, rows + 1)}
    return VerifyCostCurve(backend, "NVIDIA H200", 600, {"auto": times}, draft_step_s=0.001)


def test_a_curve_file_is_read_from_calibrate_or_from_a_bench_report(tmp_path) -> None:
    """`calibrate --json` writes the curve; a bench report carries the one it priced with."""
    curve = _flat_curve()
    saved = tmp_path / "curve.json"
    saved.write_text(json.dumps(curve.to_dict()))
    back = dp.read_curve_file(saved)
    assert back.times == curve.times and back.draft_step_s == 0.001 and back.backend == "cuda"
    report = {"environment": {"backend": "cuda", "device_name": "NVIDIA H200"},
              "protocol": {"calibration": {"context": 629, "draft_step_s": 0.004,
                                           "t_verify_s": {"auto": {"1": 0.0047, "2": 0.0085}}}}}
    (tmp_path / "report.json").write_text(json.dumps(report))
    got = dp.read_curve_file(tmp_path / "report.json")
    assert got.times == {"auto": {1: 0.0047, 2: 0.0085}} and got.draft_step_s == 0.004
    assert (got.backend, got.device_name, got.context_len) == ("cuda", "NVIDIA H200", 629)


@pytest.mark.parametrize(("content", "says"), [
    (None, "There is no curve file"),
    ("not json", "is not a JSON curve"),
    ("[1, 2]", "holds no JSON object"),
    ('{"protocol": {"calibration": null}}', "carries no calibration"),
    ('{"backend": "cpu", "context_len": 1}', "is malformed"),
    ('{"backend": "cpu", "context_len": 1, "times": {}}', "holds no measurements"),
])
def test_a_bad_curve_file_is_one_sentence(tmp_path, content: str | None, says: str) -> None:
    path = tmp_path / "c.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CalibrationError, match=says):
        dp.read_curve_file(path)
