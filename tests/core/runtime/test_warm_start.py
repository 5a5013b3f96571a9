"""A narrow first start (core/runtime/warm_start.py, issue 31): on a GPU whose quantized-GEMM
kernels are not compiled yet, every forward before and during the run stays below the rows
where MLX would compile one.

The machine is faked (the backend query and the kernel cache's folder, never the maths); the
forwards run on the tiny random-weight pair, each one's row count recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.dispatch.backend import backend_info
from core.dispatch.kernels import LinearShape
from core.runtime.warm_start import NarrowStart, cached_kinds, narrow_start, narrowed
from core.settings import Settings, first_run_settings
from tests.helpers.cold_gpu import A100, cold_gpu, record_rows

CUDA = backend_info(query=lambda: ("cuda", {"device_name": "NVIDIA H200",
                                            "compute_capability_major": 9,
                                            "compute_capability_minor": 0}))
METAL = backend_info(query=lambda: ("metal", {"architecture": "applegpu_g15s",
                                            "device_name": "Apple M2 Max"}))
CPU = backend_info(query=lambda: ("cpu", {}))


def _models(pair):
    return [pair.target.model, pair.draft.model]


# The default model's linear shapes (SmolLM2-135M Q4_1: 4-bit g32 matrices, a Q8_0 head).
DEFAULT_SHAPES = [
    LinearShape("attention", 576, 192, 4, 32, True, count=60),
    LinearShape("attention", 576, 576, 4, 32, True, count=60),
    LinearShape("mlp", 576, 1536, 4, 32, True, count=60),
    LinearShape("mlp", 1536, 576, 4, 32, True, count=30),
    LinearShape("lm_head", 576, 49152, 8, 32, True),
]


def test_the_default_model_on_a_cold_h200_starts_below_the_gemm_rows(tmp_path):
    narrow = narrow_start([DEFAULT_SHAPES], backend=CUDA, cache_dir=tmp_path)
    # MLX CUDA: a quantized matmul of fewer than 8 rows is the precompiled qmv (the probe of
    # docs/benchmarks/data/h200-2026-12-01-first-probe: verify 2..5 compiled nothing)
    assert narrow is not None and narrow.rows == 7 and narrow.k_max == 6
    assert narrow.quantization == ((4, 32), (8, 32))
    assert "forwards kept to 7 rows" in narrow.text() and "8-bit g32" in narrow.text()


def test_the_tiny_pair_on_an_a100_starts_at_seven_rows_and_on_hopper_not_at_all(tiny_pair,
                                                                                 tmp_path):
    narrow = narrow_start(_models(tiny_pair), backend=A100, cache_dir=tmp_path)
    assert narrow is not None and narrow.rows == 7 and narrow.quantization == ((4, 64),)
    # a group as large as the row takes Hopper's qmm_sm90 from 2 rows: nothing to keep below
    assert narrow_start(_models(tiny_pair), backend=CUDA, cache_dir=tmp_path) is None


def test_metal_and_the_cpu_never_start_narrow(tmp_path):
    assert narrow_start([DEFAULT_SHAPES], backend=METAL, cache_dir=tmp_path) is None
    assert narrow_start([DEFAULT_SHAPES], backend=CPU, cache_dir=tmp_path) is None


def test_a_cache_with_the_pairs_gemm_kernels_starts_full(tmp_path):
    (tmp_path / "qmm_sm80_tn_bfloat16_m16_b8_g32_affine.ptx").write_bytes(b"x")
    (tmp_path / "gather_bfloat16_int32_1.ptx").write_bytes(b"x")
    assert narrow_start([DEFAULT_SHAPES], backend=CUDA, cache_dir=tmp_path) is not None
    (tmp_path / "qmm_naive_tn_aligned_bfloat16_m16_b4_g32_affine.ptx").write_bytes(b"x")
    assert cached_kinds(tmp_path) == {(8, 32), (4, 32)}
    assert narrow_start([DEFAULT_SHAPES], backend=CUDA, cache_dir=tmp_path) is None


def test_dense_models_never_start_narrow(tmp_path):
    from tests.helpers.tiny import tiny_llama

    dense = tiny_llama(1, 0)  # cuBLAS on CUDA: nothing to JIT
    assert narrow_start([dense], backend=CUDA, cache_dir=tmp_path) is None


def test_narrowed_settings_keep_everything_but_the_chunk_and_k():
    s = first_run_settings().replace(k=8, k_min=7, k_max=12)
    n = narrowed(s, NarrowStart(7, ((4, 32),)))
    assert (n.prefill_chunk, n.k, n.k_min, n.k_max) == (7, 6, 6, 6)
    assert n.replace(prefill_chunk=512, k=8, k_min=7, k_max=12) == s
    assert narrowed(s, None) is s


# A prompt that repeats itself: the lookup copies long runs, after which the draft model
# catches up on up to 32 tokens in one lazy forward unless that is chunked too.
REPEAT = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] * 6


@pytest.mark.parametrize("source", ["model", "hybrid"])
def test_a_narrow_run_never_forwards_more_rows_than_its_start(engine, monkeypatch, source):
    settings = Settings(draft_source=source, policy="fixed", k=16, k_max=16, temperature=0.0,
                        rule="greedy", max_tokens=48, ignore_eos=True)
    narrow = NarrowStart(7, ((4, 64),))
    rows = record_rows(monkeypatch, type(engine.target_model))
    out = list(engine.generate(REPEAT, narrowed(settings, narrow)))
    assert out[-1].tokens == 48
    assert rows and max(rows) <= 7, sorted(set(rows))
    # the control: the same run started full forwards its prompt and k + 1 = 17 rows
    rows.clear()
    engine.reset()
    list(engine.generate(REPEAT, settings))
    assert max(rows) > 7


def test_a_narrow_calibration_measures_and_prefills_below_the_gemm_rows(engine, monkeypatch,
                                                                         tmp_path: Path):
    from core.dispatch.curve_cache import covers
    from core.runtime.calibration import curve_for

    settings = narrowed(first_run_settings(), NarrowStart(7, ((4, 64),)))
    rows = record_rows(monkeypatch, type(engine.target_model))
    result = curve_for(engine, settings, context=40, max_rows=7, folder=tmp_path)
    assert max(rows) <= 7, sorted(set(rows))
    assert max(result.curve.times["auto"]) == 7 and covers(result.curve, settings)
    # kept, it serves the next narrow start, not a full one (k_max 8 needs 9 rows)
    again = curve_for(engine, settings, context=40, max_rows=7, folder=tmp_path)
    assert again.kept is not None
    assert not covers(again.curve, first_run_settings())


def test_chat_on_a_cold_gpu_starts_narrow_and_says_so(monkeypatch, tmp_path, capsys):
    """`specdec-tui chat` on a faked A100 with an empty kernel cache: the line says so, the
    calibration measures 7 rows and no forward of the run is wider."""
    from core import cli

    rows = cold_gpu(monkeypatch, tmp_path)
    prompt = "copy this: " + "alpha beta gamma delta " * 6
    assert cli.main(["chat", prompt, "--target", "shape:tiny", "--draft", "shape:tiny-draft",
                     "--max-tokens", "24"]) == 0
    err = capsys.readouterr().err
    assert "forwards kept to 7 rows" in " ".join(err.split()), err
    assert rows and max(rows) <= 7, sorted(set(rows))
