"""Measuring what a verification of R rows costs on this machine: `calibrate`.

One target forward per row count R, per mode (default settings, a forced kernel family or a
forced verification attention), with the KV length advancing as in a real loop, plus the
draft's single-token step as the engine chains it. The result is a VerifyCostCurve that also
carries the kernels predicted for each R, so a measured boundary can be checked against them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from core.dispatch.backend import BackendInfo, current_backend
from core.dispatch.curve import (
    CalibrationCancelled,
    CalibrationError,
    VerifyCostCurve,
    compiled_pays,
)
from core.dispatch.kernels import KernelPredictor
from core.dispatch.patches import dense_lost, release_dense, verification_patches
from core.primitives.introspect import vocab_size

# Calibration modes: "auto" is MLX's own kernels with the backend's attention; "gemv"/"gemm"
# force the linear layers' kernel family, "dense" the dequantized copy's matmul (patches.py);
# "fused"/"plain" force the verification attention; "compiled" runs the rows through the
# compiled forward (core/primitives/compiled.py), no patch applying.
CALIBRATION_MODES = ("auto", "gemv", "gemm", "dense", "fused", "plain", "compiled")
MODE_SETTINGS = {  # mode -> (dispatch, verify_attention)
    "auto": ("auto", "auto"),
    "gemv": ("gemv", "auto"),
    "gemm": ("gemm", "auto"),
    "dense": ("dense", "auto"),
    "fused": ("auto", "fused"),
    "plain": ("auto", "plain"),
    "compiled": ("auto", "auto"),
}
DRAFT_CHAIN = 8  # draft steps per timed chain
ACCEPT_ROWS = (1, 2, 4, 8, 16, 32, 64)  # row counts the acceptance is timed at (<= rows asked)

Progress = Callable[[int, int, str], None]  # (done, total, label)
# The widest verification a calibration measures. The engine verifies at most MAX_K + 1 rows;
# past a thousand the curve is a prefill's, and `--rows 1000000000` built a billion-entry
# list (6 GB in 12 s) before the context check could refuse it.
MAX_CALIBRATION_ROWS = 1024
MAX_CALIBRATION_REPEATS = 1000


def calibration_tokens(
    rows: int | Sequence[int], repeats: int, context: int, modes: int = 1, warmup: int = 1
) -> int:
    """The longest KV length a calibration reaches: `context` plus one per timed or warm-up
    call, plus the widest verification's rows. Checked against the model's context window
    before the first forward (the CLI), as `chat` and `bench` check a request."""
    row_list = _row_list(rows)
    calls = modes * (warmup + repeats) * len(row_list)
    return context + calls - 1 + max(row_list)


def _check_cancel(cancel: Any) -> None:
    """Stop between forwards when asked (a forward itself cannot be interrupted)."""
    if cancel is not None and cancel.is_set():
        raise CalibrationCancelled("The calibration was cancelled; the curve is as it was.")


def _row_list(rows: int | Sequence[int]) -> list[int]:
    if isinstance(rows, int):
        check_rows(rows)
        return list(range(1, rows + 1))
    rows = list(rows)
    if len(rows) > MAX_CALIBRATION_ROWS:
        raise CalibrationError(f"A calibration measures at most {MAX_CALIBRATION_ROWS} row "
                               f"counts, got {len(rows):,}.")
    out = sorted({int(r) for r in rows})
    if not out or out[0] < 1:
        raise CalibrationError("Calibration rows must be positive integers.")
    check_rows(out[-1])
    return out


def check_rows(rows: int) -> None:
    """Rows between 1 and MAX_CALIBRATION_ROWS, in one sentence, before anything is built."""
    if not 1 <= rows <= MAX_CALIBRATION_ROWS:
        raise CalibrationError(
            f"--rows must be between 1 and {MAX_CALIBRATION_ROWS} (the engine verifies at "
            f"most 33 rows), got {rows:,}."
        )


def _known_vocab(model: nn.Module) -> int:
    v = vocab_size(model)
    if v is None:
        raise CalibrationError(
            "Cannot tell the model's vocabulary size, so no tokens can be drawn."
        )
    return v


def _time_proposal(state: Any, seq: list[int], vocab: int, sampled: bool, fused: bool,
                   rng: Any) -> float:
    """Seconds per draft step as the engine drafts: one ModelDrafter.propose of DRAFT_CHAIN
    steps (core/drafting/model.py: the same decode, penalty, softmax and draw per step, chained
    with async_eval), evaluated with its q rows. Sampled, each step also turns its logits into
    q over the vocabulary and draws from it. The cache is trimmed back afterwards."""
    from core.drafting.base import DraftRequest
    from core.drafting.model import ModelDrafter
    from core.primitives.cached_model import cache_offset
    from core.primitives.sampling import LogitsConfig

    cfg = LogitsConfig(temperature=1.0 if sampled else 0.0)
    keys = mx.random.split(mx.random.key(int(rng.integers(0, 2**31))), DRAFT_CHAIN)
    mx.eval(keys)
    t0 = time.perf_counter()
    proposal = ModelDrafter(state).propose(
        DraftRequest(seq, DRAFT_CHAIN, vocab, cfg, keys, None, compiled=fused)
    )
    mx.eval(proposal.tokens, *([] if proposal.q is None else [proposal.q]))
    dt = (time.perf_counter() - t0) / DRAFT_CHAIN
    from mlx_lm.models.cache import trim_prompt_cache

    trim_prompt_cache(state.cache, cache_offset(state.cache) - len(state.seq))
    return dt


def _time_acceptance(
    rows: Sequence[int], vocab: int, passes: int, warmup: int, rng: Any
) -> dict[str, dict[int, float]]:
    """Median seconds of the round's acceptance on the device (the engine's "sample" phase)
    over R verified rows: greedy (argmax, match and the packed array a greedy round reads)
    and sampled (softmax of the target's rows and the mentored rule, the costlier sampled
    one), each ending in the round's one sync."""
    from core.primitives.sampling import (
        LogitsConfig,
        accept_greedy_packed,
        accept_sampled,
        to_probs,
    )

    cfg = LogitsConfig(temperature=1.0)
    out: dict[str, dict[int, list[float]]] = {"greedy": {}, "sampled": {}}
    for p in range(passes):
        for r in rows:
            k = r - 1
            logits = mx.array(rng.standard_normal((r, vocab), dtype=np.float32))
            q = mx.softmax(mx.array(rng.standard_normal((k, vocab), dtype=np.float32)), axis=-1)
            drafts = mx.array(rng.integers(0, vocab, (k,)), dtype=mx.int32)
            key = mx.random.key(p * 1000 + r)
            mx.eval(logits, q, drafts, key)
            for kind in ("greedy", "sampled"):
                t0 = time.perf_counter()
                if kind == "greedy":  # the one packed array a greedy round reads
                    mx.eval(accept_greedy_packed(logits, drafts))
                else:
                    v = accept_sampled(to_probs(logits, cfg), q, drafts, "mentored", 0.5, key)
                    mx.eval(v.n_accepted, v.next_token, v.tv_sum)
                if p >= warmup:
                    out[kind].setdefault(r, []).append(time.perf_counter() - t0)
    return {kind: {r: statistics.median(v) for r, v in tab.items()} for kind, tab in out.items()}


