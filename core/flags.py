"""The command line's words for settings: one flag per Settings field, the same in every
command that takes settings (the app, `chat`, `bench`, `sweep`), and the one
`--profile NAME[:key=value,...]` form they all read.

Why a module of its own: the flags are built from core.settings' FLAG_FIELDS here, once, so a
flag `bench` takes is one `chat` and the app take too (chat once had no --tv or --k and refused
`--profile fixed-4-tv1:tv_budget=0.5`, a form the bench took). Each command passes the settings
it starts from, so `--help` shows the default that command would run.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from core.drafting import registry
from core.errors import lower_first
from core.settings import (
    DISPATCH,
    FLAG_FIELDS,
    MODES,
    POLICIES,
    RULES,
    STEPS,
    VERIFY_ATTENTION,
    Settings,
    SettingsError,
    field_names,
    field_type,
    type_words,
)

# What each flag of FLAG_FIELDS says in --help (target and draft: core/cli.py's model flags).
FLAG_HELP: dict[str, str] = {
    "target": "target model: 'default', an mlx-lm repo id or folder, a .gguf file, "
    "or 'shape:NAME' (random weights of a real shape)",
    "draft": "draft model: same sources as --target, or 'self:bits=B' / 'self:layers=N' "
    "derived from the target",
    "mode": "speculative, target-only or draft-only",
    "rule": "acceptance rule: greedy, lossless, or mentored (spends --tv)",
    "tv": "TV budget in [0, 1] of the mentored rule (0: lossless)",
    "k": "draft length: fixed k, or the starting k of an adaptive policy",
    "draft_source": "where drafts come from: the draft model, a lookup of earlier repeats of "
    "the conversation, or hybrid (the lookup first, the model otherwise)",
    "policy": "how many tokens to draft a round",
    "temperature": "sampling temperature; 0 is greedy",
    "top_p": "nucleus sampling's mass",
    "repetition_penalty": "penalty on recently generated tokens",
    "dispatch": "verification's matmul kernel",
    "verify_attention": "verification's attention",
    "step": "each model's forward: eager, compiled (one traced graph per row bucket), or auto "
    "(compiled where this pair's calibration measured it no slower)",
    "seed": "sampling seed (the bench: the first, then seed+1, ...)",
    "max_tokens": "new tokens per answer",
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "mode": MODES, "rule": RULES, "draft_source": registry.names(), "policy": POLICIES,
    "dispatch": DISPATCH, "verify_attention": VERIFY_ATTENTION, "step": STEPS,
}
MODEL_FLAGS = ("target", "draft")  # core/cli.py adds them (calibrate takes them too)


def _given(value: str) -> str:
    """A string flag's value; an empty one is refused (it once meant the default silently)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("was given an empty value; give one or leave the "
                                         "flag out")
    return value


def flag_name(dest: str) -> str:
    """`draft_source` -> `--draft-source`."""
    return "--" + dest.replace("_", "-")


def add_setting_flags(parser: Any, defaults: Settings | None, *, top: bool = False,
                      skip: Iterable[str] = ()) -> None:
    """Every setting flag of FLAG_FIELDS (the model flags aside) and --no-bonus, on `parser`
    (a parser or an argument group). `defaults`: the settings the command runs without the
    flag, shown in --help (None: say nothing). `top`: the app's own flags (default None);
    a subcommand's default is SUPPRESS, so a flag given before the command is kept."""
    default = None if top else argparse.SUPPRESS
    skipped = set(skip) | set(MODEL_FLAGS)
    for dest, name in FLAG_FIELDS.items():
        if dest in skipped:
            continue
        text = FLAG_HELP[dest]
        if defaults is not None:
            value = getattr(defaults, name)
            text += f" (default {'on' if value is True else 'off' if value is False else value})"
        if field_type(name) is bool:
            parser.add_argument(flag_name(dest), dest=dest, action="store_true",
                                default=default, help=text)
            continue
        kind = _given if field_type(name) is str else field_type(name)
        parser.add_argument(flag_name(dest), dest=dest, type=kind, default=default,
                            choices=_CHOICES.get(dest), help=text)
    if "bonus" not in skipped:
        on = defaults is None or defaults.bonus
        parser.add_argument("--no-bonus", action="store_true",
                            default=False if top else argparse.SUPPRESS,
                            help="no bonus token (the seed's engine)"
                            + ("" if defaults is None else f" (default: bonus {'on' if on else 'off'})"))


PROFILE_HELP = ("start from this saved profile or preset, with overrides: "
                "NAME[:key=value,...] (the flags given win over it)")


# --------------------------------------------------------------------------- --profile NAME:k=v


