"""Kernel dispatch: predict which matmul kernel a verification of R rows runs, measure its cost.

A verification of k drafts feeds k + 1 rows through every linear layer, and MLX switches from
a vector kernel to a matrix kernel at a per-shape row count, so the cost of a round is not
linear in k. One module per idea:

- backend: which machine MLX runs on (the facts its dispatch rules read);
- kernels: a model's linear shapes and MLX's dispatch rules for them (`KernelPredictor`);
- curve: the measured cost of R rows (`VerifyCostCurve`) and the cheaper mode per R;
- patches: forcing a kernel family or a plain attention for the verification pass only;
- calibrate: measuring the curve on this machine;
- curve_cache: a measured curve kept per pair and machine, reused;
- cli: `specdec-tui calibrate`.

The names below are the package's API; import them from `core.dispatch`. Monkeypatch a name
in the module that looks it up (e.g. `core.dispatch.kernels.predict_kernel`).
"""

from __future__ import annotations

from core.dispatch.backend import (
    BackendInfo,
    backend_info,
    backend_name,
    current_backend,
    mlx_device_query,
)
from core.dispatch.calibrate import CALIBRATION_MODES, calibrate
from core.dispatch.curve import (
    CalibrationCancelled,
    CalibrationError,
    VerifyCostCurve,
    fastest_dispatch,
    measured_elsewhere,
    read_curve_file,
    verify_cost,
)
from core.dispatch.kernels import (
    KernelPredictor,
    LinearShape,
    ShapePrediction,
    is_matrix_kernel,
    linear_shapes,
    predict_kernel,
    shape_boundary,
)
from core.dispatch.patches import (
    default_verify_attention,
    plain_attention,
    resolve_verify_attention,
    verification_patches,
)

__all__ = [
    "CALIBRATION_MODES",
    "BackendInfo",
    "CalibrationCancelled",
    "CalibrationError",
    "KernelPredictor",
    "LinearShape",
    "ShapePrediction",
    "VerifyCostCurve",
    "backend_info",
    "backend_name",
    "calibrate",
    "current_backend",
    "default_verify_attention",
    "fastest_dispatch",
    "is_matrix_kernel",
    "linear_shapes",
    "mlx_device_query",
    "plain_attention",
    "predict_kernel",
    "resolve_verify_attention",
    "shape_boundary",
    "verification_patches",
    "measured_elsewhere",
    "read_curve_file",
    "verify_cost",
]
