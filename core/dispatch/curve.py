"""What a verification of R rows costs here, as measured: the curve and how to read it.

`calibrate` (core/dispatch/calibrate.py) fills a VerifyCostCurve; the cost-aware policy prices
rounds with `t_verify(rows)` and `draft_step_s`; `auto_dispatch`, `fastest_dispatch` and
`verify_cost` read the cheaper of the measured kernel families per row count (the dequantized
copy for `dispatch = auto`, every measured family for `dispatch = fastest`).
"""

from __future__ import annotations

import bisect
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.io.untrusted import JSON_MAX_BYTES, UntrustedFileError, check_depth, read_bounded_xz

# A measured boundary is the first R whose verification costs this fraction less than the
# previous measured R: a 10% drop is far above run-to-run noise of a median, and far below
# the ~2x drop at a real dispatch boundary (H200: 33.0 ms at 7 rows, 16.3 ms at 8).
BOUNDARY_DROP = 0.10


class CalibrationError(UserError, ValueError):
    """A calibration request or a stored curve a user gave that cannot be used (one sentence)."""


class CalibrationCancelled(CalibrationError):
    """A calibration stopped at a user's request (Esc in the app) before it measured all."""


@dataclass
class VerifyCostCurve:
    """Seconds of one target forward over R rows (median, KV length advancing), per mode.

    The cost-aware policy reads `t_verify(rows)` and `draft_step_s`; the Kernels panel and
    `specdec-tui calibrate` show the curve, its boundary and the predicted kernels.
    """

    backend: str
    device_name: str
    context_len: int
    times: dict[str, dict[int, float]]  # mode -> {rows: median seconds}
    draft_step_s: float | None = None  # one draft single-token step (None: no draft measured)
    kernels: dict[int, str] = field(default_factory=dict)  # rows -> predicted family
    role_kernels: dict[int, dict[str, str]] = field(default_factory=dict)
    predicted_boundary: int | None = None  # KernelPredictor.forward_boundary()
    created: float = field(default_factory=time.time)
    architecture: str = ""
    repeats: int = 0
    context_end: int = 0  # KV length after the last timed call
    calls: int = 0  # target forwards run (each advanced the KV length by one)
    # A sampled draft step (softmax over the vocabulary and a draw, as the engine drafts for the
    # lossless and mentored rules) costs more than a greedy one: 4.7 against 3.4 ms for a 0.5B
    # draft on an H200, the term the prediction missed at k = 31 (docs/benchmarks/archive/h200-edition3.md).
    draft_step_sampled_s: float | None = None
    # The acceptance on the device per verified row count ("sample" phase), greedy and sampled.
    accept_s: dict[str, dict[int, float]] = field(default_factory=dict)
    sampling: str | None = None  # the view for_sampling() chose: "greedy" | "sampled" | None
    # The models it was measured on (LoadedModel spec and name; "" when unknown, e.g. a curve
    # written before they were recorded): `bench --curve` warns when they are not the run's.
    target_spec: str = ""
    target_name: str = ""
    draft_spec: str = ""
    draft_name: str = ""
    # The step the draft's chain was timed with and the run prices ("eager" | "compiled"): a
    # curve measured under step auto or compiled also times the target's rows compiled
    # (mode "compiled"), and auto takes the compiled step where `compiled_pays`.
    step: str = "eager"

    @property
    def modes(self) -> list[str]:
        return list(self.times)

    @property
    def rows(self) -> list[int]:
        """Row counts measured for the default mode."""
        return sorted(self.times[self._mode(None)])

    def _mode(self, mode: str | None) -> str:
        if mode is None or (mode == "auto" and "auto" not in self.times):
            if not self.times:
                raise CalibrationError("The calibration holds no measurements.")
            return "auto" if "auto" in self.times else next(iter(self.times))
        if mode not in self.times:
            raise KeyError(f"mode {mode!r} was not calibrated (have: {', '.join(self.times)})")
        return mode

    def t_verify(self, rows: int, mode: str = "auto") -> float:
        """Seconds for a verification of `rows` rows: the measured median where measured,
        else linear interpolation between (or extrapolation from) the two nearest measured
        row counts, floored at 0. "auto" falls back to the first mode when it was not measured."""
        table = self.times[self._mode(mode)]
        if not table:
            raise CalibrationError("The calibration holds no measurements.")
        return interpolate(table, rows)

    def for_sampling(self, greedy: bool) -> VerifyCostCurve:
        """The curve as a run with this sampling pays it: `draft_step_s` becomes the sampled
        step where one was measured, and t_accept reads that rule's acceptance costs."""
        import dataclasses

        kind = "greedy" if greedy else "sampled"
        step = self.draft_step_s
        if not greedy and self.draft_step_sampled_s is not None:
            step = self.draft_step_sampled_s
        return dataclasses.replace(self, draft_step_s=step, sampling=kind)

    def t_accept(self, rows: int) -> float:
        """Seconds of the acceptance over `rows` verified rows (0.0 where it was not measured:
        old curves, or a view not chosen with for_sampling)."""
        table = self.accept_s.get(self.sampling or "greedy")
        return interpolate(table, rows) if table else 0.0

    def boundary(self, mode: str = "auto") -> int | None:
        """The first measured R whose cost is BOUNDARY_DROP (10%) below the previous measured R's:
        where verifying more rows got cheaper, i.e. a matrix kernel took over. None if never."""
        try:
            table = self.times[self._mode(mode)]
        except (KeyError, CalibrationError):
            return None
        rs = sorted(table)
        for prev, r in zip(rs, rs[1:], strict=False):
            if table[r] < (1.0 - BOUNDARY_DROP) * table[prev]:
                return r
        return None

    @property
    def prediction_agrees(self) -> bool:
        """Whether the measured boundary of the default mode is the predicted one.

        A predicted boundary beyond the measured rows cannot be seen, so it agrees with none.
        """
        measured = self.boundary()
        predicted = self.predicted_boundary
        if predicted is not None and self.rows and predicted > max(self.rows):
            predicted = None
        return measured == predicted

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: row counts become strings; the derived boundary is included for readers."""
        return {
            "version": 1,
            "backend": self.backend,
            "device_name": self.device_name,
            "architecture": self.architecture,
            "context_len": self.context_len,
            "context_end": self.context_end,
            "calls": self.calls,
            "models": {"target": self.target_spec, "target_name": self.target_name,
                       "draft": self.draft_spec, "draft_name": self.draft_name},
            "repeats": self.repeats,
            "created": self.created,
            "draft_step_s": self.draft_step_s,
            "draft_step_sampled_s": self.draft_step_sampled_s,
            "step": self.step,
            "accept_s": {
                m: {str(r): t for r, t in sorted(tab.items())} for m, tab in self.accept_s.items()
            },
            "times": {
                m: {str(r): t for r, t in sorted(tab.items())} for m, tab in self.times.items()
            },
            "kernels": {str(r): k for r, k in sorted(self.kernels.items())},
            "role_kernels": {str(r): dict(v) for r, v in sorted(self.role_kernels.items())},
            "predicted_boundary": self.predicted_boundary,
            "boundary": self.boundary(),
            "prediction_agrees": self.prediction_agrees,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "The stored calibration") -> VerifyCostCurve:
        """Inverse of to_dict; a malformed document raises CalibrationError, one sentence that
        starts with `where` and says what is wrong in words (never a Python repr)."""
        if not isinstance(d, Mapping):
            raise CalibrationError(f"{where} is not a curve: it holds no JSON object.")
        for key in ("times", "backend", "context_len"):
            if key not in d:
                raise CalibrationError(f"{where} is malformed: it has no {key!r}.")
        try:
            if not isinstance(d["times"], Mapping):
                raise TypeError("'times' is not an object of modes")
            times: dict[str, dict[int, float]] = {}
            for m, tab in d["times"].items():
                if not isinstance(tab, Mapping):
                    raise TypeError(f"the times of mode {m!r} are not an object of rows")
                times[str(m)] = {_rows(r): _seconds(t, f"the time of {m} at {r} rows")
                                 for r, t in tab.items()}
            draft = d.get("draft_step_s")
            sampled = d.get("draft_step_sampled_s")
            pb = d.get("predicted_boundary")
            models = d.get("models") or {}
            if not isinstance(models, Mapping):
                raise TypeError("'models' is not an object")
            return cls(
                backend=str(d["backend"]),
                device_name=str(d.get("device_name", "")),
                context_len=int(d["context_len"]),
                times=times,
                draft_step_s=None if draft is None else _seconds(draft, "draft_step_s"),
                kernels={_rows(r): str(k) for r, k in d.get("kernels", {}).items()},
                role_kernels={
                    _rows(r): {str(a): str(b) for a, b in v.items()}
                    for r, v in d.get("role_kernels", {}).items()
                },
                predicted_boundary=None if pb is None else int(pb),
                created=_seconds(d.get("created", 0.0), "created"),
                architecture=str(d.get("architecture", "")),
                repeats=int(d.get("repeats", 0)),
                context_end=int(d.get("context_end", 0)),
                calls=int(d.get("calls", 0)),
                draft_step_sampled_s=None if sampled is None
                else _seconds(sampled, "draft_step_sampled_s"),
                accept_s={str(m): {_rows(r): _seconds(t, f"the accept time of {m} at {r} rows")
                                   for r, t in tab.items()}
                          for m, tab in (d.get("accept_s") or {}).items()},
                target_spec=str(models.get("target") or ""),
                target_name=str(models.get("target_name") or ""),
                draft_spec=str(models.get("draft") or ""),
                draft_name=str(models.get("draft_name") or ""),
                step="compiled" if d.get("step") == "compiled" else "eager",
            )
        except CalibrationError as exc:
            raise CalibrationError(f"{where} is malformed: {exc}") from None
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            detail = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
            raise CalibrationError(f"{where} is malformed: {detail}.") from None

    def models_differ(self, target_name: str, draft_name: str | None) -> str | None:
        """A sentence when this curve was measured on other models than these (by name), else
        None; a curve that recorded no models says nothing either way."""
        if not self.target_name:
            return None
        other_target = self.target_name != target_name
        other_draft = bool(self.draft_name) and draft_name is not None \
            and self.draft_name != draft_name
        if not (other_target or other_draft):
            return None
        measured = self.target_name + (f" / {self.draft_name}" if self.draft_name else "")
        used = target_name + (f" / {draft_name}" if draft_name else "")
        return (f"The curve was measured on {measured}, not on {used}: its prices are those "
                "models', so the k choices and predictions may not fit this pair.")


def _rows(r: Any) -> int:
    """A row count key ("8" in JSON), positive."""
    n = int(r)
    if n < 1:
        raise CalibrationError(f"row count {r!r} is not a positive integer.")
    return n


def _seconds(value: Any, what: str) -> float:
    """A measured time: a finite number of seconds, not negative (NaN priced k as 'inf')."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalibrationError(f"{what} is not a number.")
    t = float(value)
    if not math.isfinite(t) or t < 0:
        raise CalibrationError(f"{what} is {value}, not a finite, non-negative number of seconds.")
    return t


