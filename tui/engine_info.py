"""What the app knows about a loaded pair and a measured curve: plain data, safe on any thread.

The engine thread builds these (tui/session.py) and posts them in tui/messages.py's messages;
the widgets and screens read them. No Textual, no MLX: a test builds them by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ShapeKernel:
    """One weight shape of the target and the kernel its verification is predicted to use."""

    name: str  # e.g. "q_proj" or "mlp.up_proj"
    shape: str  # e.g. "576x576, 4-bit"
    kernel: str
    count: int = 1  # layers sharing the shape


@dataclass(frozen=True)
class PairInfo:
    """The loaded pair as the UI shows it: names, backend, and why speculation may be off."""

    target_spec: str
    draft_spec: str | None
    target_name: str
    draft_name: str | None
    backend: str = "cpu"
    device: str = ""
    random_weights: bool = False
    speculation_ok: bool = True
    speculation_reason: str | None = None
    eos_ids: frozenset[int] = frozenset()
    # rows verified -> per-shape kernel prediction; precomputed on the engine thread
    kernels: dict[int, tuple[ShapeKernel, ...]] = field(default_factory=dict)
    families: dict[int, str] = field(default_factory=dict)  # rows -> kernel family
    predicted_boundary: int | None = None  # R where most weights switch to a matrix kernel
    environment: dict[str, Any] = field(default_factory=dict)  # core.profile.record_environment()
    # core.models.identify.ModelIdentity per role ("target", "draft"); None: not known
    models: dict[str, Any] | None = None


@dataclass(frozen=True)
class CurveInfo:
    """A measured verify-cost curve: seconds per verification of R rows, and where GEMM starts."""

    t_verify: dict[int, float]  # rows -> seconds
    draft_step_s: float | None = None
    boundary: int | None = None  # measured: first R whose verify got cheaper (a GEMM took over)
    predicted_boundary: int | None = None  # where core.dispatch's rules put it
    kernels: dict[int, str] = field(default_factory=dict)  # rows -> predicted kernel family
    raw: Any = None  # the core.dispatch.VerifyCostCurve, when real
    kept_at: str | None = None  # reused from the curve cache: when it was measured (local time)


def decoded(decode: Callable[[Sequence[int]], str] | None, info: PairInfo | None,
            ids: Iterable[int]) -> str:
    """Ids as the loaded pair's text, end-of-sequence ids left out; "" without a pair, or for
    ids from another vocabulary (a recorded run shows no text rather than fail)."""
    if decode is None or info is None:
        return ""
    keep = [i for i in ids if i not in info.eos_ids]
    try:
        return str(decode(keep))
    except Exception:
        return ""
