"""Forcing a verification's kernels without changing its output: the verification patches.

`verification_patches` is entered around the target's multi-row verification forward only.
dispatch "gemv" runs every linear layer's rows one at a time (vector kernel), "gemm" pads
each layer's rows to where its matrix kernel starts, "dense" multiplies by a dequantized
copy of each quantized layer's weights (one dense matmul: cuBLASLt on CUDA, steel GEMM on
Metal), and verify_attention "plain" swaps mlx-lm's fused attention for `plain_attention`;
so their effect on cost can be measured and chosen while the logits stay the same (up to
rounding: the weights are the same numbers, summed in another order). Patches are per thread
and reference-counted, and everything is restored on exit.

Why "dense": MLX's quantized matmul on CUDA runs qmv for fewer than 8 rows (its cost grows
with the rows) and, for layers whose width is not a multiple of 128 (SmolLM2's 576),
`qmm_naive` from 8 rows: on the H200 a lookup round verifying 4-33 rows of the default
model cost 9-29 ms against a 3.7-6.0 ms step (H200, 2026-12-01, traced: docs/benchmarks/archive/never-slower-runs.md), so a copy paid only from about three tokens a round. A dense matmul over the
same weights costs little more at 33 rows than at 1 on a GPU; its copy costs 2 bytes a
weight, so it is measured only where that is at most `DENSE_SHARE` of the device's memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from core.dispatch.backend import BackendInfo, current_backend
from core.dispatch.bucketed import bucketed_attention
from core.dispatch.curve import VerifyCostCurve, auto_dispatch, fastest_dispatch, fused_cheaper
from core.dispatch.kernels import linear_modules, shape_boundary
from core.settings import DISPATCH, VERIFY_ATTENTION, SettingsError

_GEMV = -1  # linear-plan action: run the rows one at a time
_DENSE = -2  # linear-plan action: one dense matmul by the layer's dequantized weights
# The most of the device's memory the dequantized copy may take: a 135M model's 0.27 GB fits
# anywhere, a 7B model's 14 GB only beside 140 GB (an H200), never a 16 GB Mac's 11 GB set.
DENSE_SHARE = 0.10
DENSE_KERNEL = "dense (dequantized)"  # a round's kernel family when it ran the dense copy
_tls = threading.local()  # .linear: {id(module): action} | None, .plain: bool
_install_lock = threading.Lock()
_installed: dict[tuple[int, str], list[Any]] = {}


def plain_attention(
    queries: mx.array,
    keys: mx.array,
    values: mx.array,
    *,
    scale: float,
    mask: mx.array | str | None = None,
) -> mx.array:
    """softmax(q k^T * scale + mask) v with the softmax in float32: no fused kernel, so nothing
    is set up anew per shape (MLX CUDA's fused multi-row attention is, ~50 ms each time).

    Shapes as mx.fast.scaled_dot_product_attention: q [B, Hq, L, D], k/v [B, Hkv, S, D];
    "causal" aligns the L queries to the last L keys (offset S - L into the cache).
    """
    b, hq, lq, d = queries.shape
    hkv, s = keys.shape[1], keys.shape[2]
    rep = hq // hkv
    q = queries * scale
    if rep > 1:
        q = q.reshape(b, hkv, rep, lq, d)
        keys = mx.expand_dims(keys, 2)
        values = mx.expand_dims(values, 2)
    scores = (q @ mx.swapaxes(keys, -1, -2)).astype(mx.float32)
    if mask is not None:
        if isinstance(mask, str):
            if mask != "causal":
                raise ValueError(f"unsupported attention mask {mask!r}")
            mask = mx.arange(s - lq, s)[:, None] >= mx.arange(s)[None]
        elif rep > 1 and mask.ndim == 4:
            if mask.shape[1] == hq and hq > 1:
                mask = mask.reshape(mask.shape[0], hkv, rep, *mask.shape[2:])
            else:
                mask = mx.expand_dims(mask, 2)
        if mask.dtype == mx.bool_:
            scores = mx.where(mask, scores, mx.finfo(mx.float32).min)
        else:
            scores = scores + mask.astype(mx.float32)
    probs = mx.softmax(scores, axis=-1).astype(values.dtype)
    out = probs @ values
    if rep > 1:
        out = out.reshape(b, hq, lq, d)
    return out


def _rows_apply(call: Callable[[mx.array], mx.array], x: mx.array, action: int) -> mx.array:
    """Run a linear layer over x's rows one by one (action _GEMV) or padded to `action` rows."""
    lead = x.shape[:-1]
    m = 1
    for dim in lead:
        m *= dim
    if action == _GEMV:
        if m <= 1:
            return call(x)
        flat = x.reshape(m, x.shape[-1])
        y = mx.concatenate([call(flat[i : i + 1]) for i in range(m)], axis=0)
    else:
        if m >= action:
            return call(x)
        flat = x.reshape(m, x.shape[-1])
        pad = mx.zeros((action - m, x.shape[-1]), dtype=x.dtype)
        y = call(mx.concatenate([flat, pad], axis=0))[:m]
    return y.reshape(*lead, y.shape[-1])


_dense: dict[int, tuple[weakref.ref[nn.Module], mx.array]] = {}


def _dense_weight(module: nn.Module) -> mx.array:
    """The module's weights dequantized, [out, in], made once per module and kept while the
    module lives (the verification of every round multiplies by them)."""
    key = id(module)
    entry = _dense.get(key)
    if entry is not None and entry[0]() is module:
        return entry[1]
    w = mx.dequantize(module["weight"], module["scales"], module.get("biases"),
                      group_size=module.group_size, bits=module.bits,
                      mode=getattr(module, "mode", "affine"))
    mx.eval(w)
    _dense[key] = (weakref.ref(module, lambda _r, k=key: _dense.pop(k, None)), w)
    return w


def release_dense(model: nn.Module) -> int:
    """Drop the dense copies of `model`'s layers (a calibration that found the copy dearer at
    every R: a 7B target's would hold 14 GB for nothing); returns how many were dropped. A
    later dense verification makes them again."""
    ids = _plan_for(model).dense or {}
    gone = [k for k in list(_dense) if k in ids]
    for k in gone:
        _dense.pop(k, None)
    return len(gone)


def dense_lost(times: dict[str, dict[int, float]]) -> bool:
    """Whether a calibration measured the dense copy and found it dearer than MLX's own
    kernels at every row count it timed both (then no "auto" run will take it)."""
    dense, auto = times.get("dense"), times.get("auto")
    if not dense or not auto:
        return False
    return all(dense[r] >= auto[r] for r in dense if r in auto and r > 1)


def _dense_apply(module: nn.Module, x: mx.array, how: str) -> mx.array:
    """What the quantized layer computes, as one dense matmul by its dequantized weights."""
    y = x @ _dense_weight(module).T
    if how == "__call__" and "bias" in module:
        y = y + module["bias"]
    return y


def dense_bytes(model: nn.Module) -> int:
    """Bytes a dequantized copy of `model`'s quantized layers takes (2 a weight: fp16/bf16)."""
    return sum(2 * s.k * s.n for _, _, _, s in linear_modules(model) if s.quantized)


def dense_fits(model: nn.Module, backend: BackendInfo) -> bool:
    """Whether a calibration should measure "dense" for `model` here: a GPU (on the CPU both
    are reference loops, and a first start's calibration time is what it has), a quantized
    target, and a copy within DENSE_SHARE of the device's known memory."""
    if backend.backend not in ("cuda", "metal") or not backend.memory_bytes:
        return False
    need = dense_bytes(model)
    return 0 < need <= DENSE_SHARE * backend.memory_bytes


def _wrap_method(original: Callable[..., mx.array], how: str = "__call__") -> Callable[..., mx.array]:
    """A Linear.__call__ / Embedding.as_linear that obeys this thread's plan for its instance."""

    def patched(self: nn.Module, x: mx.array) -> mx.array:
        plan = getattr(_tls, "linear", None)
        if plan is not None:
            action = plan.get(id(self))
            if action == _DENSE:
                return _dense_apply(self, x, how)
            if action is not None:
                return _rows_apply(lambda v: original(self, v), x, action)
        return original(self, x)

    patched.__wrapped__ = original  # type: ignore[attr-defined]
    return patched


def _wrap_sdpa(original: Callable[..., mx.array]) -> Callable[..., mx.array]:
    """mlx-lm's scaled_dot_product_attention, for multi-row queries plain or fused at bucketed
    shapes (core/dispatch/bucketed.py) when this thread asks."""

    def scaled_dot_product_attention(
        queries: mx.array, keys: Any, values: Any, cache: Any = None, scale: float = 1.0,
        mask: Any = None, sinks: Any = None, **kw: Any,
    ) -> mx.array:
        if queries.shape[-2] > 1 and sinks is None and not kw and not hasattr(cache, "bits"):
            if getattr(_tls, "plain", False):
                return plain_attention(queries, keys, values, scale=scale, mask=mask)
            if getattr(_tls, "bucketed", False):
                out = bucketed_attention(queries, keys, values, cache, scale, mask)
                if out is not None:
                    return out
        if sinks is not None:
            kw["sinks"] = sinks
        return original(queries, keys, values, cache, scale=scale, mask=mask, **kw)

    scaled_dot_product_attention.__wrapped__ = original  # type: ignore[attr-defined]
    return scaled_dot_product_attention


def _install(owner: Any, attr: str, wrap: Callable[[Any], Any]) -> None:
    """Replace owner.attr (a class attribute or a module-globals entry) by wrap(original);
    reference-counted so nested or concurrent users share one wrapper."""
    key = (id(owner), attr)
    with _install_lock:
        entry = _installed.get(key)
        if entry is not None:
            entry[4] += 1
            return
        if isinstance(owner, dict):
            had, raw = True, owner[attr]
            owner[attr] = wrap(raw)
        else:
            had = attr in owner.__dict__
            raw = owner.__dict__[attr] if had else getattr(owner, attr)
            setattr(owner, attr, wrap(raw))
        _installed[key] = [owner, attr, had, raw, 1]


def _uninstall(owner: Any, attr: str) -> None:
    key = (id(owner), attr)
    with _install_lock:
        entry = _installed.get(key)
        if entry is None:
            return
        entry[4] -= 1
        if entry[4] > 0:
            return
        del _installed[key]
        _, _, had, raw, _ = entry
        if isinstance(owner, dict):
            owner[attr] = raw
        elif had:
            setattr(owner, attr, raw)
        else:
            delattr(owner, attr)


class _ModelPlan:
    """What patching one model needs, found once: classes, module globals, layer ids, shapes."""

    def __init__(self, model: nn.Module) -> None:
        from mlx_lm.models import base

        mods = linear_modules(model)
        self.methods = tuple(dict.fromkeys((type(m), how) for _, m, how, _ in mods))
        self.ids = {id(m): s for _, m, _, s in mods}
        self.gemv: dict[int, int] = dict.fromkeys(self.ids, _GEMV)
        dense = [id(m) for _, m, _, s in mods if s.quantized]
        self.dense: dict[int, int] | None = dict.fromkeys(dense, _DENSE) if dense else None
        self._gemm: dict[BackendInfo, dict[int, int] | None] = {}
        globs = []
        for _, m in model.named_modules():
            g = getattr(sys.modules.get(type(m).__module__), "__dict__", None)
            if (
                g is not None
                and g.get("scaled_dot_product_attention") is base.scaled_dot_product_attention
            ):
                globs.append(g)
        self.sdpa_globals = tuple({id(g): g for g in globs}.values())

    def gemm(self, backend: BackendInfo) -> dict[int, int] | None:
        """Per layer id, the row count to pad to so its matrix kernel runs (None: nothing to pad)."""
        if backend not in self._gemm:
            plan = {}
            for i, s in self.ids.items():
                b = shape_boundary(dataclasses.replace(s, count=1, names=()), backend)
                if b is not None and b > 1:
                    plan[i] = b
            self._gemm[backend] = plan or None
        return self._gemm[backend]


_plans: dict[int, tuple[weakref.ref[nn.Module], _ModelPlan]] = {}


def _plan_for(model: nn.Module) -> _ModelPlan:
    entry = _plans.get(id(model))
    if entry is not None and entry[0]() is model:
        return entry[1]
    plan = _ModelPlan(model)
    key = id(model)
    _plans[key] = (weakref.ref(model, lambda _r, k=key: _plans.pop(k, None)), plan)
    return plan


class _VerificationPatches:
    """The context manager verification_patches returns when something is to be patched."""

    __slots__ = ("plan", "linear", "plain", "bucketed", "_saved", "_done")

    def __init__(
        self, plan: _ModelPlan, linear: dict[int, int] | None, plain: bool, bucketed: bool = False
    ) -> None:
        self.plan, self.linear, self.plain, self.bucketed = plan, linear, plain, bucketed
        self._saved: tuple[Any, Any, Any] = (None, False, False)
        self._done: list[tuple[Any, str]] = []

    def __enter__(self) -> None:
        done = self._done = []
        try:
            if self.linear is not None:
                for cls, how in self.plan.methods:
                    _install(cls, how, functools.partial(_wrap_method, how=how))
                    done.append((cls, how))
            if self.plain or self.bucketed:
                for g in self.plan.sdpa_globals:
                    _install(g, "scaled_dot_product_attention", _wrap_sdpa)
                    done.append((g, "scaled_dot_product_attention"))
        except BaseException:
            self._undo()
            raise
        self._saved = (getattr(_tls, "linear", None), getattr(_tls, "plain", False),
                       getattr(_tls, "bucketed", False))
        _tls.linear, _tls.plain, _tls.bucketed = self.linear, self.plain, self.bucketed

    def _undo(self) -> None:
        for owner, attr in reversed(self._done):
            _uninstall(owner, attr)
        self._done = []

    def __exit__(self, *exc: object) -> None:
        _tls.linear, _tls.plain, _tls.bucketed = self._saved
        self._undo()


_NULL = contextlib.nullcontext()


def default_verify_attention(backend: BackendInfo) -> str:
    """Without a calibration: fused on Metal and CPU, plain on CUDA (measured on the H200:
    MLX CUDA's fused multi-row attention costs ~50 ms per new shape, a cuDNN plan; asked at
    bucketed shapes (core/dispatch/bucketed.py) it is taken where a calibration measured it
    cheaper, `fused_cheaper`)."""
    return "plain" if backend.backend == "cuda" else "fused"


def resolve_verify_attention(
    verify_attention: str,
    rows: int,
    backend: BackendInfo | None = None,
    curve: VerifyCostCurve | None = None,
) -> str:
    """Which attention ("fused" or "plain") a verification of `rows` rows uses; "auto"
    prefers a calibration that measured both, else the backend's default, except on CUDA
    where the curve measured "fused" beside "auto" (plain there) and found it cheaper."""
    if verify_attention != "auto":
        return verify_attention
    if curve is not None and "plain" in curve.times and "fused" in curve.times:
        return "plain" if curve.t_verify(rows, "plain") < curve.t_verify(rows, "fused") else "fused"
    default = default_verify_attention(backend or current_backend())
    if default == "plain" and fused_cheaper(curve, rows):
        return "fused"  # a CUDA calibration measured the fused one cheaper at this R
    return default


def resolve_dispatch(dispatch: str, rows: int, curve: VerifyCostCurve | None = None) -> str:
    """The dispatch a verification of `rows` rows runs: "fastest" the cheapest measured,
    "auto" the dense copy where the curve measured it cheaper (else MLX's own), a forced
    family itself. One rule for the patches, the policy's price and the Kernels panel."""
    if dispatch == "fastest":
        return fastest_dispatch(curve, rows)
    if dispatch == "auto":
        return auto_dispatch(curve, rows)
    return dispatch


def draft_attention(model: nn.Module) -> Callable[[int], contextlib.AbstractContextManager[None]]:
    """rows -> the patches a draft's multi-row forward outside a verification enters (its
    multi-token first step, a lazy catch-up): the backend's default attention, so plain on
    CUDA, where MLX's fused multi-row attention is set up anew (~50 ms) at each new KV length
    and a draft runs such a forward at a new length every round; a no-op on Metal and the CPU.
    The logits stay the same up to rounding (core.primitives.cached_model.CachedModel.multi_row)."""
    return lambda rows: verification_patches(model, "auto", "auto", rows)


def verification_patches(
    model: nn.Module,
    dispatch: str = "auto",
    verify_attention: str = "auto",
    rows: int = 2,
    *,
    backend: BackendInfo | None = None,
    curve: VerifyCostCurve | None = None,
) -> contextlib.AbstractContextManager[None]:
    """Enter around the target's multi-row verification forward (never a single-row decode).

    dispatch "gemv": every linear layer of `model` runs its rows one at a time (vector kernel);
    "gemm": each layer pads its activation rows (not the token sequence: caches and attention
    are untouched) to the row count where its matrix kernel starts on `backend`, and drops the
    padding; "dense": each quantized layer multiplies by its dequantized copy; "auto": MLX
    decides, or the dense copy where `curve` measured it cheaper (`resolve_dispatch`). verify_attention "plain" swaps mlx-lm's fused attention for
    `plain_attention` on multi-row queries; "auto" resolves per `resolve_verify_attention`.
    Everything is restored on exit, exceptions included; entering costs a few attribute sets.
    """
    if dispatch not in DISPATCH:
        raise SettingsError(f"dispatch must be one of {', '.join(DISPATCH)}; got {dispatch!r}.")
    if verify_attention not in VERIFY_ATTENTION:
        raise SettingsError(
            f"verify_attention must be one of {', '.join(VERIFY_ATTENTION)}; got {verify_attention!r}."
        )
    if rows <= 1:
        return _NULL
    dispatch = resolve_dispatch(dispatch, rows, curve)
    b = backend or current_backend()
    attention = resolve_verify_attention(verify_attention, rows, b, curve)
    plain = attention == "plain"
    # MLX's fused attention on CUDA builds a cuDNN plan per shape: asked at bucketed shapes
    bucketed = attention == "fused" and b.backend == "cuda"
    if dispatch == "auto" and not plain and not bucketed:
        return _NULL
    plan = _plan_for(model)
    linear = {"gemv": plan.gemv, "dense": plan.dense}.get(dispatch)
    if dispatch == "gemm":
        linear = plan.gemm(b)
    if linear is None and not ((plain or bucketed) and plan.sdpa_globals):
        return _NULL
    return _VerificationPatches(plan, linear, plain, bucketed)