def auto_dispatch(curve: VerifyCostCurve | None, rows: int) -> str:
    """The dispatch "auto" runs for `rows` rows: "dense" (the target's dequantized copy, one
    dense matmul per layer) where the curve measured it cheaper than MLX's own kernels, else
    "auto" (MLX decides; also without a curve, or where "dense" was not measured)."""
    if curve is None or "dense" not in curve.times or "auto" not in curve.times:
        return "auto"
    return "dense" if curve.t_verify(rows, "dense") < curve.t_verify(rows, "auto") else "auto"


def fused_cheaper(curve: Any, rows: int) -> bool:
    """Whether a CUDA curve measured MLX's fused multi-row attention ("fused") cheaper than
    the plain attention its "auto" mode runs there (core/dispatch/patches.py
    default_verify_attention): then "auto" verifies `rows` rows with the fused one."""
    times = getattr(curve, "times", None) or {}
    if getattr(curve, "backend", "") != "cuda" or "fused" not in times or "auto" not in times:
        return False
    return curve.t_verify(rows, "fused") < curve.t_verify(rows, "auto")


COMPILED = "compiled"  # the mode whose rows ran the compiled forward (core/primitives/compiled.py)


def compiled_pays(curve: Any) -> bool:
    """Whether the curve measured the compiled forward no slower than the eager one: over the
    rows it timed both, their summed prices (the eager one as `verify_cost` prices it)."""
    times = getattr(curve, "times", None) or {}
    if COMPILED not in times or not times[COMPILED] or len(times) < 2:
        return False
    eager = verify_cost(curve, "auto", step="eager")
    rows = sorted(times[COMPILED])
    return sum(times[COMPILED][r] for r in rows) <= sum(eager(r) for r in rows)


