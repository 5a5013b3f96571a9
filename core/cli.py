"""The `specdec-tui` command: no subcommand opens the TUI; the rest are headless.

Headless subcommands never import Textual; each lives in the package that owns its idea
(core.chat.cli, core.bench, core.sweep.cli, core.dispatch.cli, core.profile) and registers
its own flags here. Building the
parser imports those packages, and with them MLX: `--help` lists every flag, in a second or
two, but never loads Textual.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from core.errors import UserError


def _add_model_arguments(p: argparse.ArgumentParser, top: bool = False) -> None:
    # Subcommands repeat the flags so they can follow the command; SUPPRESS keeps a value
    # given before the command (`specdec-tui --target X bench`) from being reset to None.
    default = None if top else argparse.SUPPRESS
    p.add_argument(
        "--target",
        default=default,
        help="target model: 'default', an mlx-lm repo id or folder, a .gguf file, "
        "or 'shape:NAME' (random weights of a real shape)",
    )
    p.add_argument(
        "--draft",
        default=default,
        help="draft model: same sources as --target, or 'self:bits=B' / 'self:layers=N' "
        "derived from the target",
    )
    p.add_argument(
        "--special-tokens-in-text",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="read special-token spellings typed in a message (<|im_end|>, ...) as control "
        "tokens; without it they stay text and only the chat template's own markers control",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; subcommand modules add their own flags."""
    from core import bench, profile
    from core.dispatch import cli as calibrate_cli
    from core.drafting import registry

    parser = argparse.ArgumentParser(
        prog="specdec-tui",
        description="Speculative decoding on MLX, seen round by round. "
        "Without a subcommand, opens the terminal app.",
    )
    _add_model_arguments(parser, top=True)
    parser.add_argument("--profile", default=None, help="start from this saved profile")
    parser.add_argument("--profiles-dir", default=None, help="where profiles are read and saved")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("chat", help="one-shot answer to a prompt, printed with its round stats")
    _add_model_arguments(p)
    p.add_argument("prompt", help="the user message")
    # None: not given, so --profile's value (else core.chat.cli.CHAT_DEFAULTS, the first run's)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--mode", default=None)
    p.add_argument("--profile", default=argparse.SUPPRESS,
                   help="start from this saved profile; the flags given override it")  # fmt: skip
    p.add_argument("--profiles-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument("--draft-source", choices=registry.names(), default=None,
                   help="where drafts come from: the draft model, a lookup in the "
                   "conversation, or hybrid (the lookup first); default model")  # fmt: skip

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
                   help="calibrate this profile's models (and fused draft)")  # fmt: skip
    p.add_argument("--profiles-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    calibrate_cli.add_calibrate_arguments(p)

    p = sub.add_parser("profiles", help="list, show, diff and export saved profiles")
    profile.add_profiles_arguments(p)
    return parser


# Flags whose empty value once meant the default silently (`--target ""` loaded the default
# model, `--mode ""` ran speculative): an empty one is refused in one sentence (issue 32).
_NOT_EMPTY = ("target", "draft", "mode", "profile", "profiles_dir", "bench_profiles", "curve",
              "prompt_file", "prompt_name", "markdown", "json", "csv", "trace", "modes",
              "draft_source")  # fmt: skip


def check_not_empty(args: argparse.Namespace) -> None:
    """Refuse `--flag ""` (or only spaces) for the flags above: a value was given, so taking
    the default instead would run something the user did not ask for."""
    for name in _NOT_EMPTY:
        value = getattr(args, name, None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            flag = "--profile" if name == "bench_profiles" else f"--{name.replace('_', '-')}"
            raise UserError(f"{flag} was given an empty value; give one or leave the flag out.")


# Subcommands that take no settings: a --profile there is refused, never silently ignored.
_NO_SETTINGS = {
    "fetch": "only downloads the default model",
    "profiles": "takes profile names after its action, as in `profiles show NAME`",
    "sweep": "builds its own grid of settings (see `specdec-tui sweep --help`)",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; every user error ends in one sentence on stderr and exit code 2.

    Everything runs inside the handlers, the parser too: it imports MLX, and a Ctrl+C during
    those first tens of milliseconds was a KeyboardInterrupt traceback.
    """
    try:
        args = build_parser().parse_args(argv)
        check_not_empty(args)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # what reports call the command
        if getattr(args, "profile", None) and args.command in _NO_SETTINGS:
            raise UserError(
                f"--profile does not apply to `{args.command}`, which {_NO_SETTINGS[args.command]}."
            )
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
            from core.dispatch.cli import run_calibrate_cli

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
