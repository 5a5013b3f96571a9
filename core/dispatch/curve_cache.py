"""Calibrate once per pair and machine: verify-cost curves kept in the user cache folder.

Why: the cost-aware policy needs a curve, and measuring one takes about 40 s on a CPU and a
full compile warm-up on a fresh GPU. Every app start and every `chat` measured it again,
although the pair, the machine and MLX were those of yesterday. A curve is decided by both
models' weights, the backend and device, the MLX version, the calibration's modes (the
dispatch) and the sampling view the acceptance rule prices with; a kept curve is reused only
when every one of those is the same (`curve_key`), else it is a miss and is measured again.

Files live in `cache_dir()/curves/` (platformdirs' user cache folder, or $SPECDEC_TUI_CACHE as
for models), one per key, named by the key's digest. Each is a file anyone could have put
there: it is read within core/io/untrusted.py's bounds, and a damaged one, one whose key is
not the one asked for, or one that fails the curve's own checks is ignored with a notice (a
sentence naming it), never an error: the caller measures and writes a good one over it.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.dispatch.curve import CalibrationError, VerifyCostCurve
from core.dispatch.row_plan import plan_need
from core.io.kept import (  # noqa: F401 (CURVES_ENV, curves_dir: where kept curves live)
    CURVES_ENV,
    KeptFileError,
    curves_dir,
    mapping,
    number,
    read_kept,
)

FORMAT = "specdec-tui curve cache"
VERSION = 1
FOLDER = "curves"
CURVE_MAX_BYTES = 16 << 20  # a curve is a few KB: 33 row counts per mode
# The fields of a ModelIdentity that pin its weights and their layout (not its spec: the same
# file under another path is the same model; a self-draft's derivation is in kind and bits).
IDENTITY_FIELDS = ("kind", "architecture", "parameters", "layers", "bits", "group_size",
                   "tensor_bits", "sha256", "revision", "shape", "seed")


def identity_key(identity: Any) -> dict[str, Any] | None:
    """What of a model's identity decides a curve; None when nothing pins its weights (no
    sha256 and no shape and seed: an unknown model is never cached)."""
    if identity is None:
        return None
    d = identity.to_dict() if hasattr(identity, "to_dict") else dict(identity)
    if not d.get("sha256") and d.get("shape") is None:
        return None
    out = {k: d.get(k) for k in IDENTITY_FIELDS}
    out["tensor_bits"] = [list(x) for x in (d.get("tensor_bits") or [])]
    return out


def calibration_modes(settings: Any, dense: bool = False, fused: bool = False) -> tuple[str, ...]:
    """The modes a calibration for `settings` measures: dispatch=fastest needs the padded one;
    `dense` (patches.dense_fits: a GPU, a quantized target whose dequantized copy fits) adds
    the dense copy for "auto" and "fastest", which then run it where it is cheaper; a forced
    "dense" is measured beside MLX's own, so its price is its own. `fused` (CUDA, where
    "auto" verifies with the plain attention) adds MLX's fused attention for
    verify_attention "auto", which then runs it where it measured cheaper: on the H200 the
    mlx-lm peer's 7B shape ran 1.05x with it against 0.94x plain
    (docs/benchmarks/archive/never-slower-runs.md, 2026-12-01), against ~50 ms a new KV length measured in
    November; the calibration's advancing lengths measure that set-up."""
    d = settings.dispatch
    modes = ("auto", "gemm") if d == "fastest" else ("auto", "dense") if d == "dense" else ("auto",)
    if dense and d in ("auto", "fastest"):
        modes += ("dense",)
    if fused and getattr(settings, "verify_attention", "auto") == "auto":
        modes += ("fused",)
    if getattr(settings, "step", "eager") != "eager":
        modes += ("compiled",)  # the compiled forward's rows: what step auto decides by
    return modes


def modes_here(settings: Any, target_model: Any, backend: Any = None) -> tuple[str, ...]:
    """`calibration_modes` for `settings` on this target and machine (the dense copy where
    it fits, the fused attention on CUDA): what every calibration here times."""
    return calibration_modes(settings, target_dense(target_model, backend), target_fused(backend))


