"""What a `specdec-tui bench` command line asks for, checked before any model loads.

The rows (profiles with overrides, or one flag-built setting: the flags to Settings through
core.settings.flag_changes, as chat and the app map them), the output paths, the prompt, a
replayed curve and the peer, each read from the flags here so run_bench_cli
(core/bench/cli.py) reads as the run it is: a typo in a flag is one sentence before a long
load, not a failure after it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.bench.errors import BenchError
from core.bench.peer import Peer
from core.bench.prompts import DEFAULT_PROMPT, read_prompt
from core.bench.results import BenchSetting, describe
from core.flags import profile_settings, split_profile_spec
from core.io.atomic import Output, check_outputs
from core.io.user_text import prompt_text
from core.settings import MAX_TOKENS, Settings, flag_changes, with_flags


def settings_from_args(args: argparse.Namespace) -> list[BenchSetting]:
    """The rows a command line asks for: profiles (with overrides) or one flag-built setting."""
    specs = list(getattr(args, "bench_profiles", None) or [])
    top = getattr(args, "profile", None)  # the top-level --profile, when given before `bench`
    if isinstance(top, str) and top and top not in specs:
        specs.insert(0, top)
    # The flags over every row; --target and --draft are the loaded pair's, put on every
    # row by run_bench_cli once it is chosen.
    flags = flag_changes(args, skip=("target", "draft"))
    override_dir = getattr(args, "profiles_dir", None)
    rows: list[BenchSetting] = []
    for spec in specs:
        s = with_flags(profile_settings(spec, override_dir)[1], flags)
        rows.append(BenchSetting(spec if not flags else f"{spec}+flags", s))
    if not rows:
        flags.setdefault("mode", "speculative")
        s = with_flags(Settings(), flags)
        rows.append(BenchSetting(describe(s), s))
    return rows


def first_fixed_k(rows: list[BenchSetting], default: int) -> int:
    """The first fixed-k speculative row's k (a peer drafts as our row it is compared with
    does), else `default`."""
    return next(
        (b.settings.k for b in rows
         if b.settings.mode == "speculative" and b.settings.policy == "fixed"), default,
    )


def mlx_peer_k(args: argparse.Namespace, rows: list[BenchSetting]) -> int:
    """mlx-lm's draft length: --peer-k, else the first fixed-k speculative row's k, else 4."""
    return int(args.peer_k) if args.peer_k is not None else first_fixed_k(rows, 4)


def check_peer_and_budget(args: argparse.Namespace, rows: list[BenchSetting]) -> None:
    """--peer-k, --peer-ngram and --prompt-tokens in range before a long model load: they
    were read only after it, so a typo cost the load (a 72B: minutes)."""
    budget = getattr(args, "prompt_tokens", None)
    if budget is not None and not 1 <= budget <= MAX_TOKENS:
        raise BenchError(f"--prompt-tokens must be between 1 and {MAX_TOKENS:,}, got {budget}.")
    peer = getattr(args, "peer", None)
    if peer is None:
        for flag in ("peer_k", "peer_ngram"):
            if getattr(args, flag, None) is not None:
                raise BenchError(f"--{flag.replace('_', '-')} needs --peer; give both or neither.")
        return
    if peer == "transformers-pld":
        from core.bench.peer_pld import NGRAM, NUM_TOKENS

        k, n = args.peer_k or NUM_TOKENS, args.peer_ngram or NGRAM
        if not (1 <= k <= 64 and 1 <= n <= 16):
            raise BenchError(f"--peer-k must be 1-64 and --peer-ngram 1-16, got {k} and {n}.")
        return
    if args.peer_ngram is not None:
        raise BenchError("--peer-ngram applies to --peer transformers-pld only.")
    k = mlx_peer_k(args, rows)
    if not 1 <= k <= 16:
        raise BenchError(f"--peer-k must be between 1 and 16, got {k}.")


def prompt_from_args(args: argparse.Namespace) -> tuple[str, str, int | None]:
    """(name, text, token budget) of the prompt the command line asks for."""
    if args.prompt is not None:  # decoded as the terminal meant it; empty as in `chat`
        return "inline", prompt_text(args.prompt, "--prompt"), args.prompt_tokens
    if args.prompt_file is not None:
        from core.io.atomic import reason
        from core.io.untrusted import PROMPT_MAX_BYTES, UntrustedFileError, read_bounded

        path = Path(args.prompt_file).expanduser()
        try:  # a regular file of bounded size: a FIFO hung here, /dev/zero filled the memory
            text = read_bounded(path, PROMPT_MAX_BYTES, "prompt file").decode("utf-8").strip()
        except UntrustedFileError as exc:
            raise BenchError(str(exc)) from None
        except OSError as exc:  # "[Errno 2] ..." is not a sentence
            raise BenchError(f"Could not read the prompt file {path}: {reason(exc)}.") from None
        except UnicodeDecodeError as exc:
            raise BenchError(f"Could not read the prompt file {path}: {exc}.") from None
        if not text:
            raise BenchError(f"The prompt file {path} is empty.")
        return path.name, text, args.prompt_tokens
    name = args.prompt_name or DEFAULT_PROMPT
    text, budget = read_prompt(name)
    return name, text, args.prompt_tokens if args.prompt_tokens is not None else budget


def curve_from_args(args: argparse.Namespace, rows: list[BenchSetting]) -> Any | None:
    """--curve, read and checked before the models load: a file that cannot price these rows
    (too few rows or modes) is one sentence, not a failure after a long load."""
    if not getattr(args, "curve", None):
        return None
    from core.bench.predicted import needed_calibration
    from core.dispatch import read_curve_file

    curve = read_curve_file(args.curve)
    need = needed_calibration(rows)
    if need is not None:
        missing = [m for m in need["modes"] if m not in curve.modes]
        if max(curve.rows) < need["rows"] or missing:
            raise BenchError(
                f"The curve in {args.curve} measured up to {max(curve.rows)} rows in "
                f"{', '.join(curve.modes)}; these settings need {need['rows']} rows"
                + (f" and {', '.join(missing)}." if missing else ".")
            )
    return curve


def check_from_args(args: argparse.Namespace, prompt: str,
                    error: type[BenchError] = BenchError) -> Any:
    """--check KIND ARGS as the TaskCheck of `prompt` (None without the flag), read before any
    model loads: an unknown kind or a bad argument is one sentence (`error`, a BenchError)."""
    given = getattr(args, "check", None)
    if not given:
        return None
    from core.bench.tasks import parse_check

    try:
        return parse_check(" ".join(given), prompt, "--check")
    except BenchError as exc:
        raise error(str(exc)) from None


def check_counts(args: argparse.Namespace, error: type[BenchError] = BenchError) -> None:
    """--tokens, --seeds, --invocations and --warmup in range, before anything is read: the
    protocol's counts, checked one way for `bench` and `sweep` (which raises its own
    `error`, a BenchError)."""
    for flag in ("tokens", "seeds", "invocations"):
        if getattr(args, flag) < 1:
            raise error(f"--{flag} must be at least 1, got {getattr(args, flag)}.")
    if args.warmup < 0:
        raise error(f"--warmup must be at least 0, got {args.warmup}.")
    from core.bench.protocol import check_bounds

    too_many = check_bounds({k: getattr(args, k) for k in ("seeds", "invocations", "warmup")},
                            "--")
    if too_many:
        raise error(too_many)


def confirm_bench_plan(args: argparse.Namespace, rows: list[BenchSetting]) -> None:
    """A bench's size said, and --yes asked for past PLAN_CONFIRM requests, before any model
    loads (the baseline counted when the protocol adds it)."""
    from core.bench.protocol import ProtocolConfig, plan_requests

    config = ProtocolConfig(tokens=args.tokens, seeds=args.seeds, invocations=args.invocations,
                            warmup=args.warmup, traced=not args.no_traced,
                            quality=not args.no_quality)
    baseline = 0 if any(b.settings.mode == "target-only" for b in rows) else 1
    confirm_plan(plan_requests(len(rows) + baseline, config), args.tokens,
                 getattr(args, "yes", False))


def confirm_plan(requests: int, tokens: int, yes: bool,
                 error: type[BenchError] = BenchError) -> None:
    """A plan past PLAN_CONFIRM requests runs with --yes, or when a terminal user says so;
    without a terminal (a script, CI) it is one sentence stating its size and time."""
    import sys

    from core.bench.protocol import PLAN_CONFIRM, plan_sentence

    if requests <= PLAN_CONFIRM or yes:
        return
    said = plan_sentence(requests, tokens)
    if not sys.stdin.isatty():
        raise error(f"{said}; pass --yes to run it.")
    try:
        answer = input(f"{said}. Run it? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise error(f"{said}; not run (answer y, or pass --yes).")


def check_peer_packages(args: argparse.Namespace) -> None:
    """A transformers peer's packages importable, before any model loads (not after it)."""
    if args.peer in ("transformers-pld", "transformers-assisted"):
        from core.bench.peer_pld import PeerUnavailable, missing_packages

        if missing := missing_packages():
            raise PeerUnavailable(
                f"--peer {args.peer} needs torch, transformers, gguf and accelerate; "
                f"{', '.join(missing)} will not import here."
            )


