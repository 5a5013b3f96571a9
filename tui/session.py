"""MLXSession: the real engine behind the app: core.models + core.engine + core.dispatch.

Built on the engine thread by EngineBridge (the factory is called there), so every MLX
object it creates belongs to that thread's stream. Only `decode` is called from the UI
thread, and it touches the tokenizer alone, never MLX.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from core.events import RoundEvent, RunSummary
from core.settings import MAX_K, Settings
from tui.bridge import CurveInfo, PairInfo, ShapeKernel


def curve_info(curve: Any) -> CurveInfo:
    """A core.dispatch.VerifyCostCurve as the plain numbers the Kernels panel draws."""
    rows = _curve_rows(curve)
    t_verify: dict[int, float] = {}
    for r in rows:
        with contextlib.suppress(Exception):
            t_verify[r] = float(curve.t_verify(r))
    boundary = None
    with contextlib.suppress(Exception):
        boundary = curve.boundary()
    draft = getattr(curve, "draft_step_s", None)
    return CurveInfo(t_verify=t_verify, draft_step_s=draft, boundary=boundary, raw=curve)


def _curve_rows(curve: Any) -> list[int]:
    for attr in ("rows", "measured_rows"):
        value = getattr(curve, attr, None)
        if value is not None and not callable(value):
            with contextlib.suppress(TypeError, ValueError):
                return sorted(int(r) for r in value)
    points = getattr(curve, "points", None)
    if isinstance(points, dict):
        return sorted(int(r) for r in points)
    return list(range(1, MAX_K + 2))


def _shape_kernels(predictor: Any, rows: int) -> tuple[ShapeKernel, ...]:
    """Group the predictor's per-shape answers into one line per distinct weight shape."""
    grouped: dict[tuple[str, str, str], int] = {}
    for pred in predictor.per_shape(rows):
        name = str(getattr(pred, "name", None) or getattr(pred, "layer", "") or "")
        name = name.split(".")[-1] if name else "?"
        shape = getattr(pred, "shape", None)
        if shape is None:
            k, n = getattr(pred, "k", None), getattr(pred, "n", None)
            shape = f"{k}x{n}" if k is not None else "?"
        elif isinstance(shape, tuple | list):
            shape = "x".join(str(x) for x in shape)
        bits = getattr(pred, "bits", None)
        if bits:
            shape = f"{shape} {bits}b"
        kernel = str(getattr(pred, "kernel", None) or getattr(pred, "family", "?"))
        key = (name, str(shape), kernel)
        grouped[key] = grouped.get(key, 0) + int(getattr(pred, "count", 1) or 1)
    return tuple(ShapeKernel(n, s, k, c) for (n, s, k), c in grouped.items())


class MLXSession:
    """Loads the pair with core.models and drives core.engine.Engine on the calling thread."""

    park_thread_on_close = True  # see EngineBridge._serve: an ended MLX thread aborts at exit

    def __init__(self, target_spec: str, draft_spec: str | None) -> None:
        from core.engine import Engine
        from core.models import load_pair

        self.pair = load_pair(target_spec, draft_spec)
        self.engine = Engine.from_pair(self.pair)
        self.tokenizer = self.pair.target.tokenizer
        self._decode_lock = threading.Lock()
        self.info = self._describe(target_spec, draft_spec)

    def _describe(self, target_spec: str, draft_spec: str | None) -> PairInfo:
        pair, engine = self.pair, self.engine
        backend, device = "cpu", ""
        with contextlib.suppress(Exception):
            from core.dispatch import backend_info

            b = backend_info()
            backend, device = b.backend, getattr(b, "device_name", "") or ""
        environment: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            from core.profile import record_environment

            environment = record_environment()
            if not device:
                device = environment.get("device_name", "")
                backend = environment.get("backend", backend)
        kernels: dict[int, tuple[ShapeKernel, ...]] = {}
        families: dict[int, str] = {}
        predictor = getattr(engine, "predictor", None)
        if predictor is not None:
            for rows in range(1, MAX_K + 2):
                with contextlib.suppress(Exception):
                    families[rows] = str(predictor.family(rows))
                with contextlib.suppress(Exception):
                    kernels[rows] = _shape_kernels(predictor, rows)
        random = pair.target.random_weights or bool(pair.draft and pair.draft.random_weights)
        return PairInfo(
            target_spec=target_spec,
            draft_spec=draft_spec,
            target_name=pair.target.name,
            draft_name=pair.draft.name if pair.draft is not None else None,
            backend=backend,
            device=device,
            random_weights=random,
            speculation_ok=engine.speculation_ok,
            speculation_reason=engine.speculation_reason,
            eos_ids=frozenset(pair.eos_ids),
            kernels=kernels,
            families=families,
            environment=environment,
        )

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        from core.models import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids without special tokens (a rejected draft may be EOS or <|im_start|>)."""
        with self._decode_lock:
            try:
                return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))
            except TypeError:  # a tokenizer without the keyword
                return str(self.tokenizer.decode(list(ids)))

    def generate(
        self,
        prompt_ids: list[int],
        settings: Settings,
        cancel: threading.Event,
        settings_source: Callable[[], Settings],
    ) -> Iterable[RoundEvent | RunSummary]:
        return self.engine.generate(prompt_ids, settings, cancel=cancel,
                                    settings_source=settings_source)

    def calibrate(self, settings: Settings) -> CurveInfo:
        from core import dispatch

        fn = getattr(dispatch, "calibrate", None)
        if fn is None:
            from core.errors import UserError

            raise UserError("Calibration is not available in this build (core.dispatch.calibrate).")
        curve = _call_calibrate(fn, self.pair, self.engine, settings)
        self.engine.set_cost_curve(curve)
        return curve_info(curve)

    def bench(
        self,
        prompt_ids: list[int],
        settings: Settings,
        progress: Callable[[float, str], None],
        cancel: threading.Event,
    ) -> Any:
        from core import bench

        def report(done: int, total: int, label: str) -> None:
            progress(done / total if total else 0.0, f"{label} ({done}/{total})")

        try:
            return bench.run_protocol(
                self.engine,
                prompt_ids,
                [settings],  # the protocol adds the target-only baseline itself
                tokens=settings.max_tokens,
                progress=report,
                cancel=cancel,
                decode=lambda ids: self.decode(ids),
                environment=self.info.environment or None,
            )
        except bench.BenchCancelled:
            return None


def _call_calibrate(fn: Callable[..., Any], pair: Any, engine: Any, settings: Settings) -> Any:
    """core.dispatch.calibrate with the arguments its signature asks for."""
    import inspect

    params = inspect.signature(fn).parameters
    available = {
        "pair": pair,
        "model": pair.target.model,
        "target": pair.target.model,
        "draft": pair.draft.model if pair.draft is not None else None,
        "draft_model": pair.draft.model if pair.draft is not None else None,
        "engine": engine,
        "settings": settings,
        "max_rows": settings.k_max + 1,
    }
    kwargs = {k: v for k, v in available.items() if k in params}
    return fn(**kwargs)