def curve_missing(curve: Any, settings: Any) -> bool:
    """Whether a run of `settings` lacks the curve it reads: none, or one without the mode
    its dispatch needs (fastest: the padded kernel; dense: the dense copy), or without the
    compiled forward's rows a step other than eager prices and decides by, or, for a tree
    source, one short of the tree's rows (a run switched to the tree, the app's `d`, whose
    curve was measured for a chain: the tree would be capped at the chain's k_max nodes)."""
    need = {"fastest": "gemm", "dense": "dense"}.get(settings.dispatch)
    compiled = getattr(settings, "step", "eager") != "eager"
    return curve is None or (need is not None and need not in curve.modes) or (
        compiled and "compiled" not in curve.modes) or (
        tree_run(settings) and (not curve.times or max(curve.rows) < plan_need(0, tree=True)))


def tree_run(settings: Any) -> bool:
    """Whether a run of `settings` drafts token trees (core/drafting/tree.py), whose widest
    verification is the tree's, not the chain's k_max + 1 (core/dispatch/row_plan.py)."""
    return getattr(settings, "draft_source", None) == "tree"


def curve_wanted(curve: Any, settings: Any) -> bool:
    """Whether a speculative run of `settings` calibrates before its first round: the
    cost-aware policy prices with a curve, dispatch=fastest picks by one, and on CUDA
    verify_attention "auto" chooses the fused or the plain attention by one (`target_fused`);
    step "auto" decides by one; each only while `curve_missing`."""
    reads = settings.policy == "cost-aware" or settings.dispatch == "fastest" or (
        getattr(settings, "step", "eager") == "auto")
    cuda = getattr(settings, "verify_attention", "auto") == "auto" and target_fused()
    return (reads or cuda) and curve_missing(curve, settings)


def target_fused(backend: Any = None) -> bool:
    """Whether a calibration here measures the fused attention beside "auto": on CUDA, whose
    "auto" is the plain one (elsewhere "auto" is already fused)."""
    from core.dispatch.backend import current_backend

    return getattr(backend or current_backend(), "backend", "") == "cuda"


def target_dense(engine_or_model: Any, backend: Any = None) -> bool:
    """Whether a calibration of this target on this machine measures the dense copy."""
    from core.dispatch.backend import current_backend
    from core.dispatch.patches import dense_fits

    model = getattr(engine_or_model, "target_model", engine_or_model)
    if model is None:
        return False
    try:
        return dense_fits(model, backend or current_backend())
    except (AttributeError, TypeError, ValueError):  # a fake or unusual model: MLX's own only
        return False


def curve_key(models: dict[str, Any] | None, backend: Any, mlx_version: str,
              settings: Any, dense: bool = False, fused: bool = False) -> dict[str, Any] | None:
    """Everything that decides a calibration for `settings` on this pair and machine; None
    when the pair cannot be pinned (then nothing is read or kept). `dense`: the calibration
    measures the dense copy too, `fused` the fused attention (`calibration_modes`)."""
    models = models or {}
    target = identity_key(models.get("target"))
    if target is None:
        return None
    draft_id = models.get("draft")
    draft = identity_key(draft_id)
    if draft_id is not None and draft is None:
        return None
    return {
        "target": target,
        "draft": draft,
        "backend": str(backend.backend),
        "device": str(backend.device_name),
        "architecture": str(getattr(backend, "architecture", "")),
        "mlx": str(mlx_version),
        "modes": list(calibration_modes(settings, dense, fused)),
        "step": str(getattr(settings, "step", "eager")),
        "sampling": "greedy" if settings.greedy else "sampled",
    }


def key_path(key: dict[str, Any], folder: Path | None = None) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return (folder or curves_dir()) / f"curve-{digest[:32]}.json"


@dataclass(frozen=True)
class KeptCurve:
    """A curve found in the cache, and when it was measured (seconds since the epoch)."""

    curve: VerifyCostCurve
    measured_at: float
    path: Path

    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.measured_at))


@dataclass(frozen=True)
class Lookup:
    """What a lookup found: the kept curve (None: a miss) and a notice for a file ignored."""

    kept: KeptCurve | None
    notice: str | None = None
    path: Path | None = None


def covers(curve: VerifyCostCurve, settings: Any, modes: Any = None) -> bool:
    """Whether the curve measured every row count a run of `settings` can verify, in each mode
    it needs (`modes`, else `calibration_modes(settings)`; a curve measured for k_max = 8
    does not price k = 15, one measured for chains does not price a tree's 64 rows)."""
    need = plan_need(getattr(settings, "k_max", 0), tree_run(settings))
    return all(mode in curve.times and max(curve.times[mode], default=0) >= need
               for mode in (modes or calibration_modes(settings)))


