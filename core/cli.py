"""The `specdec-tui` command: no subcommand opens the TUI; the rest are headless.

Headless subcommands never import Textual; each lives in the package that owns its idea
(core.chat.cli, core.bench, core.sweep.cli, core.calibrate.cli, core.profile) and registers
its own flags here. Building the
parser imports those packages, and with them MLX: `--help` lists every flag, in a second or
two, but never loads Textual.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from core.errors import UserError


def _add_model_arguments(p: argparse.ArgumentParser, top: bool = False) -> None:
    # Subcommands repeat the flags so they can follow the command; SUPPRESS keeps a value
    # given before the command (`specdec-tui --target X bench`) from being reset to None.
    from core.flags import FLAG_HELP
    from core.settings import Settings

    default = None if top else argparse.SUPPRESS
    for dest in ("target", "draft"):
        p.add_argument(f"--{dest}", default=default,
                       help=f"{FLAG_HELP[dest]} (default {getattr(Settings, dest)})")
    p.add_argument(
        "--special-tokens-in-text",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="read special-token spellings typed in a message (<|im_end|>, ...) as control "
        "tokens; without it they stay text and only the chat template's own markers control",
    )


class _Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one sentence (a UserError: exit 2), not the whole usage
    before a line of error (`bench --tokens abc` printed 60 lines); `--help` has the usage."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (see `{self.prog} --help`).")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; subcommand modules add their own flags."""
    from core import bench, profile
    from core.calibrate import cli as calibrate_cli
    from core.flags import PROFILE_HELP, add_setting_flags
    from core.settings import first_run_settings

    parser = _Parser(
        prog="specdec-tui",
        description="Speculative decoding on MLX, seen round by round. "
        "Without a subcommand, opens the terminal app.",
    )
    _add_model_arguments(parser, top=True)
    first_run = first_run_settings()  # the app's and chat's settings without --profile
    g = parser.add_argument_group("settings (the app's; every command that takes settings "
                                  "takes the same flags)")
    add_setting_flags(g, first_run, top=True)
    parser.add_argument("--profile", default=None, help=PROFILE_HELP)
    parser.add_argument("--profiles-dir", default=None, help="where profiles are read and saved")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("chat", help="one-shot answer to a prompt, printed with its round stats")
    _add_model_arguments(p)
    p.add_argument("prompt", help="the user message")
    p.add_argument("--profile", default=argparse.SUPPRESS, help=PROFILE_HELP)
    p.add_argument("--profiles-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    # Not given: --profile's value, else the first run's (core.chat.cli.CHAT_DEFAULTS)
    add_setting_flags(p.add_argument_group("settings"), first_run)

    p = sub.add_parser("fetch", help="download the embedded default model if it is missing")

    p = sub.add_parser("bench", help="the seed's benchmark protocol, headless")
    _add_model_arguments(p)
    bench.add_bench_arguments(p)

    p = sub.add_parser("sweep", help="the seed's experiment: speed against what a TV budget "
                       "gives up, over a grid of settings and prompts; its frontier")
    _add_model_arguments(p)
    from core.sweep.cli import add_sweep_arguments

    add_sweep_arguments(p)

    p = sub.add_parser("calibrate", help="measure verify cost against rows; predict kernels")
    _add_model_arguments(p)
    p.add_argument("--profile", default=argparse.SUPPRESS,
                   help="calibrate this profile's models (and fused draft)")
    p.add_argument("--profiles-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    calibrate_cli.add_calibrate_arguments(p)

    p = sub.add_parser("profiles", help="list, show, diff and export saved profiles")
    profile.add_profiles_arguments(p)
    return parser


# Flags whose empty value once meant the default silently (`--target ""` loaded the default
# model, `--mode ""` ran speculative): an empty one is refused in one sentence.
_NOT_EMPTY = ("target", "draft", "mode", "profile", "profiles_dir", "bench_profiles", "curve",
              "prompt_file", "prompt_name", "markdown", "json", "csv", "trace", "modes",
              "draft_source")


def check_not_empty(args: argparse.Namespace) -> None:
    """Refuse `--flag ""` (or only spaces) for the flags above: a value was given, so taking
    the default instead would run something the user did not ask for."""
    for name in _NOT_EMPTY:
        value = getattr(args, name, None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            flag = "--profile" if name == "bench_profiles" else f"--{name.replace('_', '-')}"
            raise UserError(f"{flag} was given an empty value; give one or leave the flag out.")


# Subcommands that take no settings: a --profile or a setting flag given before them is
# refused, never silently ignored (calibrate takes --profile and the models, nothing else).
_NO_SETTINGS = {
    "fetch": "only downloads the default model",
    "profiles": "takes profile names after its action, as in `profiles show NAME`",
    "calibrate": "measures the models' verify cost",
}


def check_settings_apply(args: argparse.Namespace) -> None:
    """One sentence for a setting flag given to a command that reads no settings."""
    from core.flags import MODEL_FLAGS, flag_name
    from core.settings import FLAG_FIELDS

    why = _NO_SETTINGS.get(args.command or "")
    if why is None:
        return
    given = ["--profile"] if getattr(args, "profile", None) and args.command != "calibrate" else []
    given += [flag_name(d) for d in FLAG_FIELDS if d not in MODEL_FLAGS
              and getattr(args, d, None) is not None]
    given += ["--no-bonus"] if getattr(args, "no_bonus", False) else []
    if given:
        raise UserError(f"{given[0]} does not apply to `{args.command}`, which {why}.")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; every user error ends in one sentence on stderr and exit code 2.

    Everything runs inside the handlers, the parser too: it imports MLX, and a Ctrl+C during
    those first tens of milliseconds was a KeyboardInterrupt traceback.
    """
    try:
        args = build_parser().parse_args(argv)
        check_not_empty(args)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # what reports call the command
        check_settings_apply(args)
        if args.command in ("bench", "sweep") and getattr(args, "max_tokens", None) is not None:
            args.tokens = args.max_tokens  # the app's --max-tokens, given before the command
        if args.command is None:
            from core.runtime.distributed import refuse_app_when_launched

            refuse_app_when_launched()  # under mlx.launch: chat and bench only, in one sentence
            from tui.app import run_app  # the only Textual import on this path

            return run_app(args)
        from core.io.kept import notices_to_stderr

        notices_to_stderr()  # a kept file set aside is said, once, in a command's stderr
        if args.command == "fetch":
            from core.models import fetch_default

            path = fetch_default(progress=True)
            print(f"default model ready: {path}")
            return 0
        if args.command == "chat":
            from core.chat.cli import run_chat_cli

            return run_chat_cli(args)
        if args.command == "bench":
            from core.bench import run_bench_cli

            return run_bench_cli(args)
        if args.command == "sweep":
            from core.sweep.cli import run_sweep_cli

            return run_sweep_cli(args)
        if args.command == "calibrate":
            from core.calibrate.cli import run_calibrate_cli

            return run_calibrate_cli(args)
        if args.command == "profiles":
            from core.profile import run_profiles_cli

            return run_profiles_cli(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except UserError as exc:
        print(f"specdec-tui: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # under mlx.launch: a collective whose peer went away
        from core.runtime.distributed import lost_peer_sentence

        if (why := lost_peer_sentence(exc)) is None:
            raise
        print(f"specdec-tui: {why}", file=sys.stderr)
        return 3
    return 2


if __name__ == "__main__":
    sys.exit(main())