def calibrate(
    target_model: nn.Module,
    draft_model: nn.Module | None = None,
    *,
    rows: int | Sequence[int] = 16,
    repeats: int = 5,
    context: int = 128,
    modes: Sequence[str] = ("auto",),
    progress: Progress | None = None,
    backend: BackendInfo | None = None,
    seed: int = 0,
    warmup: int | None = None,
    step: str = "eager",
    cancel: Any = None,
    chunk: int | None = None,
) -> VerifyCostCurve:
    """Measure one target forward over R rows for R in `rows` (1..rows), per mode.

    A fresh prompt cache is prefilled with `context` random tokens; each call then trims the
    cache back by R - 1 only, so the KV length advances by one per call as in a real loop
    (MLX CUDA sets its fused multi-row attention up anew for each shape, and repeating one
    length hides that). Passes sweep all R in turn (`warmup` untimed, then `repeats` timed) so
    every R sees the same spread of lengths (`warmup` None: 1, but none of the target's on the
    CPU, which compiles nothing at first use); each timed call is one forward and one mx.eval.
    Mode "compiled" times the same rows through the compiled forward (left out where the
    target's layout has none). The draft's single-token step is timed as the engine runs it: a
    chain of steps with no host sync inside, through the step the run takes (`step`: "auto"
    takes the compiled one where the target's rows measured it no slower, `compiled_pays`);
    the curve records it as its `step`. Medians are stored.
    `cancel` (a threading.Event) is checked before every forward: set, the calibration raises
    CalibrationCancelled after the forward under way. `chunk` bounds the rows of the context
    prefills (the engine's prefill_chunk; a narrow start's, core/runtime/warm_start.py).
    """
    # Imported here, not above: building the CLI's parser imports this package, and mlx_lm
    # (which core.primitives.cached_model imports) takes over a second to import.
    from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

    from core.primitives.cached_model import PREFILL_CHUNK, cache_offset, prefill

    chunk = chunk or PREFILL_CHUNK
    row_list = _row_list(rows)
    if repeats < 1:
        raise CalibrationError(f"Calibration needs at least 1 repeat, got {repeats}.")
    if context < 1:
        raise CalibrationError(f"Calibration needs a context of at least 1 token, got {context}.")
    bad = [m for m in modes if m not in CALIBRATION_MODES]
    if bad or not modes:
        raise CalibrationError(
            f"Calibration modes must be among {', '.join(CALIBRATION_MODES)}; got {', '.join(bad) or 'none'}."
        )
    modes = list(dict.fromkeys(modes))
    compiled_fwd = None
    if "compiled" in modes:
        from core.primitives.compiled import CompiledForward, supports

        if supports(target_model) is None:  # else its rows run eager, as the engine's would
            compiled_fwd = CompiledForward(target_model)
    b = backend or current_backend()
    predictor = KernelPredictor(target_model, b)
    vocab = _known_vocab(target_model)
    rng = np.random.default_rng(seed)
    cache = make_prompt_cache(target_model)
    if not can_trim_prompt_cache(cache):
        raise CalibrationError(
            "The target's cache cannot be rewound, so verification cannot be calibrated."
        )
    prompt = mx.array(rng.integers(0, vocab, context), dtype=mx.int32)
    _check_cancel(cancel)
    prefill(target_model, cache, prompt, chunk)

    # The untimed pass keeps a first use's kernel compile out of the samples. The CPU backend
    # compiles no kernel for a forward (core/runtime/warmup.py skips it there too), and a row
    # of the default model costs ~0.2 s on a 2-core CPU, so there the target's pass is left
    # out unless asked for: a quarter of a first start's calibration. The draft's chain and
    # the acceptance keep theirs (a fused draft is mx.compile'd, on the CPU too).
    side_warmup = 1 if warmup is None else warmup
    if warmup is None:
        warmup = 0 if b.backend == "cpu" else 1
    passes = warmup + repeats
    side_passes = side_warmup + repeats
    total = len(modes) * passes * len(row_list) + (side_passes if draft_model is not None else 0)
    done = 0
    calls = 0
    # Modes interleaved call by call (pass, then R, then mode), so each mode meets the same KV
    # lengths and the same stretch of the host's time: one mode after another, the H200 timed
    # the same unpatched forward 1.6x dearer in the last mode than in the first
    # (H200, 2026-12-01: docs/benchmarks/archive/never-slower-runs.md). Each pass starts one mode later (timed passes in turn), so
    # no mode is always the first call after a change of R: there the H200 timed the same
    # one-row forward at 5.5-18 ms in "auto", the first, and 4.0-7.4 ms in the next two
    # (2026-12-02's curves, same page); the medians leave it out.
    if compiled_fwd is not None:  # each bucket traced before any sample (a trace is seconds)
        from core.primitives.compiled import bucket

        for width in sorted({bucket(r) for r in row_list} - {None}):
            mx.eval(compiled_fwd.forward(mx.zeros((width,), mx.int32), cache))
            trim_prompt_cache(cache, width)
    samples = {mode: {r: [] for r in row_list} for mode in modes}
    for p in range(passes):
        turn = (p - warmup) % len(modes)
        for r in row_list:
            for mode in (*modes[turn:], *modes[:turn]):
                dispatch, attention = MODE_SETTINGS[mode]
                _check_cancel(cancel)
                toks = mx.array(rng.integers(0, vocab, (1, r)), dtype=mx.int32)
                mx.eval(toks)
                t0 = time.perf_counter()
                if mode == "compiled" and compiled_fwd is not None and compiled_fwd.runs(r, cache):
                    logits = compiled_fwd.forward(toks[0], cache)
                else:
                    with verification_patches(target_model, dispatch, attention, r, backend=b):
                        logits = target_model(toks, cache=cache)
                mx.eval(logits)
                dt = time.perf_counter() - t0
                if r > 1:
                    trim_prompt_cache(cache, r - 1)
                calls += 1
                if p >= warmup:
                    samples[mode][r].append(dt)
                done += 1
                if progress is not None:
                    progress(done, total, f"{mode}: {r} rows")
    times = {mode: {r: statistics.median(v) for r, v in tab.items()} for mode, tab in samples.items()}
    context_end = cache_offset(cache)
    del cache
    if dense_lost(times):
        release_dense(target_model)  # no "auto" round will take the copy: give its memory back

    # The step priced: compiled only where its rows were timed (and, for auto, paid).
    measured = VerifyCostCurve(backend=b.backend, device_name=b.device_name, context_len=context,
                               times=times)
    ran = step if step != "auto" else (
        "compiled" if compiled_fwd is not None and compiled_pays(measured) else "eager")
    draft_s = sampled_s = None
    if draft_model is not None:
        from core.primitives.cached_model import CachedModel

        dvocab = min(vocab, _known_vocab(draft_model))
        state = CachedModel(draft_model, make_prompt_cache(draft_model))
        seq = [int(t) for t in (prompt % dvocab).tolist()]
        state.prefill(seq[:-1], chunk)  # the last token is the round's to feed, as in the engine
        chains: dict[bool, list[float]] = {False: [], True: []}
        for p in range(side_passes):
            _check_cancel(cancel)
            for sampled in (False, True):
                dt = _time_proposal(state, seq, dvocab, sampled, ran == "compiled", rng)
                if p >= side_warmup:
                    chains[sampled].append(dt)
            done += 1
            if progress is not None:
                progress(done, total, "draft step")
        draft_s = statistics.median(chains[False])
        sampled_s = statistics.median(chains[True])
        del state
    accept = _time_acceptance([r for r in ACCEPT_ROWS if r <= max(row_list)] or [1], vocab,
                              side_passes, side_warmup, rng)

    return VerifyCostCurve(
        backend=b.backend,
        device_name=b.device_name,
        architecture=b.architecture,
        context_len=context,
        times=times,
        draft_step_s=draft_s,
        draft_step_sampled_s=sampled_s,
        accept_s=accept,
        kernels={r: predictor.family(r) for r in row_list},
        role_kernels={r: predictor.role_kernels(r) for r in row_list},
        predicted_boundary=predictor.forward_boundary(),
        repeats=repeats,
        context_end=context_end,
        calls=calls,
        step=ran,
    )
