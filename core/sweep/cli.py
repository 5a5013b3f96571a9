"""`specdec-tui sweep`: the seed's experiment as a command, on any pair.

Its flags, the prompts and grid they ask for, the progress bar, and the files: JSON (the raw
blocks and the cells, with what ran), CSV, Markdown and the frontier's SVG beside it, all
rewritten after every block so Ctrl+C keeps what finished. Output paths are checked before the
models load, and an existing file is replaced only with --force (like `profiles export`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

from core.bench.flags import check_counts, check_from_args
from core.bench.prompts import fit_prompt_ids, prompt_check, prompt_names, read_prompt
from core.bench.protocol import ProtocolConfig
from core.flags import PROFILE_HELP, add_setting_flags
from core.io.atomic import write_atomic
from core.io.user_text import prompt_text
from core.runtime.distributed import rank0_only
from core.settings import Settings
from core.sweep.frontier import ALLOWABLE, MARGIN
from core.sweep.grid import (
    DEFAULT_POLICIES,
    DEFAULT_SOURCES,
    DEFAULT_TEMPERATURES,
    DEFAULT_TVS,
    SweepError,
    SweepGrid,
    parse_floats,
    parse_names,
)
from core.sweep.run import SweepPrompt, SweepRun, answer_of_ids, run_sweep

DEFAULT_SWEEP_PROMPT = "creative-seed-vault"


def _csv(values: tuple[Any, ...]) -> str:
    return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """`specdec-tui sweep` flags: the grid, the prompts, the protocol, the bounds, the files."""
    g = parser.add_argument_group(
        "grid",
        "Every TV budget x policy x draft source, at every temperature, plus target-only (each "
        "temperature's baseline) and draft-only. At temperature 0 the rule is greedy, so the TV "
        "budgets collapse to one greedy cell per policy.",
    )
    # The setting flags of the app, chat and bench (core/flags.py), with the same names; the
    # grid's axes take a comma-separated list (the plural names are the same flags).
    suppress = argparse.SUPPRESS
    g.add_argument("--tv", dest="tv", default=suppress, metavar="LIST",
                   help=f"TV budgets in [0, 1] (default {_csv(DEFAULT_TVS)})")
    g.add_argument("--policy", "--policies", dest="policy", default=suppress, metavar="LIST",
                   help="k policies: fixed-K, cost-aware, cost-aware-KMAX, ... (default "
                   f"{_csv(DEFAULT_POLICIES)})")
    g.add_argument("--k", dest="k", default=suppress, metavar="LIST",
                   help="shorthand for --policies fixed-K,...: '4,8' is fixed-4,fixed-8")
    g.add_argument("--draft-source", "--sources", dest="draft_source", default=suppress,
                   metavar="LIST", help="draft sources: model, lookup, hybrid (default "
                   f"{_csv(DEFAULT_SOURCES)})")
    g.add_argument("--temperature", "--temperatures", dest="temperature", default=suppress,
                   metavar="LIST", help="sampling temperatures; 0 is greedy (default "
                   f"{_csv(DEFAULT_TEMPERATURES)}, the seed's)")
    g.add_argument("--mode", dest="mode", default=suppress, metavar="LIST",
                   help="the cells beside the target-only baseline: speculative, draft-only "
                   "(default both)")
    g.add_argument("--no-draft-only", action="store_true", help="leave out the draft-only row")
    g.add_argument("--profile", default=suppress, help="the grid's base settings: " + PROFILE_HELP)
    g.add_argument("--profiles-dir", default=suppress, help=suppress)
    add_setting_flags(g, Settings(), skip=(*GRID_FLAGS, "max_tokens"))

    g = parser.add_argument_group("prompts")
    g.add_argument("--prompt-name", dest="prompt_names", action="append", default=[],
                   metavar="NAME", help=f"a shipped prompt (repeatable; default "
                   f"{DEFAULT_SWEEP_PROMPT}); see `bench --list-prompts`")
    g.add_argument("--prompt", dest="inline_prompts", action="append", default=[],
                   metavar="TEXT", help="a user message of your own (repeatable; named "
                   "inline-1, inline-2, ...; checked with --check)")
    g.add_argument("--all-prompts", action="store_true", help="every shipped prompt")
    g.add_argument("--prompt-tokens", type=int, default=None,
                   help="cut each prompt at a word to at most N templated tokens")
    g.add_argument("--check", nargs="+", default=None, metavar=("KIND", "ARGS"),
                   help="check every prompt's answers with this (in place of a shipped "
                   "prompt's own check); kinds as `bench --check`")

    g = parser.add_argument_group("protocol (the bench's: core/bench/protocol.py)")
    # None: not given (core/sweep/first_look.py fills them: a first look's, or the full's)
    g.add_argument("--tokens", "--max-tokens", dest="tokens", type=int, default=None,
                   help="new tokens per request, EOS ignored (default 256; a first look 32)")
    g.add_argument("--seeds", type=int, default=None,
                   help="seeds per invocation (default 3; a first look 1)")
    g.add_argument("--invocations", type=int, default=None,
                   help="timed invocations per cell (default 3; a first look 1)")
    g.add_argument("--warmup", type=int, default=None,
                   help="warm-up requests per cell and prompt (default 1; a first look 0)")
    g.add_argument("--full", action="store_true",
                   help="the full default grid and protocol; without it and without a grid "
                   "or count flag, a first look: target-only and fixed-4 at TV 0 and 1, one "
                   "32-token request each (minutes on a CPU), then the full one's estimate")
    g.add_argument("--traced", action="store_true",
                   help="also a traced request per seed (the phase split; slower)")
    g.add_argument("--predict", action="store_true",
                   help="also the bench's predicted speedup per cell (a calibration first)")
    g.add_argument("--no-quality", action="store_true",
                   help="skip NLL scoring (then no frontier: NLL is its quality axis)")

    g = parser.add_argument_group("the answer: the fastest setting within a quality bound")
    g.add_argument("--max-nll-delta", type=float, default=None, metavar="NATS",
                   help="the most NLL per token a setting may give up against target-only")
    g.add_argument("--min-task", type=float, default=None, metavar="SHARE",
                   help="the least task success (0-1) on the prompts with a check")
    g.add_argument("--margin", type=float, default=MARGIN, metavar="SHARE",
                   help="how much more than target-only a recommended cell may copy of the "
                   f"prompt or repeat itself (default {MARGIN:g})")
    g.add_argument("--allow", default=None, metavar="LIST",
                   help="lift default bounds: " + ", ".join(ALLOWABLE) + " (by default the "
                   "recommendation reads right: task no worse than target-only's, copying and "
                   "repetition within the margin, never draft-only or a cell that stopped "
                   "speculating)")

    g = parser.add_argument_group("outputs (rewritten after every prompt and temperature)")
    g.add_argument("--json", default=None, metavar="PATH", help="raw blocks, cells, provenance")
    g.add_argument("--csv", default=None, metavar="PATH", help="one row per cell (and prompt)")
    g.add_argument("--markdown", default=None, metavar="PATH",
                   help="the page; the frontier's SVG is written beside it (same name, .svg)")
    g.add_argument("--svg", default=None, metavar="PATH", help="the frontier's SVG elsewhere")
    g.add_argument("--force", action="store_true", help="replace output files that exist")
    g.add_argument("--yes", action="store_true",
                   help="run a plan past 500 requests without asking")
    g.add_argument("--no-plot", action="store_true", help="no terminal plot of the frontier")
    g.add_argument("--no-reading", action="store_true",
                   help="no reading page (by default NAME.reading.html and NAME.reading.md, "
                   "the texts side by side, beside --json, else beside --markdown)")

    g = parser.add_argument_group("reading a saved sweep (no models, no run)")
    g.add_argument("--read", default=None, metavar="RESULT.json",
                   help="write the reading page of a saved sweep's JSON and stop: "
                   "RESULT.reading.html and RESULT.reading.md beside it, or --out")
    g.add_argument("--out", default=None, metavar="PATH",
                   help="with --read: the page's path (its Markdown beside it, .md)")


# The setting flags that name a grid axis in `sweep` (each a list there).
GRID_FLAGS = ("tv", "policy", "k", "draft_source", "temperature", "mode")


def _listed(args: argparse.Namespace, dest: str) -> str | None:
    """A grid flag's list as text; a value given before `sweep` (the app's flag) is one item."""
    value = getattr(args, dest, None)
    return None if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def grid_from_args(args: argparse.Namespace) -> SweepGrid:
    """The grid the flags ask for: --profile's settings (else Settings()) with the other setting
    flags on top are its base, the grid flags its axes; one sentence for a bad item."""
    from core.flags import profile_settings
    from core.settings import FLAG_FIELDS, SettingsError, flag_changes, with_flags

    k, policy = _listed(args, "k"), _listed(args, "policy")
    if k is not None and policy is not None:
        raise SweepError("--k is shorthand for --policies fixed-K; give one of them.")
    if k is not None:
        ks = parse_names("--k", k)
        if not all(x.isdigit() for x in ks):
            raise SweepError(f"--k {k}: give whole numbers, as in --k 4,8.")
        policies = tuple(f"fixed-{x}" for x in ks)
    else:
        policies = parse_names("--policies", policy or _csv(DEFAULT_POLICIES))
    modes = parse_names("--mode", _listed(args, "mode") or "speculative,draft-only")
    if not set(modes) <= {"speculative", "draft-only", "target-only"} or "speculative" not in modes:
        raise SweepError(f"--mode {','.join(modes)}: a sweep runs speculative cells (and "
                         "draft-only where asked) beside its target-only baseline.")
    spec = getattr(args, "profile", None)
    try:
        base = profile_settings(spec, getattr(args, "profiles_dir", None))[1] if spec else Settings()
        settings = with_flags(base, flag_changes(args, skip=[FLAG_FIELDS[d] for d in GRID_FLAGS]))
    except SettingsError as exc:
        raise SweepError(str(exc)) from None
    return SweepGrid(
        tvs=parse_floats("--tv", _listed(args, "tv") or _csv(DEFAULT_TVS)), policies=policies,
        sources=parse_names("--sources", _listed(args, "draft_source") or _csv(DEFAULT_SOURCES)),
        temperatures=parse_floats("--temperatures",
                                  _listed(args, "temperature") or _csv(DEFAULT_TEMPERATURES)),
        draft_only="draft-only" in modes and not args.no_draft_only, base=settings,
    )


def prompt_names_from_args(args: argparse.Namespace) -> list[str]:
    """The shipped prompts asked for, each checked to exist (one sentence naming the known)."""
    if args.all_prompts and args.prompt_names:
        raise SweepError("--all-prompts and --prompt-name both choose the prompts; give one.")
    names = prompt_names() if args.all_prompts else list(dict.fromkeys(args.prompt_names))
    if not names and getattr(args, "inline_prompts", None):
        return []
    names = names or [DEFAULT_SWEEP_PROMPT]
    for n in names:
        read_prompt(n)
    return names


def output_paths(args: argparse.Namespace) -> dict[str, Path]:
    """Every file the sweep will write, checked before the models load by the rule every
    command shares (core.io.atomic.check_outputs): no folder, device, FIFO or dangling link,
    a link written through, no two outputs on one file, never a model file it reads, the
    folder exists and takes a file, and no existing file without --force. No `-`: the files
    are rewritten after every block."""
    from core.io.atomic import OutputPathError, check_outputs

    given: list[tuple[str, Any]] = [(f"--{flag}", getattr(args, flag, None))
                                    for flag in ("json", "csv", "markdown", "svg")]
    if getattr(args, "markdown", None) and not getattr(args, "svg", None):
        beside = Path(args.markdown).expanduser().with_suffix(".svg")
        given[-1] = ("the SVG beside --markdown", str(beside))
    page_beside = getattr(args, "json", None) or getattr(args, "markdown", None)
    if page_beside and not getattr(args, "no_reading", False):
        from core.sweep.reading_page import reading_paths

        flag = "--json" if getattr(args, "json", None) else "--markdown"
        html, md = reading_paths(page_beside)
        given += [(f"the reading page beside {flag}", str(html)),
                  (f"the reading page's Markdown beside {flag}", str(md))]
    from core.io.kept import kept_inputs

    inputs = [(f"{role} model", getattr(args, role, None)) for role in ("target", "draft")]
    inputs += kept_inputs()  # the default model and every file the tool keeps
    try:
        checked = check_outputs(given, force=bool(getattr(args, "force", False)), inputs=inputs)
    except OutputPathError as exc:
        raise SweepError(str(exc)) from None
    names = {"--json": "json", "--csv": "csv", "--markdown": "markdown", "--svg": "svg",
             "the SVG beside --markdown": "svg"}
    for flag in ("--json", "--markdown"):
        names[f"the reading page beside {flag}"] = "reading_html"
        names[f"the reading page's Markdown beside {flag}"] = "reading_md"
    return {names[flag]: out.path for flag, out in checked.items() if out.path is not None}


@rank0_only  # launched over ranks: one set of files, not one per rank
def write_outputs(paths: dict[str, Path], data: dict[str, Any]) -> None:
    """Every output, each replaced whole or not at all (a reader never sees half a file)."""
    from core.bench.texts import dumps
    from core.io.atomic import reason
    from core.sweep.reading_page import reading_html, reading_markdown
    from core.sweep.report import frontier_svg, sweep_csv, sweep_markdown

    svg = paths.get("svg")
    md_svg = None
    if svg is not None and "markdown" in paths:
        md = paths["markdown"].resolve().parent
        try:
            md_svg = str(svg.resolve().relative_to(md))
        except ValueError:
            md_svg = str(svg.resolve())
    renders = {"json": lambda: dumps(data, indent=1) + "\n",  # timed texts compact
               "csv": lambda: sweep_csv(data),
               "markdown": lambda: sweep_markdown(data, md_svg),
               "svg": lambda: frontier_svg(data),
               "reading_html": lambda: reading_html(data),
               "reading_md": lambda: reading_markdown(data)}
    for flag, path in paths.items():
        try:
            write_atomic(path, renders[flag]())
        except OSError as exc:
            raise SweepError(f"Could not write {path}: {reason(exc)}.") from None


def run_sweep_cli(args: argparse.Namespace) -> int:
    """Load the pair once, run every block with a progress bar, write the files after each."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text

    from core.bench.cli import LogLines
    from core.bench.progress import LeftColumn, StepsColumn, time_left
    from core.decode.engine import Engine
    from core.models import check_request, load_pair, pair_context_window
    from core.runtime.compile_watch import notices_to
    from core.runtime.distributed import current_spmd

    console, err = Console(), Console(stderr=True)
    if getattr(args, "read", None) is not None:
        return read_saved(args, console)
    if getattr(args, "out", None) is not None:
        raise SweepError("--out names the page of --read; a sweep's files are --json, --csv, "
                         "--markdown and --svg.")
    from core.sweep.first_look import resolve

    look = resolve(args)  # a plain `sweep`: a first look (the full grid is hours on a CPU)
    check_counts(args, SweepError)
    if args.min_task is not None and not 0.0 <= args.min_task <= 1.0:
        raise SweepError(f"--min-task is a share between 0 and 1, got {args.min_task:g}.")
    if args.max_nll_delta is not None and args.max_nll_delta != args.max_nll_delta:
        raise SweepError("--max-nll-delta must be a number.")
    if not 0.0 <= args.margin <= 1.0:
        raise SweepError(f"--margin is a share between 0 and 1, got {args.margin:g}.")
    allow = parse_names("--allow", args.allow) if args.allow else ()
    if bad := [a for a in allow if a not in ALLOWABLE]:
        raise SweepError(f"--allow {bad[0]!r} is not one of {', '.join(ALLOWABLE)}.")
    grid = grid_from_args(args)
    names = prompt_names_from_args(args)
    asked = [(n, *read_prompt(n)) for n in names] + [
        (f"inline-{i}", prompt_text(t, "--prompt"), None)
        for i, t in enumerate(args.inline_prompts, 1)]
    user_checks = {n: check_from_args(args, text, SweepError) for n, text, _ in asked}
    paths = output_paths(args)
    config = ProtocolConfig(tokens=args.tokens, seeds=args.seeds, invocations=args.invocations,
                            warmup=args.warmup, traced=args.traced,
                            quality=not args.no_quality, predict=args.predict)
    from core.bench.protocol import check_seeds
    from core.bench.results import BenchSetting

    cells = grid.all_cells()
    check_seeds([BenchSetting(c.id, c.settings) for c in cells], args.seeds)
    from core.bench.flags import confirm_plan
    from core.bench.protocol import plan_requests

    prompts = len(names) + len(args.inline_prompts)
    confirm_plan(plan_requests(len(cells), config, prompts), args.tokens,
                 getattr(args, "yes", False), SweepError)

    log = None if err.is_terminal else LogLines(err)
    target, draft = grid.base.target, grid.base.draft
    spmd = current_spmd()
    if log is not None:
        log.line(f"loading {target} / {draft}")
    with err.status(Text(f"loading {target} / {draft}")) if log is None else _null():
        pair = (load_pair if spmd is None else spmd.load_pair)(target, draft)
        engine = Engine.from_pair(pair) if spmd is None else spmd.engine(pair)
    if pair.draft is not None and not pair.speculation_ok:
        err.print(Text(str(pair.speculation_reason), style="yellow"))

    def decode(ids: list[int]) -> str:
        return str(pair.target.tokenizer.decode(ids))

    def answer(ids: list[int]) -> tuple[str, bool]:
        """The text a check reads, the output decoded up to its first EOS, and whether it was
        cut by the token budget instead (no EOS)."""
        end, text = answer_of_ids(ids, pair.eos_ids, decode)
        return str(text), end == len(ids)

    prompts = []
    for name, text, budget in asked:
        budget = args.prompt_tokens if args.prompt_tokens is not None else budget
        ids, used = fit_prompt_ids(pair.target.tokenizer, text, budget)
        check_request(len(ids), args.tokens, pair_context_window(pair), pair.target.name)
        check = user_checks[name] or (prompt_check(name) if name in names else None)
        prompts.append(SweepPrompt(name, tuple(ids), used, _task(check, answer),
                                   check.describe() if check is not None else None,
                                   tuple(pair.eos_ids)))

    names = [p.name for p in prompts]
    run = SweepRun(grid, config, names, max_nll_delta=args.max_nll_delta, min_task=args.min_task,
                   margin=args.margin, allow=tuple(allow))
    argv = getattr(args, "argv", None)
    argv = sys.argv[1:] if argv is None else argv
    run.meta["command"] = "specdec-tui " + " ".join(shlex.quote(a) for a in argv)

    def on_block(r: SweepRun) -> None:
        data = r.to_dict()
        if paths:
            write_outputs(paths, data)
        _remember(data)  # the app's sweep view (`w`) shows the last one

    bar = Progress(TextColumn("{task.description}"), BarColumn(),
                   StepsColumn("loading the first cell"), TimeElapsedColumn(), LeftColumn(),
                   console=err, transient=True, disable=log is not None)
    cancel = threading.Event()
    if look is not None:
        err.print(Text(look.text(), style="yellow"))
    began = time.monotonic()
    try:
        with bar, notices_to(lambda n: err.print(Text(n.text, style="yellow"))):
            task = bar.add_task("sweep", total=None)

            def progress(done: int, total: int, label: str) -> None:
                left = time_left(done, total, time.monotonic() - began)
                bar.update(task, completed=done, total=total, description=label[:56], left=left)
                if log is not None:
                    log.line(f"{done}/{total} {label} ({left})")

            run_sweep(engine, prompts, grid, config, progress=progress, cancel=cancel,
                      decode=decode, on_block=on_block, run=run)
    except KeyboardInterrupt:
        cancel.set()
        kept, planned = len(run.blocks), len(names) * len(grid.temperatures)
        if not kept:
            err.print(Text(f"interrupted before the first of {planned} block(s) finished: "
                           "nothing was written"))
            return 130
        where = ", ".join(str(p) for p in paths.values()) or "no file (no output was asked for)"
        err.print(Text(f"interrupted: {kept} finished block(s) of {planned} kept in {where}"))
        _show(run, console, args)
        return 130
    _show(run, console, args)
    for p in paths.values():
        console.print(Text(f"wrote {p}"))
    if look is not None:
        err.print(Text(look.full_estimate(time.monotonic() - began), style="yellow"))
    return 0