def split_profile_spec(spec: str) -> tuple[str, str]:
    """(profile, overrides text) of a --profile value. A path may hold `:` (`./a:b.toml`,
    `/mnt/c:/x.toml`): the profile is then everything up to the last `.toml` that ends it or
    is followed by `:`, so only what follows that is read as overrides; a name holds no `:`."""
    if spec.endswith(".toml"):
        return spec, ""
    cut = spec.rfind(".toml:")
    if cut >= 0:
        return spec[: cut + len(".toml")], spec[cut + len(".toml:") :]
    name, _, rest = spec.partition(":")
    return name, rest


def parse_profile_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """'fixed-8-tv1:dispatch=gemv,bonus=true' -> ('fixed-8-tv1', {...}) typed like Settings.

    Only declared settings are keys (`greedy=` or `__doc__=` were TypeError tracebacks), and
    a string value may hold commas: a piece that does not start with a setting's `name=`
    continues the string before it, so `draft=shape:tiny-draft,layers=1` is one value, and a
    quoted value is taken whole (`draft="shape:tiny,seed=3"`: seed is a setting too)."""
    name, rest = split_profile_spec(spec)
    if not rest:
        return name, {}
    out: dict[str, Any] = {}
    for key, raw in _override_pieces(spec, rest):
        if key in out:  # `k=2,k=3` once kept the last silently
            raise SettingsError(f"--profile {spec} sets {key} twice; give it once.")
        want = field_type(key)
        raw = raw.strip()
        try:
            if want is bool:
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                out[key] = raw.lower() in ("true", "1", "yes")
            else:
                out[key] = want(raw)
        except ValueError:
            raise SettingsError(
                f"--profile {spec}: {key} must be {type_words(want)}, got {raw!r}."
            ) from None
    return name, out


def _override_pieces(spec: str, rest: str) -> list[tuple[str, str]]:
    """`k=2,draft="a,b",target=shape:x,layers=1` -> [(key, raw value), ...] (see above)."""
    declared = set(field_names())
    pieces: list[tuple[str, str]] = []
    i = 0
    while i < len(rest):
        end = rest.find(",", i)
        part = rest[i:] if end < 0 else rest[i:end]
        key, eq, raw = part.partition("=")
        key = key.strip().replace("-", "_")
        value = raw.lstrip()
        if eq and key in declared and value[:1] in ("'", '"'):
            start = i + len(part) - len(value) + 1
            close = rest.find(value[0], start)
            after = rest[close + 1 :].lstrip() if close >= 0 else ""
            if close < 0 or not (after == "" or after.startswith(",")):
                raise SettingsError(f"--profile {spec}: the quoted value of {key} is not closed "
                                    "before the next comma.")
            pieces.append((key, rest[start:close]))
            i = rest.find(",", close) + 1 if after else len(rest)
            continue
        if eq and key in declared:
            pieces.append((key, raw))
        elif pieces and field_type(pieces[-1][0]) is str:
            pieces[-1] = (pieces[-1][0], pieces[-1][1] + "," + part)
        else:
            raise SettingsError(
                f"--profile {spec}: {part!r} is not a known key=value setting (the settings "
                f"are {', '.join(field_names())})."
            )
        i = len(rest) if end < 0 else end + 1
    return pieces


def profile_settings(spec: str, profiles_dir: str | None = None,
                     with_run: bool = True) -> tuple[Any, Settings]:
    """(the Profile, its settings with the spec's overrides) of `--profile NAME[:key=value]`;
    an override out of range is one sentence naming the spec."""
    from core.profile import load_profile

    name, extra = parse_profile_spec(spec)
    profile = load_profile(name, profiles_dir, with_run=with_run)
    try:
        return profile, profile.settings.replace(**extra)
    except SettingsError as exc:
        raise SettingsError(f"--profile {spec}: {lower_first(str(exc))}") from None


def command_settings(args: argparse.Namespace,
                     default: Settings) -> tuple[Any, Settings, str | None]:
    """(the Profile or None, the settings, a notice or None) a command line asks for:
    --profile NAME[:key=value,...]'s settings (else `default`), the setting flags on top. A
    profile whose recorded run cannot be read still gives its settings; the notice says why."""
    from core.profile import ProfileError
    from core.settings import flag_changes, with_flags

    profile, settings, notice = None, default, None
    profiles_dir = getattr(args, "profiles_dir", None)
    if spec := getattr(args, "profile", None):
        try:
            profile, settings = profile_settings(spec, profiles_dir)
        except ProfileError as exc:  # else: the settings' own error, exit 2
            profile, settings = profile_settings(spec, profiles_dir, with_run=False)
            notice = f"The recorded run of {profile.name} was not loaded: {exc}"
    return profile, with_flags(settings, flag_changes(args)), notice