def peer_from_args(args: argparse.Namespace, rows: list[BenchSetting], pair: Any, target: str,
                   draft: str | None) -> Any:
    """The peer --peer asks for, on the loaded pair (mlx-lm) or loaded itself (transformers);
    None without --peer. Its k: --peer-k, else the first fixed-k speculative row's."""
    peer: Any = None
    if args.peer == "transformers-pld":
        from core.bench.peer_pld import NGRAM, NUM_TOKENS, load_pld_peer

        k, n = args.peer_k or NUM_TOKENS, args.peer_ngram or NGRAM
        peer = load_pld_peer(target, k, n)
    if args.peer == "transformers-assisted":
        from core.bench.peer_pld import ASSISTED_K, load_assisted_peer

        k = args.peer_k or first_fixed_k(rows, ASSISTED_K)
        if not 1 <= k <= 32:
            raise BenchError(f"--peer-k must be between 1 and 32, got {k}.")
        peer = load_assisted_peer(target, draft, k)
    if args.peer == "mlx-lm":
        k = mlx_peer_k(args, rows)
        peer = Peer(
            target=pair.target.model,
            draft=pair.draft.model if pair.draft is not None else None,
            k=k,
            vocab_size=pair.vocab_size,
        )
    return peer


OUTPUT_FLAGS = ("markdown", "json", "csv", "trace")


