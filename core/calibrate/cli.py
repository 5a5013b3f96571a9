"""`specdec-tui calibrate`: its flags, and the measured curve as a table, a summary and JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.dispatch.calibrate import (
    CALIBRATION_MODES,
    MAX_CALIBRATION_REPEATS,
    calibrate,
    calibration_tokens,
    check_rows,
)
from core.dispatch.curve import CalibrationError, VerifyCostCurve
from core.dispatch.kernels import ROLES
from core.io.atomic import Output, OutputPathError, check_outputs, reason
from core.settings import MAX_TOKENS

if TYPE_CHECKING:
    from rich.table import Table


def add_calibrate_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `specdec-tui calibrate` (core.cli adds --target/--draft)."""
    p.add_argument("--rows", type=int, default=16, help="measure verification of R = 1..ROWS rows")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per row count (median kept)")
    p.add_argument("--context", type=int, default=128, help="tokens in the cache before timing")
    p.add_argument(
        "--modes",
        default="auto",
        help="comma-separated: auto (MLX's kernels), gemv, gemm (forced linear kernels), dense "
        "(a dequantized copy's matmul), fused, plain (forced verification attention)",
    )
    p.add_argument("--json", default=None, metavar="PATH",
                   help="also write the curve as JSON here (- for stdout)")
    p.add_argument("--force", action="store_true", help="replace the --json file if it exists")


def parse_modes(text: str) -> list[str]:
    """--modes: the comma-separated calibration modes, each once, in the order given."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in CALIBRATION_MODES]
    if bad or not modes:
        raise CalibrationError(
            f"--modes takes a comma-separated list of {', '.join(CALIBRATION_MODES)}; got {text!r}."
        )
    return list(dict.fromkeys(modes))


def curve_table(curve: VerifyCostCurve) -> Table:
    """The curve as a rich Table: R, ms and ms/row per mode, predicted kernel per role, marks."""
    from rich.table import Table

    measured = curve.boundary()
    predicted = curve.predicted_boundary
    title = f"verify cost: {curve.backend} {curve.device_name} {curve.architecture}".strip()
    table = Table(title=f"{title}, context {curve.context_len}", title_justify="left")
    table.add_column("R", justify="right")
    for m in curve.modes:
        table.add_column(f"{m} ms", justify="right")
        table.add_column(f"{m} ms/row", justify="right")
    roles = [r for r in ROLES if any(r in v for v in curve.role_kernels.values())]
    for role in roles:
        table.add_column(f"{role} kernel")
    table.add_column("boundary")
    all_rows = sorted({r for tab in curve.times.values() for r in tab})
    for r in all_rows:
        cells = [str(r)]
        for m in curve.modes:
            t = curve.times[m].get(r)
            cells += ["-", "-"] if t is None else [f"{t * 1e3:.2f}", f"{t * 1e3 / r:.2f}"]
        for role in roles:
            cells.append(curve.role_kernels.get(r, {}).get(role, ""))
        marks = []
        if measured == r:
            marks.append("[bold]< measured boundary[/bold]")
        if predicted == r:
            marks.append("< predicted")
        cells.append(" ".join(marks))
        table.add_row(*cells, style="bold" if measured == r else None)
    return table


def curve_summary(curve: VerifyCostCurve) -> str:
    """The lines under the table: draft step, boundary measured vs predicted."""
    lines = []
    if curve.draft_step_s is not None:
        lines.append(f"draft step: {curve.draft_step_s * 1e3:.2f} ms")
    measured, predicted = curve.boundary(), curve.predicted_boundary
    m = "none" if measured is None else f"R = {measured}"
    pr = "none" if predicted is None else f"R = {predicted}"
    verdict = "agrees" if curve.prediction_agrees else "[bold red]DISAGREES[/bold red]"
    lines.append(f"boundary: measured {m}, predicted {pr}: {verdict}")
    lines.append(
        f"KV length advanced {curve.context_len} -> {curve.context_end} over {curve.calls} calls"
    )
    return "\n".join(lines)


def check_json_path(
    path: str | Path, *, force: bool = False, inputs: list[tuple[str, Any]] | None = None
) -> Output:
    """--json, checked before the models load, by the rule every output shares
    (core.io.atomic.check_outputs): its folder exists (a typo once created /nonexistent) and
    takes a new file (a read-only folder once failed after the whole calibration), no folder,
    device or FIFO, an existing file only with --force, never an input; `-` is stdout."""
    try:
        return check_outputs([("--json", str(path))], force=force, inputs=inputs or (),
                             stdout=["--json"])["--json"]
    except OutputPathError as exc:
        raise CalibrationError(str(exc)) from None


def check_context(args: argparse.Namespace, modes: list[str], window: int | None, model: str) -> None:
    """Refuse a calibration that would outgrow the model's context window, before it runs
    (as `chat` and `bench` refuse such a request): past it the times are of a broken model."""
    need = calibration_tokens(args.rows, args.repeats, args.context, len(modes))
    if window is None or need <= window:
        return
    room = window - (need - args.context)
    hint = (f"use --context {room} or less" if room >= 1
            else "use fewer --rows, --repeats or --modes")
    raise CalibrationError(
        f"--context {args.context:,} with these rows and repeats reaches {need:,} tokens, past "
        f"{model}'s context window of {window:,} tokens; {hint}."
    )


def write_curve_json(
    curve: VerifyCostCurve, path: str | Path | Output, warmup: dict[str, Any] | None = None
) -> Path | None:
    """Write the curve as JSON, atomically: an interrupted write leaves the old file or none.
    `path`: a checked Output (stdout when `-`; returns None then) or a path written as given.
    `warmup`: core.runtime.warmup's record of the compile warm-up before the first timed call."""
    out = path if isinstance(path, Output) else Output("--json", str(path),
                                                       Path(path).expanduser())
    doc = curve.to_dict()
    if warmup is not None:
        doc["warmup"] = warmup
    try:
        out.write(json.dumps(doc, indent=2) + "\n")
    except OSError as exc:
        raise CalibrationError(
            f"Could not write the calibration to {out.path}: {reason(exc)}."
        ) from exc
    except OutputPathError as exc:
        raise CalibrationError(str(exc)) from None
    return out.path


