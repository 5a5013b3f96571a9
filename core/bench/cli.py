"""`specdec-tui bench`: its flags, and the run with its files, in named steps (what the flags
ask for, checked before any model loads, is read in core/bench/flags.py).

Why a module of its own: the protocol is a pure function the TUI calls too; everything that
reads a command line, draws a progress bar or writes a report lives here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shlex
import sys
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from core.bench.copying import measure_rows
from core.bench.errors import BenchError
from core.bench.flags import (
    OUTPUT_FLAGS,
    check_counts,
    check_from_args,
    check_output_paths,
    check_peer_and_budget,
    check_peer_packages,
    confirm_bench_plan,
    curve_from_args,
    peer_from_args,
    prompt_from_args,
    settings_from_args,
)
from core.bench.peer import PEERS
from core.bench.prompts import (
    DEFAULT_PROMPT,
    fit_prompt_ids,
    prompt_check,
    prompt_kind,
    prompt_names,
)
from core.bench.protocol import ProtocolConfig, ProtocolInputs, check_seeds, run_protocol
from core.bench.report import print_table, report_csv, report_markdown
from core.bench.results import BenchSetting
from core.errors import lower_first
from core.flags import add_setting_flags
from core.io.atomic import Output, write_atomic
from core.runtime.distributed import is_rank0, rank0_only
from core.settings import Settings


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """`specdec-tui bench` flags: protocol, settings (profiles or flags), prompt, outputs, peer."""
    g = parser.add_argument_group("protocol")
    g.add_argument("--tokens", "--max-tokens", dest="tokens", type=int, default=256,
                   help="new tokens per request, EOS ignored (default 256)")
    g.add_argument("--seeds", type=int, default=3, help="seeds per invocation (default 3)")
    g.add_argument("--invocations", type=int, default=3,
                   help="timed invocations per setting (default 3)")
    g.add_argument("--warmup", type=int, default=1,
                   help="warm-up requests per setting (default 1)")
    g.add_argument("--no-traced", action="store_true", help="skip the traced run (no phase split)")
    g.add_argument("--no-quality", action="store_true", help="skip NLL scoring and greedy check")
    g.add_argument("--no-predict", action="store_true",
                   help="skip the predicted speedup (and the calibration it needs when the "
                   "engine has none)")
    g.add_argument("--curve", default=None, metavar="PATH",
                   help="price k choices and predictions with this verify-cost curve (calibrate "
                   "--json, or a bench --json report's) instead of measuring one here: the "
                   "policy then chooses as on the machine that measured it")

    g = parser.add_argument_group(
        "settings",
        "--profile NAME[:key=value,...] (repeatable) benchmarks saved profiles, with per-profile "
        "overrides; the flags below then override every profile. Without --profile the flags "
        "define one speculative setting over the seed protocol's row (its defaults are shown). "
        "A target-only baseline is always measured.",
    )
    g.add_argument("--profile", dest="bench_profiles", action="append", default=[],
                   metavar="NAME", help="a saved profile or preset (repeatable)")
    # SUPPRESS: given here it wins; absent, the top-level --profiles-dir is kept.
    g.add_argument("--profiles-dir", default=argparse.SUPPRESS, help="where profiles are read")
    # the app's and chat's setting flags (core/flags.py); new tokens are --tokens above
    add_setting_flags(g, Settings(), skip=("max_tokens",))

    g = parser.add_argument_group("prompt")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--prompt", default=None, help="the user message")
    src.add_argument("--prompt-file", default=None, help="a file holding the user message")
    src.add_argument("--prompt-name", default=None,
                     help=f"a shipped prompt (default {DEFAULT_PROMPT}); see --list-prompts")
    g.add_argument("--prompt-tokens", type=int, default=None,
                   help="cut the prompt at a word so the templated prompt is at most N tokens "
                   "(shipped prompts may set a default, e.g. creative-800)")
    g.add_argument("--list-prompts", action="store_true", help="list shipped prompts and exit")
    g.add_argument("--check", nargs="+", default=None, metavar=("KIND", "ARGS"),
                   help="check each answer (in place of a shipped prompt's own): number, "
                   "contains, regex, rename, param, changed, split, rewrite, roles "
                   "(core/bench/tasks.py); code is parsed, never run")

    g = parser.add_argument_group("outputs")
    g.add_argument("--markdown", default=None, metavar="PATH")
    g.add_argument("--json", default=None, metavar="PATH")
    g.add_argument("--csv", default=None, metavar="PATH")
    g.add_argument("--trace", default=None, metavar="PATH",
                   help="each setting's traced request as a Chrome trace (ui.perfetto.dev)")
    g.add_argument("--force", action="store_true",
                   help="replace output files that exist (- writes one output on stdout)")
    g.add_argument("--yes", action="store_true",
                   help="run a plan past 500 requests without asking")
    g.add_argument("--peer", choices=PEERS, default=None,
                   help="also time mlx-lm's own loops, or transformers' prompt lookup or "
                        "assisted generation (assistant_model: the draft) on the same GGUFs "
                        "(needs torch, transformers, gguf), greedy, paired with ours")
    g.add_argument("--peer-k", type=int, default=None,
                   help="draft length for the peer (mlx-lm, transformers-assisted: the first "
                        "fixed-k setting's k; transformers-pld: prompt_lookup_num_tokens, 10)")
    g.add_argument("--peer-ngram", type=int, default=None,
                   help="transformers-pld: max_matching_ngram_size (default 3)")


def _use_curve(args: argparse.Namespace, curve: Any, engine: Any, err: Any, pair: Any) -> str:
    """The engine prices with another machine's curve; where it came from, for the report.
    A curve measured on other models than this pair's is said in a sentence (still used:
    pricing a laptop's small pair with an H200's large one is the point of some replays)."""
    from rich.text import Text

    from core.dispatch import measured_elsewhere

    engine.set_cost_curve(curve, observed=False)
    where = f"{curve.backend}" + (f", {curve.device_name}" if curve.device_name else "")
    if measured_elsewhere(curve):
        err.print(Text(f"k choices and predictions are priced with the curve measured on {where} "
                       f"({args.curve}); the times measured are this machine's.",
                       style="yellow"))
    other = curve.models_differ(pair.target.name,
                                pair.draft.name if pair.draft is not None else None)
    if other is not None:
        err.print(Text(f"{args.curve}: {lower_first(other)}", style="yellow"))
    return f"{args.curve} (measured on {where})"


@rank0_only  # launched over ranks: one report, not one per rank
def _write(out: Output, text: str) -> None:
    """A report file, replaced whole or not at all (a reader never sees half a report)."""
    if out.to_stdout:
        out.write(text)
        return
    try:
        write_atomic(out.path, text)
    except OSError as exc:
        from core.io.atomic import reason

        raise BenchError(f"Could not write the report {out.path}: {reason(exc)}.") from None


class LogLines:
    """Progress where stderr is a log, not a terminal: a transient bar draws nothing there, so
    a bench cut short (a job's time limit, a stall) left no clue where it was. One line a
    step, with the wall clock and the seconds since the bench started."""

    def __init__(self, err: Any) -> None:
        self.err, self.t0 = err, time.monotonic()

    def line(self, text: str) -> None:
        from rich.text import Text

        stamp = f"[{time.strftime('%H:%M:%S')} +{time.monotonic() - self.t0:.1f} s]"
        self.err.print(Text(f"{stamp} {text}"), soft_wrap=True, highlight=False)


def run_bench_cli(args: argparse.Namespace) -> int:
    """`specdec-tui bench`: load the pair, run the protocol with a progress bar, write reports.

    In named steps, each its own function: what the flags ask for (checked before any model
    loads), the one pair every row runs on, loading it, the prompt and the peer on it, the
    protocol under a progress display, and what the report is stamped with."""
    console, err = _consoles(args)
    if getattr(args, "list_prompts", False):
        for name in prompt_names():
            console.print(f"{name}  ({prompt_kind(name)})")
        return 0
    ask = _read_flags(args)
    target, draft, rows = _one_pair(args, ask.rows, err)
    confirm_bench_plan(args, rows)  # its size said (--yes past 500 requests) before loading
    log = None if err.is_terminal else LogLines(err)
    pair, engine, spmd = _load(args, rows, target, draft, err, log)
    curve_note = _use_curve(args, ask.curve, engine, err, pair) if ask.curve is not None else None
    prompt_ids, used = fit_prompt_ids(
        pair.target.tokenizer, ask.text, ask.budget, model=pair.target.name,
        specials_in_text=getattr(args, "special_tokens_in_text", False),
        notice=lambda t: err.print(_yellow(t)),
    )
    from core.models import check_request, pair_context_window

    check_request(len(prompt_ids), args.tokens, pair_context_window(pair), pair.target.name)
    inputs = _protocol_inputs(args, ask, rows, pair, target, draft)
    report = _run_with_progress(args, engine, prompt_ids, rows, inputs, err, log)
    measure_rows(report.results, prompt_ids, pair.eos_ids)
    _stamp(report, pair, spmd, curve_note, ask, used)
    print_table(report, console)
    return _write_outputs(ask.outputs, report, console)


@dataclass(frozen=True)
class _Asked:
    """What a bench command line asks for, read and checked before any model loads."""

    outputs: dict[str, Output]
    rows: list[BenchSetting]
    curve: Any | None
    prompt_name: str
    text: str
    budget: int | None
    check: Any = None  # the answer's check (--check, else a shipped prompt's own)


def _yellow(text: str) -> Any:
    from rich.text import Text

    return Text(text, style="yellow")


def _consoles(args: argparse.Namespace) -> tuple[Any, Any]:
    """The report's console and stderr's. An output on stdout (`--csv -`) is the only thing
    there: the table goes to stderr then; a log file gets room for every column."""
    from rich.console import Console

    to_stdout = any(getattr(args, f, None) == "-" for f in OUTPUT_FLAGS)
    console = Console(stderr=to_stdout)
    if not console.is_terminal:
        console.width = max(console.width, 160)
    return console, Console(stderr=True)


def _read_flags(args: argparse.Namespace) -> _Asked:
    """Validation: every flag read and checked before a long model load (a typo is one
    sentence, not a failure after minutes), in the order the checks were always made."""
    check_counts(args)
    outputs = check_output_paths(args)
    rows = settings_from_args(args)
    check_seeds(rows, args.seeds)
    check_peer_and_budget(args, rows)  # before the models load, not after
    curve = curve_from_args(args, rows)
    prompt_name, text, budget = prompt_from_args(args)
    check = check_from_args(args, text)
    if check is None and prompt_name in prompt_names():
        check = prompt_check(prompt_name)
    return _Asked(outputs, rows, curve, prompt_name, text, budget, check)


def _one_pair(args: argparse.Namespace, rows: list[BenchSetting],
              err: Any) -> tuple[str, str, list[BenchSetting]]:
    """The pair every row runs on (--target/--draft, else the first row's), and the rows
    saying so: a profile's own target, often "default", is not what ran under --target."""
    first = rows[0].settings
    target = args.target or first.target
    draft = args.draft or first.draft
    others = {(b.settings.target, b.settings.draft) for b in rows} - {(first.target, first.draft)}
    if others and not (args.target and args.draft):
        err.print(_yellow(f"settings name different models; all rows run on {target} / {draft}"))
    rows = [BenchSetting(b.name, b.settings.replace(target=target, draft=draft)) for b in rows]
    return target, draft, rows


def _load(args: argparse.Namespace, rows: list[BenchSetting], target: str, draft: str,
          err: Any, log: LogLines | None) -> tuple[Any, Any, Any]:
    """Loading: the pair (sharded over the ranks when launched so) and its engine, with a
    spinner on a terminal or a line in a log; the draft only where a row or the peer uses it."""
    from rich.text import Text

    from core.decode.engine import Engine
    from core.models import load_pair
    from core.runtime.distributed import current_spmd

    spmd = current_spmd()  # launched over ranks: the target sharded, rank 0 alone reports
    check_peer_packages(args)  # before any model loads
    needs_draft = (args.peer in ("mlx-lm", "transformers-assisted")
                   or any(b.settings.mode != "target-only" for b in rows))
    loading = Text(f"loading {target} / {draft}")
    if log is not None:
        log.line(loading.plain)
    with err.status(loading) if log is None else contextlib.nullcontext():
        load = load_pair if spmd is None else spmd.load_pair
        pair = load(target, draft if needs_draft else None)
        engine = Engine.from_pair(pair) if spmd is None else spmd.engine(pair)
    if log is not None:
        log.line("loaded")
    if pair.draft is not None and not pair.speculation_ok:
        err.print(_yellow(str(pair.speculation_reason)))
    return pair, engine, spmd


def _protocol_inputs(args: argparse.Namespace, ask: _Asked, rows: list[BenchSetting],
                     pair: Any, target: str, draft: str) -> ProtocolInputs:
    """Peers and checks: the peer on the loaded pair, ids decoded by the target's tokenizer,
    and the check of the answer (the text before the first EOS): --check, else a shipped
    prompt's own."""
    peer = peer_from_args(args, rows, pair, target, draft)

    def decode(ids: list[int]) -> str:
        return str(pair.target.tokenizer.decode(ids))

    check = ask.check

    def check_task(ids: list[int]) -> bool:
        assert check is not None
        end = next((i for i, t in enumerate(ids) if t in pair.eos_ids), len(ids))
        return check(decode(ids[:end]), cut=end == len(ids))

    return ProtocolInputs(
        decode=decode, peer=peer, task=check_task if check is not None else None,
        task_name=check.describe() if check is not None else None,
    )


def _run_with_progress(args: argparse.Namespace, engine: Any, prompt_ids: list[int],
                       rows: list[BenchSetting], inputs: ProtocolInputs, err: Any,
                       log: LogLines | None) -> Any:
    """Progress: the protocol under a transient bar on a terminal (a line a step in a log),
    with a fresh GPU's compile notices shown as they come."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from core.bench.progress import StepsColumn
    from core.runtime.compile_watch import notices_to

    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), StepsColumn("warming up"),
        TimeElapsedColumn(), console=err, transient=True, disable=log is not None,
    )

    def compile_notice(n: Any) -> None:  # a fresh GPU compiling before the first timing
        if log is not None:
            log.line(n.text)
        else:
            err.print(_yellow(n.text))

    config = ProtocolConfig(
        tokens=args.tokens, seeds=args.seeds, invocations=args.invocations, warmup=args.warmup,
        traced=not args.no_traced, quality=not args.no_quality,
        predict=not getattr(args, "no_predict", False),
    )
    with bar, notices_to(compile_notice):
        task = bar.add_task("benchmark", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label[:48])
            if log is not None:
                log.line(f"{done}/{total} {label}")

        report = run_protocol(engine, prompt_ids, rows, config,
                              dataclasses.replace(inputs, progress=progress))
    warm = report.environment.get("warmup") or {}
    if warm.get("ran") and not warm.get("settled"):
        err.print(_yellow("the compile warm-up's single-row steps did not settle: the first "
                          "timed requests may still include compiles"))
    return report


def _stamp(report: Any, pair: Any, spmd: Any, curve_note: str | None, ask: _Asked,
           used: str) -> None:
    """Stamping: the command, a sharded run's comm prices, where a replayed curve came
    from, the prompt as used and the loaded models, kept in the report's protocol."""
    report.protocol["command"] = "specdec-tui " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    if spmd is not None:  # how its comm was measured, and the prices it charged
        report.environment["sharded"] = spmd.describe()
    if curve_note is not None and report.protocol.get("calibration"):
        report.protocol["calibration"]["from"] = curve_note
    report.protocol["prompt"] = {
        "name": ask.prompt_name,
        "kind": prompt_kind(ask.prompt_name),
        "text": used,
        "cut_to_tokens": ask.budget,
    }
    report.protocol["models"] = {
        **report.protocol.get("models", {}),  # the identities, from run_protocol
        "target": f"{pair.target.spec} ({pair.target.name})",
        "draft": f"{pair.draft.spec} ({pair.draft.name})" if pair.draft is not None else None,
        "random_weights": bool(pair.target.random_weights),
        "vocab_size": pair.vocab_size,
    }


def _write_outputs(outputs: dict[str, Output], report: Any, console: Any) -> int:
    """Every output asked for; one that fails does not cost the others (a run's results are
    never lost to one bad path), and the failures end the command in one sentence."""
    from rich.text import Text

    from core.errors import UserError

    failed: list[str] = []
    wrote = 0
    for flag, render in (("--markdown", partial(report_markdown, report)),
                         ("--json", report.to_json),
                         ("--csv", partial(report_csv, report))):
        out = outputs.get(flag)
        if out is None:
            continue
        try:
            _write(out, render())
        except (UserError, ValueError) as exc:
            failed.append(str(exc).rstrip("."))
            continue
        wrote += 1
        if not out.to_stdout:
            console.print(Text(f"wrote {out.given}"))
    out = outputs.get("--trace")
    if out is not None and is_rank0():
        from core.profile.chrome_trace import trace_json

        requests = traced_requests(report, report.environment)
        try:
            if not requests:
                raise BenchError("There is no traced request to write as a trace.")
            _write(out, trace_json(requests))
        except (UserError, ValueError) as exc:
            failed.append(str(exc).rstrip("."))
        else:
            wrote += 1
            if not out.to_stdout:
                console.print(Text(f"wrote {out.given} ({len(requests)} traced requests): open "
                                   "it in ui.perfetto.dev"))
    if failed:
        rest = " (the other outputs were written)" if wrote else ""
        raise BenchError("; ".join(failed) + rest + ".")
    return 0


def traced_requests(report: Any, environment: dict[str, Any] | None = None) -> list[Any]:
    """One Chrome-trace process per setting's traced request, in the report's row order."""
    from core.profile.chrome_trace import TracedRequest

    return [
        TracedRequest(r.name, r.traced_rounds, r.traced_summary, environment)
        for r in report.results
        if r.traced_summary is not None
    ]