def run_step(setting: str, curve: Any) -> str:
    """The step a run of the `step` setting takes: "eager" and "compiled" as named; "auto"
    the compiled step where the pair's curve on this machine measured it no slower (the
    curve's own `step`), else eager (also without a curve)."""
    if setting != "auto":
        return setting
    return COMPILED if getattr(curve, "step", "eager") == COMPILED else "eager"


def one_row_price(curve: VerifyCostCurve) -> float:
    """A plain target step's price: the least of the modes' one-row measurements. No patch
    applies to one row (core/dispatch/patches.py `verification_patches`), so each mode timed
    the same forward there and their spread is the host's: on the H200 "auto", timed first
    after a 33-row call, read 5.5-18 ms where the same forward in the next modes read 4.0-7.4
    (2026-12-02's curves: docs/benchmarks/archive/never-slower-runs.md)."""
    ones = [interpolate(tab, 1) for mode, tab in (getattr(curve, "times", None) or {}).items()
            if tab and mode != COMPILED]
    return min(ones) if ones else curve.t_verify(1)


def _auto_price(curve: VerifyCostCurve, rows: int, step: float) -> float:
    """What "auto" pays at `rows` (more than one): MLX's own kernels with the backend's
    attention, less what the dense copy and (on CUDA) the fused attention each save where
    measured cheaper. The two choices are measured apart (each against "auto") and their
    savings added: a forward's linear layers and its attention are separate kernels. No
    verification costs less than a plain step (`step`, `one_row_price`): two savings read off
    a noisy "auto" added up to more than all of it, and a plain step priced at 0-0.7 ms
    against a measured 4-5 let no round pay on the pasted refactor."""
    t = curve.t_verify(rows, "auto")
    saved = 0.0
    if "dense" in curve.times:
        saved += max(t - curve.t_verify(rows, "dense"), 0.0)
    if fused_cheaper(curve, rows):
        saved += t - curve.t_verify(rows, "fused")
    return max(t - saved, step)