def _ms(times: list[float]) -> str:
    return ", ".join(f"{t * 1e3:.1f}" for t in times) + " ms"


def run_calibrate_cli(args: argparse.Namespace) -> int:
    """`specdec-tui calibrate`: load the pair, measure, print the table, optionally write JSON."""
    from rich.console import Console
    from rich.progress import Progress as RichProgress
    from rich.text import Text

    from core.models import load_pair, pair_context_window

    modes = parse_modes(args.modes)
    for name in ("rows", "repeats", "context"):
        if getattr(args, name) < 1:
            raise CalibrationError(f"--{name} must be at least 1, got {getattr(args, name)}.")
    check_rows(args.rows)  # bounded before the context check builds anything from it
    if args.repeats > MAX_CALIBRATION_REPEATS:
        raise CalibrationError(f"--repeats must be at most {MAX_CALIBRATION_REPEATS}, got "
                               f"{args.repeats:,}.")
    if args.context > MAX_TOKENS:
        raise CalibrationError(f"--context must be at most {MAX_TOKENS:,}, got {args.context:,}.")
    from core.io.kept import kept_inputs

    inputs = [(f"{role} model", getattr(args, role, None)) for role in ("target", "draft")]
    inputs += kept_inputs()  # the default model and every file the tool keeps
    if getattr(args, "profile", None):
        from core.profile import profile_paths

        inputs += [("profile", p) for p in profile_paths(args.profile,
                                                         getattr(args, "profiles_dir", None))]
    out = (check_json_path(args.json, force=getattr(args, "force", False), inputs=inputs)
           if args.json else None)
    target, draft, step = args.target or "default", args.draft, "eager"
    if getattr(args, "profile", None):  # its models and step; --target/--draft win
        from core.profile import load_profile

        s = load_profile(args.profile, getattr(args, "profiles_dir", None)).settings
        target = args.target or s.target
        draft = args.draft or (s.draft if s.mode != "target-only" else None)
        step = s.step
    from core.runtime.distributed import current_spmd, is_rank0

    spmd = current_spmd()  # launched over ranks: the sharded target's curve, rank 0 prints
    load = load_pair if spmd is None else spmd.load_pair
    pair = load(target, draft)
    check_context(args, modes, pair_context_window(pair), pair.target.name)
    console = Console(stderr=out is not None and out.to_stdout)  # stdout: the JSON alone
    err = Console(stderr=True)
    # Every row count and mode once before the first timed call: a sample never holds a
    # compile, and a fresh GPU says it is compiling rather than looking hung.
    from core.runtime.compile_watch import notices_to
    from core.runtime.warmup import warm_up

    with notices_to(lambda n: err.print(Text(n.text, style="yellow"))):
        warmup = warm_up(
            pair.target.model, pair.draft.model if pair.draft is not None else None,
            vocab=pair.vocab_size, rows=range(1, args.rows + 1), prompt_tokens=args.context,
            modes=modes, compiled_draft=step != "eager", label=pair.target.name, lockstep=spmd is not None,
        )
    if warmup.ran and not warmup.settled:
        err.print(Text(f"the warm-up's single-row steps did not settle ({_ms(warmup.settle_s)}): "
                       "the first samples may be slow", style="yellow"))
    with RichProgress(console=err, transient=True) as bar:
        task = bar.add_task("calibrating", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label)

        curve = calibrate(
            pair.target.model,
            pair.draft.model if pair.draft is not None else None,
            rows=args.rows,
            repeats=args.repeats,
            context=args.context,
            modes=modes,
            progress=progress,
            step=step,
        )
    curve.target_spec, curve.target_name = pair.target.spec, pair.target.name
    if pair.draft is not None:
        curve.draft_spec, curve.draft_name = pair.draft.spec, pair.draft.name
    console.print(curve_table(curve))
    console.print(curve_summary(curve))
    if out is not None and is_rank0():
        path = write_curve_json(curve, out, warmup.to_dict())
        if path is not None:
            console.print(Text(f"wrote {path}"))
    return 0