def load_curve(key: dict[str, Any] | None, settings: Any, folder: Path | None = None) -> Lookup:
    """The kept curve for `key`, or a miss. The file is read by core.io.kept.read_kept (bounded,
    never blocking) and every number in it checked (`_check_kept`); one that fails is set
    aside with a notice and measured again, never trusted, never fatal."""
    if key is None:
        return Lookup(None)
    path = key_path(key, folder)
    notices: list[str] = []
    found = read_kept(path, "kept curve", _check_kept, CURVE_MAX_BYTES,
                      then="will be measured again", notices=notices)
    if found is None:
        return Lookup(None, notices[0] if notices else None, path)
    doc_key, curve, measured_at = found
    if doc_key != key:
        return Lookup(None, f"The kept curve {path} was measured for another pair or machine; "
                            "it is ignored and will be measured again.", path)
    if not covers(curve, settings, key.get("modes")):
        return Lookup(None, path=path)  # measured for shorter proposals: measured again, kept
    return Lookup(KeptCurve(curve, measured_at, path), path=path)


# A date a kept curve can carry, in seconds since the epoch: before the year 5000 (a NaN, inf
# or 1e300 date ended every `chat` in a traceback where it is shown).
_LATEST = 95_617_584_000.0


def _check_kept(doc: Any) -> tuple[Any, VerifyCostCurve, float]:
    """A kept curve's document: (its key, the curve, when it was measured), each checked."""
    d = mapping(doc, "it")
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        raise KeptFileError("it is not a curve this version of specdec-tui kept")
    measured_at = number(d.get("measured_at"), "its measured_at", low=0.0, high=_LATEST)
    try:
        curve = VerifyCostCurve.from_dict(d.get("curve"), "the curve")
    except CalibrationError as exc:
        raise KeptFileError(str(exc).rstrip(".")) from None
    return d.get("key"), curve, measured_at


def save_curve(key: dict[str, Any] | None, curve: VerifyCostCurve,
               folder: Path | None = None) -> Path | None:
    """Keep `curve` under `key` (atomically, replacing any older one); None when the pair
    cannot be pinned. An unwritable cache folder raises OSError for the caller's sentence."""
    if key is None:
        return None
    from core.io.atomic import write_atomic

    path = key_path(key, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": FORMAT, "version": VERSION, "key": key, "measured_at": curve.created,
           "curve": curve.to_dict()}
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path


def engine_key(engine: Any, settings: Any) -> dict[str, Any] | None:
    """curve_key for an Engine's pair on this machine and MLX (None when sharded: every rank
    measures, so none can skip a collective the others run)."""
    if getattr(engine, "spmd", None) is not None:
        return None
    import mlx.core as mx

    from core.dispatch.backend import current_backend

    backend = current_backend()
    return curve_key(getattr(engine, "models", None), backend, mx.__version__, settings,
                     target_dense(engine, backend), target_fused(backend))


def calibration_rows(settings: Any, target_model: Any, backend: Any = None) -> list[int]:
    """The row counts a calibration for `settings` times on this target and machine: the plan
    of core/dispatch/row_plan.py (on a GPU every R up to k_max + 1; on the CPU 1..9, both
    sides of every predicted kernel change, always k_max + 1 capped at MAX_K + 1): a first start
    at k_max = 32 then times 10 row counts on the CPU, not 33. A tree source's run reaches
    the tree's 64 rows (`tree_run`; every row to 64 on a GPU, 64 beside the CPU's plan).
    The engine's own calibration (core/decode/engine.py) and `curve_for` both read it."""
    from core.dispatch.row_plan import plan_for

    return plan_for(settings.k_max, target_model, backend, tree_run(settings))


def quick_curve(target_model: Any, draft_model: Any, settings: Any, context: int) -> Any:
    """The curve a round waits on when no caller calibrated first (Engine's _ensure_curve): the
    same row plan, modes and context cap as `curve_for`, its prefill in the run's chunks (a
    narrow start's keep every forward below the GEMM kernels), no warm-up, nothing kept."""
    from core.dispatch.calibrate import calibrate
    from core.dispatch.row_plan import calibration_context

    return calibrate(target_model, draft_model, rows=calibration_rows(settings, target_model),
                     repeats=3, context=calibration_context(max(context, 16)),
                     modes=modes_here(settings, target_model),
                     step=settings.step,
                     chunk=getattr(settings, "prefill_chunk", None))


def capped(rows: list[int], max_rows: int) -> list[int]:
    """A plan kept to at most `max_rows` rows (a narrow start): its rows below the cap, and
    the cap itself when the plan reached past it, so the curve still reaches what it may."""
    top = max(1, min(max(rows), max_rows))
    return sorted({r for r in rows if r < top} | {top})