def fastest_dispatch(curve: VerifyCostCurve | None, rows: int) -> str:
    """The dispatch for `rows` rows under `dispatch = fastest`: the cheapest measured of MLX's
    own choice ("auto"), padding to the matrix kernel ("gemm") and the dequantized copy
    ("dense"); "auto" without a curve or without an "auto" measurement."""
    if curve is None or "auto" not in curve.times:
        return "auto"
    best, best_t = "auto", curve.t_verify(rows, "auto")
    for mode in ("gemm", "dense"):
        if mode in curve.times:
            t = curve.t_verify(rows, mode)
            if t < best_t:
                best, best_t = mode, t
    return best


def verify_cost(curve: VerifyCostCurve, dispatch: str,
                step: str | None = None) -> Callable[[int], float]:
    """t_verify(rows) as the run's step and dispatch run it. The compiled step (`step`, else
    the curve's own) is priced by its own measurements, at every row count, one row included
    (no dispatch applies to its graph). Eager: "fastest" and "auto" take the mode their
    dispatch runs at that R (`fastest_dispatch`, `auto_dispatch`), a forced family its own
    measurements where it has them, anything else the default mode. The policy prices a
    round with what its verification will run. One row is a plain step under every setting
    (no patch applies to it): `one_row_price`, the least of the eager modes' timings of it."""
    times = getattr(curve, "times", None) or {}
    if (step or getattr(curve, "step", "eager")) == COMPILED and times.get(COMPILED):
        return lambda rows: curve.t_verify(rows, COMPILED)
    one = one_row_price(curve)
    price = _verify_price(curve, dispatch, one)
    return lambda rows: one if rows <= 1 else price(rows)