def read_saved(args: argparse.Namespace, console: Any) -> int:
    """`sweep --read RESULT.json [--out PATH]`: the reading page of a saved sweep, no models
    loaded and nothing run, its cells judged again (core/sweep/judge.py `rejudge`). The page and its Markdown are checked by the one output rule
    (never the result itself, an existing file only with --force) and written all or none."""
    from rich.text import Text

    from core.io.atomic import OutputPathError, check_outputs, publish_all
    from core.sweep.judge import rejudge
    from core.sweep.last import read_sweep
    from core.sweep.reading_page import reading_html, reading_markdown, reading_paths

    # judged again by today's checks and measures (a file a former version wrote reads as one
    # written now), under the file's own bounds
    data = rejudge(read_sweep(Path(args.read).expanduser()))
    if args.out is not None:
        html = Path(args.out).expanduser()
        md = html.with_suffix(".md")
        given = [("--out", str(html)), ("the Markdown beside --out", str(md))]
    else:
        html, md = reading_paths(args.read)
        given = [("the reading page beside --read", str(html)),
                 ("its Markdown beside --read", str(md))]
    try:
        checked = check_outputs(given, force=bool(args.force), inputs=[("sweep", args.read)])
    except OutputPathError as exc:
        raise SweepError(str(exc)) from None
    pages = [reading_html(data), reading_markdown(data)]
    try:
        publish_all(list(zip(checked.values(), pages, strict=True)))
    except OSError as exc:
        from core.io.atomic import reason

        raise SweepError(f"Could not write the reading page: {reason(exc)}.") from None
    for out in checked.values():
        console.print(Text(f"wrote {out.given}"), soft_wrap=True)
    return 0


def _show(run: SweepRun, console: Any, args: argparse.Namespace) -> None:
    from core.sweep.report import frontier_plot, print_cells

    if not run.blocks:
        return
    data = run.to_dict()
    print_cells(data, console)
    if not args.no_plot:
        console.print(frontier_plot(data))


@rank0_only
def _remember(data: dict[str, Any]) -> None:
    from core.sweep.last import remember

    remember(data)


def _task(check: Any, answer: Any) -> Any:
    """A prompt's check over one output's ids: the answer is the text before the first EOS."""
    if check is None:
        return None

    def run(ids: list[int]) -> bool:
        return bool(check(*answer(ids)))

    return run


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