def bench_inputs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The files this bench reads, which no output may name (`--markdown p.txt` once replaced
    the prompt file p.txt with the report): prompt file, curve, profile files, model files."""
    from core.io.kept import kept_inputs
    from core.profile import profile_paths

    found: list[tuple[str, Any]] = [("prompt file", getattr(args, "prompt_file", None)),
                                    ("curve", getattr(args, "curve", None))]
    for role in ("target", "draft"):
        found.append((f"{role} model", getattr(args, role, None)))
    specs = list(getattr(args, "bench_profiles", None) or [])
    top = getattr(args, "profile", None)
    if isinstance(top, str) and top:
        specs.append(top)
    for spec in specs:
        name, _ = split_profile_spec(spec)
        found += [("profile", p) for p in profile_paths(name, getattr(args, "profiles_dir", None))]
    return found + kept_inputs()  # the default model and every file the tool keeps


def check_output_paths(args: argparse.Namespace) -> dict[str, Output]:
    """Fail before a long run, not after it, when an output cannot or must not be written
    there: the rule every command shares (core.io.atomic.check_outputs: folders, devices,
    FIFOs and dangling links refused, links written through, an existing file only with
    --force, never an input, no two outputs on one file, `-` for stdout)."""
    if getattr(args, "trace", None) is not None and getattr(args, "no_traced", False):
        raise BenchError("--trace needs the traced requests that --no-traced skips; drop one.")
    return check_outputs(
        [(f"--{flag}", getattr(args, flag, None)) for flag in OUTPUT_FLAGS],
        force=getattr(args, "force", False),
        inputs=bench_inputs(args),
        stdout=[f"--{flag}" for flag in OUTPUT_FLAGS],
    )
