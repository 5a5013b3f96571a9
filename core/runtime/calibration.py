"""A run's curve: the kept one for this pair and machine, else measured now after a compile
warm-up of every row it times, and kept for the next start.

It sits in the runtime, above core/dispatch/, because the warm-up it runs first
(core/runtime/warmup.py) drives the decode loop's own forwards; the cache it reads and writes
(core/dispatch/curve_cache.py) and the calibration (core/dispatch/calibrate.py) stay below.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.dispatch.curve import VerifyCostCurve
from core.dispatch.curve_cache import (
    KeptCurve,
    calibration_rows,
    capped,
    engine_key,
    key_path,
    load_curve,
    modes_here,
    save_curve,
)


@dataclass
class CurveResult:
    """A curve for a run: reused from the cache (`kept`) or measured now (`warmup`: the
    compile warm-up that ran before its first timed call), with notices to show."""

    curve: VerifyCostCurve
    kept: KeptCurve | None = None
    warmup: Any = None
    notices: tuple[str, ...] = ()


def curve_for(
    engine: Any,
    settings: Any,
    *,
    context: int = 128,
    progress: Any = None,
    cancel: Any = None,
    remeasure: bool = False,
    label: str | None = None,
    folder: Path | None = None,
    max_rows: int | None = None,
) -> CurveResult:
    """The curve a run of `settings` prices with: the kept one for this pair and machine when
    there is one (unless `remeasure`: the app's `c`), else measured now, after a warm-up of
    every row it times (so no sample includes a compile), and kept for the next start.

    Sets it on the engine and names the models on it. `cancel` stops a measurement after the
    forward under way (core.dispatch.curve.CalibrationCancelled); nothing is kept then.
    `max_rows` (a narrow start, core/runtime/warm_start.py) measures at most that many rows,
    its prefills in the settings' chunks, so the calibration compiles no GEMM kernel; a kept
    curve that short serves only runs whose k_max + 1 it covers."""
    from core.dispatch.calibrate import calibrate
    from core.dispatch.row_plan import calibration_context
    from core.runtime.warmup import warm_up

    key = engine_key(engine, settings)
    notices: list[str] = []
    if not remeasure:
        found = load_curve(key, settings, folder)
        if found.notice:
            notices.append(found.notice)
        if found.kept is not None:
            curve = found.kept.curve
            engine.set_cost_curve(curve)
            return CurveResult(curve, kept=found.kept, notices=tuple(notices))
    target, draft = engine.target_model, getattr(engine, "draft_model", None)
    rows = calibration_rows(settings, target)
    if max_rows is not None:
        rows = capped(rows, max_rows)
    context = calibration_context(context)  # 16 at most on the CPU: row_plan.py says why
    modes = modes_here(settings, engine)
    name = label or _target_name(engine)
    chunk = settings.prefill_chunk
    # the plan's rows and nothing else: each timed row count compiled before it is timed
    record = warm_up(target, draft, vocab=engine.vocab_size, rows=rows,
                     prompt_tokens=context, chunk=chunk, modes=modes,
                     compiled_draft=settings.step != "eager", label=name)
    curve = calibrate(target, draft, rows=rows, repeats=3, context=context, progress=progress,
                      modes=modes, step=settings.step, cancel=cancel,
                      chunk=chunk)
    models = getattr(engine, "models", None) or {}
    for role in ("target", "draft"):
        ident = models.get(role)
        if ident is not None:
            setattr(curve, f"{role}_spec", ident.spec)
            setattr(curve, f"{role}_name", ident.name or ident.spec)
    engine.set_cost_curve(curve)
    try:
        save_curve(key, curve, folder)
    except OSError as exc:
        where = key_path(key, folder).parent if key is not None else "the cache folder"
        notices.append(f"Could not keep the calibration in {where} ({exc.strerror or exc}); "
                       "the next start measures it again.")
    return CurveResult(curve, warmup=record, notices=tuple(notices))


def _target_name(engine: Any) -> str:
    models = getattr(engine, "models", None) or {}
    ident = models.get("target")
    return (ident.name or ident.spec) if ident is not None else "this model"