def _verify_price(curve: VerifyCostCurve, dispatch: str, step: float) -> Callable[[int], float]:
    """`verify_cost`'s price of more than one row (`step`: the plain step's)."""
    if dispatch == "fastest":
        return lambda rows: curve.t_verify(rows, fastest_dispatch(curve, rows))
    times = set(getattr(curve, "times", ()))
    if dispatch == "auto" and "auto" in times and ("dense" in times or "fused" in times):
        return lambda rows: _auto_price(curve, rows, step)
    if dispatch != "auto" and dispatch in curve.times:
        return lambda rows: curve.t_verify(rows, dispatch)
    return curve.t_verify


def interpolate(table: dict[int, float], rows: int) -> float:
    """Seconds at `rows` from measured (rows -> seconds): exact where measured, else linear
    between (or beyond) the two nearest measured counts, floored at 0. The one rule the curve,
    the policy and the app's prediction view share."""
    if rows in table:
        return table[rows]
    rs = sorted(table)
    if len(rs) == 1:
        return table[rs[0]]
    if rows < rs[0]:
        r0, r1 = rs[0], rs[1]
    elif rows > rs[-1]:
        r0, r1 = rs[-2], rs[-1]
    else:
        i = bisect.bisect_left(rs, rows)
        r0, r1 = rs[i - 1], rs[i]
    t0, t1 = table[r0], table[r1]
    return max(t0 + (t1 - t0) * (rows - r0) / (r1 - r0), 0.0)


def measured_elsewhere(curve: Any) -> bool:
    """Whether the curve was measured on another backend than this process runs on: then its
    prices are for there (bench --curve), and this machine's times say nothing against them."""
    from core.dispatch.backend import backend_name

    return str(getattr(curve, "backend", "")) != backend_name()


def read_curve_file(path: str | Path) -> VerifyCostCurve:
    """A curve from a file: `specdec-tui calibrate --json`'s, or the calibration a bench
    report (`bench --json`) carries, plain or xz'd (`.json.xz`, as the repository keeps its
    raw data). Choices and predictions priced with it are those of the machine that measured
    it, wherever they run (a CPU replaying an H200's policy)."""
    p = Path(path).expanduser()
    try:
        text = read_bounded_xz(p, JSON_MAX_BYTES, "curve file").decode("utf-8-sig")
        check_depth(text, str(p))
        doc = json.loads(text)
    except FileNotFoundError:
        raise CalibrationError(f"There is no curve file {p}.") from None
    except IsADirectoryError:
        raise CalibrationError(f"The curve file {p} is a folder.") from None
    except UntrustedFileError as exc:
        raise CalibrationError(str(exc)) from None
    except OSError as exc:
        raise CalibrationError(f"Could not read the curve file {p}: {exc.strerror or exc}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        detail = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
        raise CalibrationError(f"{p} is not a JSON curve ({detail}).") from None
    if isinstance(doc, dict) and "protocol" in doc:  # a bench report
        protocol = doc.get("protocol") if isinstance(doc.get("protocol"), dict) else {}
        cal = protocol.get("calibration")
        if not isinstance(cal, dict) or not cal.get("t_verify_s"):
            raise CalibrationError(
                f"The bench report {p} carries no calibration (no speculative row, or "
                "--no-predict)."
            )
        env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
        doc = {"backend": env.get("backend", "unknown"), "device_name": env.get("device_name", ""),
               "context_len": cal.get("context", 0), "times": cal["t_verify_s"],
               "draft_step_s": cal.get("draft_step_s"), "repeats": cal.get("repeats", 0),
               "draft_step_sampled_s": cal.get("draft_step_sampled_s"),
               "accept_s": cal.get("accept_s"),
               "models": _report_models(protocol.get("models"))}
    if not isinstance(doc, dict):
        raise CalibrationError(f"{p} is not a curve: it holds no JSON object.")
    curve = VerifyCostCurve.from_dict(doc, f"The curve file {p}")
    if not any(curve.times.values()):  # said here, not mid-run
        raise CalibrationError(f"The curve in {p} holds no measurements.")
    return curve


def _report_models(models: Any) -> dict[str, str]:
    """A bench report's "spec (name)" model entries as a curve's models."""
    out: dict[str, str] = {}
    if not isinstance(models, dict):
        return out
    for role in ("target", "draft"):
        value = models.get(role)
        if isinstance(value, str):
            m = re.fullmatch(r"(.*) \((.*)\)", value)
            out[role], out[f"{role}_name"] = (m.group(1), m.group(2)) if m else (value, value)
    return out
