"""The `specdec-tui profiles` command: list, show, diff and export, printed with rich tables.

Only presentation lives here; what a profile holds, how it is read and which numbers are
compared come from the other modules, so the CLI and the app never disagree about a profile.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from rich.text import Text

from core.io import user_text
from core.profile.export import diff_settings, plain_number, summary_metrics, value_text
from core.profile.files import PROFILES_ENV, shipped_presets_dir, user_profiles_dir
from core.profile.records import Profile, ProfileError
from core.profile.store import ProfileStore, load_profile
from core.settings import Settings, first_run_settings


def add_profiles_arguments(parser: argparse.ArgumentParser) -> None:
    """`profiles list | show NAME | diff A B | export NAME [--csv PATH] [--trace PATH]`."""
    sub = parser.add_subparsers(dest="profiles_command", metavar="ACTION", required=True)
    actions = {
        "list": sub.add_parser("list", help="saved profiles and shipped presets"),
        "show": sub.add_parser("show", help="one profile's settings and recorded run"),
        "diff": sub.add_parser("diff", help="the settings (and run metrics) that differ"),
        "export": sub.add_parser(
            "export", help="a recorded run's rounds as CSV, or as a Chrome trace for Perfetto"
        ),
    }
    actions["show"].add_argument("name", help="profile name, or a path to a .toml file")
    actions["diff"].add_argument("a", help="profile name or .toml path")
    actions["diff"].add_argument("b", help="profile name or .toml path")
    actions["export"].add_argument("name", help="profile name, or a path to a .toml file")
    actions["export"].add_argument("--csv", dest="csv_path", default=None, metavar="PATH")
    actions["export"].add_argument("--force", action="store_true",
                                   help="replace the output files when they exist")
    actions["export"].add_argument(
        "--trace", dest="trace_path", default=None, metavar="PATH",
        help="Chrome trace JSON (open in ui.perfetto.dev or chrome://tracing)",
    )
    for p in actions.values():
        # SUPPRESS: given here it wins; absent, the top-level --profiles-dir is kept.
        p.add_argument("--profiles-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def run_profiles_cli(args: argparse.Namespace) -> int:
    """Run one `profiles` action; user errors propagate as ProfileError for cli.main to print."""
    from rich.console import Console

    console = Console()
    override = getattr(args, "profiles_dir", None)
    command = args.profiles_command
    if command == "list":
        try:
            store, unavailable = ProfileStore.default(override), None
        except ProfileError as exc:  # no folder of its own: the presets still list
            unavailable = str(exc)
            chosen = override or os.environ.get(PROFILES_ENV)
            folder = Path(chosen).expanduser() if chosen else user_profiles_dir()
            store = ProfileStore(folder, presets=shipped_presets_dir())
        _print_list(console, store, unavailable)
    elif command == "show":
        _print_show(console, load_profile(args.name, override))
    elif command == "diff":
        _print_diff(console, load_profile(args.a, override), load_profile(args.b, override))
    elif command == "export":
        _export(args, override)
    else:  # argparse refuses other actions; kept for direct callers
        raise ProfileError(f"Unknown profiles action {command!r}.")
    return 0


def _export(args: argparse.Namespace, override: str | None) -> None:
    """All or nothing: the outputs are checked before anything is read (the rule every
    command shares, core.io.atomic.check_outputs: never the profile's own files, an existing
    file only with --force), both are rendered in memory (a bad run fails here, before any
    file), then staged and renamed together; `-` writes one of them on stdout."""
    import sys

    from core.io.atomic import check_outputs, publish_all
    from core.io.kept import kept_inputs
    from core.profile.chrome_trace import profile_request, trace_json
    from core.profile.export import rounds_csv
    from core.profile.store import profile_paths

    csv_path, trace_path = getattr(args, "csv_path", None), getattr(args, "trace_path", None)
    if csv_path is None and trace_path is None:
        raise ProfileError("profiles export needs --csv PATH or --trace PATH (or both).")
    outputs = check_outputs(
        [("--csv", csv_path), ("--trace", trace_path)],
        force=getattr(args, "force", False),
        inputs=[("profile", p) for p in profile_paths(args.name, override)] + kept_inputs(),
        stdout=["--csv", "--trace"],
    )
    profile = load_profile(args.name, override)
    if profile.run is None:
        raise ProfileError(
            f"Profile {profile.name!r} has no recorded run to export; record one from the app "
            "or the bench first."
        )
    name = user_text.shown(profile.name)
    rendered, said = [], []
    if "--csv" in outputs:
        rendered.append((outputs["--csv"], rounds_csv(profile.run)))
        said.append(f"wrote {len(profile.run.rounds)} rounds of {name} to {csv_path}")
    if "--trace" in outputs:
        request = profile_request(profile)
        try:
            rendered.append((outputs["--trace"], trace_json([request])))
        except ValueError as exc:  # a number JSON cannot hold; the run's check should stop it
            raise ProfileError(f"The run of {name} cannot be written as a trace ({exc}); "
                               "nothing was written.") from None
        said.append(f"wrote the trace of {name} ({len(request.rounds)} rounds) to "
                    f"{trace_path}: open it in ui.perfetto.dev")
    try:
        publish_all(rendered)
    except OSError as exc:
        from core.io.atomic import reason

        raise ProfileError(f"Could not export {name}: {reason(exc)}; nothing was written.") from None
    for line in said:  # stdout may be the export itself: what was written goes to stderr then
        print(line, file=sys.stderr if any(o.to_stdout for o, _ in rendered) else sys.stdout)


def _text(value: Any, style: str = "") -> Text:
    """Text from a file, shown: never markup, never a terminal escape (core/io/user_text.py)."""
    return Text(user_text.shown(value), style=style)


def _print_list(console: Any, store: ProfileStore, unavailable: str | None = None) -> None:
    """Every profile and preset; files a user wrote are text, never markup (`[gpu]` stays)."""
    from rich.console import Console
    from rich.table import Table

    if unavailable is not None:
        Console(stderr=True).print(Text(f"specdec-tui: {unavailable}", style="yellow"))
    infos = store.list()
    where = "shipped presets" if unavailable is not None else f"profiles in {store.directory}"
    table = Table(title=Text(where), title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("run")
    table.add_column("source")
    table.add_column("description")
    for info in infos:
        description = (_text(info.description) if info.error is None
                       else _text(info.error, "red"))
        table.add_row(
            Text(info.name),
            "yes" if info.has_run else "-",
            "preset" if info.preset else "saved",
            description,
        )
    for path, why in store.skipped():
        table.add_row(Text(user_text.shown_line(path.name)), "-", "skipped",
                      _text(why, "yellow"))
    if not infos and not store.skipped():
        console.print(Text(f"no {where}" if unavailable else f"no profiles in {store.directory}"))
        return
    console.print(table)


def _print_show(console: Any, profile: Profile) -> None:
    from rich.table import Table

    # The default is what the app and `chat` start from (core.settings.first_run_settings):
    # the column once showed Settings(), model/fixed/4, which nothing runs without a profile.
    defaults = first_run_settings()
    console.print(Text.assemble((profile.name, "bold"), "  ", user_text.shown(profile.description)))
    table = Table(title="settings", title_justify="left")
    table.add_column("setting", no_wrap=True)
    table.add_column("value")
    table.add_column("first run (app, chat)")
    # The recorded run's own settings beside them (its first round's): a profile saved after
    # a key changed k showed k 6 next to a run measured at k 4. Only what differs is shown.
    ran = profile.run.settings if profile.run is not None else None
    if ran is not None:
        table.add_column("its recorded run")
    for f in dataclasses.fields(Settings):
        value, default = getattr(profile.settings, f.name), getattr(defaults, f.name)
        changed = value != default
        row = [f.name, Text(value_text(value), style="bold" if changed else ""),
               Text(value_text(default) if changed else "")]
        if ran is not None:
            at = getattr(ran, f.name)
            row.append(Text(value_text(at), style="bold yellow") if at != value else Text(""))
        table.add_row(*row)
    console.print(table)
    run = profile.run
    if run is None:
        console.print("no recorded run")
        return
    info = Table(title="recorded run", title_justify="left")
    info.add_column("what", no_wrap=True)
    info.add_column("value")
    env = run.environment
    for key in ("backend", "device_name", "mlx", "mlx_lm", "os", "python", "timestamp"):
        info.add_row(key, _text(value_text(env.get(key))))
    from core.identity import describe_models
    from core.version import version_text

    info.add_row("measured by", _text(version_text(env)))
    for role, line in describe_models(run.summary.models).items():  # 'unknown' in old runs
        info.add_row(role, _text(line))  # a spec is what the user typed: text, not markup
    text = user_text.shown(run.prompt)
    prompt = text if len(text) <= 60 else text[:57] + "..."
    info.add_row("prompt", Text(prompt or "-"))
    info.add_row("calibration", "yes" if run.calibration else "-")
    for at, changed in run.settings_changes:  # a key pressed mid-turn: not one setting's run
        info.add_row(f"settings from round {at}",
                     Text(", ".join(f"{k} = {value_text(v)}" for k, v in changed.items())))
    for label, value in summary_metrics(run):
        info.add_row(label, value_text(value))
    console.print(info)
    if profile.run_is_stale:
        console.print("[yellow]the settings changed after this run was recorded[/yellow]")


def _print_diff(console: Any, a: Profile, b: Profile) -> None:
    from rich.table import Table

    changed = diff_settings(a.settings, b.settings)
    if changed:
        table = Table(title="settings that differ", title_justify="left")
        table.add_column("setting", no_wrap=True)
        table.add_column(Text(a.name))
        table.add_column(Text(b.name))
        for key, va, vb in changed:
            table.add_row(key, Text(value_text(va)), Text(value_text(vb)))
        console.print(table)
    else:
        console.print(Text(f"{a.name} and {b.name} have the same settings"))
    if a.run is None or b.run is None:
        missing = [p.name for p in (a, b) if p.run is None]
        console.print(Text(f"no recorded run for {', '.join(missing)}, so no metrics to compare"))
        return
    table = Table(title="recorded runs", title_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column(Text(a.name))
    table.add_column(Text(b.name))
    table.add_column(Text(f"{b.name} / {a.name}"))
    for key in ("backend", "device_name"):
        table.add_row(key, _text(value_text(a.run.environment.get(key))),
                      _text(value_text(b.run.environment.get(key))))
    from core.identity import describe_models

    ma, mb = describe_models(a.run.summary.models), describe_models(b.run.summary.models)
    for role in ("target", "draft"):  # a difference here means the runs compare models
        style = "bold yellow" if ma.get(role) != mb.get(role) else ""
        table.add_row(role, _text(ma.get(role, "none"), style), _text(mb.get(role, "none"), style))
    for (label, va), (_, vb) in zip(summary_metrics(a.run), summary_metrics(b.run), strict=True):
        ratio = vb / va if va and vb is not None else None
        table.add_row(label, value_text(va), value_text(vb), "-" if ratio is None else f"{plain_number(ratio)}x")
    console.print(table)
