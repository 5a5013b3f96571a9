"""The on-disk format of a profile: where the files live, their schema, migrations and parsing.

Settings are TOML a person edits and diffs (``NAME.toml``), a recorded run is JSON beside it
(``NAME.run.json``); both carry a schema version. An older version is migrated in memory, a
newer or corrupt one is refused in one sentence and never touched. Every failure here is a
`ProfileError` whose sentence a user can act on.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import platformdirs
import tomli_w

from core.errors import lower_first
from core.events import RoundEvent, RunSummary
from core.io import atomic
from core.io.atomic import reason
from core.io.untrusted import (
    JSON_MAX_BYTES,
    TOML_MAX_BYTES,
    UntrustedFileError,
    check_depth,
    read_bounded,
)
from core.profile.records import Profile, ProfileError, RecordedRun
from core.profile.run_check import check_round, check_summary
from core.settings import Settings, SettingsError

SCHEMA = 2  # of both files; bump it and add a migration when a stored key changes meaning
TOML_SUFFIX = ".toml"
RUN_SUFFIX = ".run.json"
APP_NAME = "specdec-tui"
_TOP_KEYS = frozenset({"schema", "description", "settings"})
_TOML_HEADER = (
    "# specdec-tui profile: edit freely; unknown keys are refused.\n"
    "# A recorded run, when there is one, is NAME.run.json beside this file.\n"
)


# --------------------------------------------------------------------------- sentences


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """core.io.atomic.write_atomic, with its OSError told as the one sentence profiles use."""
    try:
        atomic.write_atomic(path, data)
    except OSError as exc:
        raise ProfileError(f"Could not write {path}: {reason(exc)}; nothing was changed.") from None


# --------------------------------------------------------------------------- places


PRESETS_PACKAGE = "specdec_tui_presets"  # the top-level profiles/ folder, as the wheel ships it
PROFILES_ENV = "SPECDEC_TUI_PROFILES"  # where user profiles go, when --profiles-dir is not given


def shipped_presets_dir() -> Path | None:
    """The shipped presets: the checkout's profiles/ folder, or the installed package's copy.

    The checkout comes first (an editable install runs from it); an installed wheel carries
    the same files as the package `specdec_tui_presets` (pyproject.toml maps it to profiles/)."""
    path = Path(__file__).resolve().parents[2] / "profiles"
    if path.is_dir() and any(path.glob("*.toml")):
        return path
    spec = importlib.util.find_spec(PRESETS_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        if Path(location).is_dir():
            return Path(location)
    return None


def user_profiles_dir() -> Path:
    """The per-user profiles folder (the platform's user data folder), the default for saves."""
    return Path(platformdirs.user_data_dir(APP_NAME)) / "profiles"


def profiles_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Where profiles are read and saved: `--profiles-dir`, else $SPECDEC_TUI_PROFILES, else the
    user data folder. Never the working folder: run from a checkout, saves would land among
    the shipped presets and in `git status`. Nothing is created here: reading a shipped preset
    needs no writable folder (a read-only home once refused `profiles show fixed-4-tv1`, and
    `profiles list` made the folder); `ProfileStore.save` creates it when a save needs it."""
    chosen = override if override is not None else os.environ.get(PROFILES_ENV) or None
    path = Path(chosen).expanduser() if chosen is not None else user_profiles_dir()
    if chosen is not None and path.exists() and not path.is_dir():
        raise ProfileError(f"The profiles folder {path} is a file, not a folder.")
    return path


# --------------------------------------------------------------------------- schema migration


def _settings_v1_to_v2(settings: dict[str, Any], where: str) -> dict[str, Any]:
    """v1 said `tv` and `draft_len`; its engine had no bonus token, so a v1 file means bonus off."""
    out = dict(settings)
    for old, new in (("tv", "tv_budget"), ("draft_len", "k")):
        if old in out:
            if new in out:
                raise ProfileError(f"{where} sets both {old} and {new}; schema 1 knows only {old}.")
            out[new] = out.pop(old)
    out.setdefault("bonus", False)
    return out


# Entry n upgrades a settings table from schema n to n + 1.
_SETTINGS_MIGRATIONS: dict[int, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    1: _settings_v1_to_v2,
}


def _migrate_settings(settings: dict[str, Any], version: int, where: str) -> dict[str, Any]:
    while version < SCHEMA:
        settings = _SETTINGS_MIGRATIONS[version](settings, where)
        version += 1
    return settings


def _check_schema(doc: Any, where: str) -> int:
    """The file's schema version; refuses a missing, odd or newer one without touching the file."""
    version = doc.get("schema") if isinstance(doc, dict) else None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ProfileError(
            f"{where} is corrupt (it has no valid schema version), so it was left untouched."
        )
    if version > SCHEMA:
        raise ProfileError(
            f"{where} was written by a newer specdec-tui (schema {version}, this one reads up to "
            f"{SCHEMA}), so it was left untouched."
        )
    return version


# --------------------------------------------------------------------------- (de)serialising


def _settings_from_table(table: dict[str, Any], where: str) -> Settings:
    for key, value in table.items():
        if isinstance(value, dict | list):
            raise ProfileError(
                f"{where}: setting {key} must be a single value, not a table or list."
            )
    try:
        return Settings.from_dict(table)
    except SettingsError as exc:
        raise ProfileError(f"{where}: {lower_first(str(exc))}") from None


def profile_from_toml(doc: dict[str, Any], where: str) -> tuple[Settings, str]:
    """(settings, description) of a parsed NAME.toml, migrated; `where` names it in errors."""
    version = _check_schema(doc, where)
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise ProfileError(
            f"{where} has unknown top-level key(s) {', '.join(unknown)}; "
            "a profile holds only schema, description and [settings]."
        )
    table = doc.get("settings")
    if not isinstance(table, dict):
        raise ProfileError(
            f"{where} is corrupt (it has no [settings] table), so it was left untouched."
        )
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise ProfileError(f"{where}: description must be a string.")
    return _settings_from_table(_migrate_settings(table, version, where), where), description


def dump_toml(profile: Profile) -> bytes:
    """NAME.toml's bytes at the current schema, with a header saying how to edit it."""
    doc = {
        "schema": SCHEMA,
        "description": profile.description,
        "settings": profile.settings.to_dict(),
    }
    return (_TOML_HEADER + "\n" + tomli_w.dumps(doc)).encode("utf-8")


def run_to_doc(run: RecordedRun) -> dict[str, Any]:
    """NAME.run.json's document at the current schema."""
    return {
        "schema": SCHEMA,
        "environment": run.environment,
        "settings": run.settings.to_dict() if run.settings is not None else None,
        "settings_changes": [{"round": i, "changes": c} for i, c in run.settings_changes],
        "prompt": run.prompt,
        "calibration": run.calibration,
        "summary": run.summary.to_dict(),
        "rounds": [r.to_dict() for r in run.rounds],
    }


def dump_run(run: RecordedRun) -> bytes:
    """NAME.run.json's bytes."""
    return json.dumps(run_to_doc(run), indent=1).encode("utf-8")


def _run_from_doc(doc: Any, where: str) -> RecordedRun:
    version = _check_schema(doc, where)
    try:
        table = doc.get("settings")
        settings = (
            None
            if table is None
            else _settings_from_table(_migrate_settings(table, version, where), where)
        )
        environment = doc.get("environment") or {}
        calibration = doc.get("calibration")
        if not isinstance(environment, dict) or not isinstance(calibration, dict | None):
            raise TypeError("environment and calibration must be objects")
        return RecordedRun(
            environment=environment,
            rounds=_rounds_from(doc["rounds"]),
            summary=_summary_from(doc["summary"]),
            prompt=_prompt_of(doc),
            calibration=calibration,
            settings=settings,
            settings_changes=_changes_from(doc.get("settings_changes", []), settings, where),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ProfileError(f"{where} is corrupt ({detail}), so it was left untouched.") from None


def _prompt_of(doc: dict[str, Any]) -> str:
    prompt = doc.get("prompt", "")
    if not isinstance(prompt, str):
        raise TypeError("the prompt must be a string")
    return prompt


def _changes_from(
    changes: Any, first: Settings | None, where: str
) -> tuple[tuple[int, dict[str, Any]], ...]:
    """A run's mid-run settings changes, each applied to the settings before it, so a change
    naming no setting or an out-of-range value is refused like a bad profile."""
    if not isinstance(changes, list):
        raise TypeError("settings_changes must be a list")
    out: list[tuple[int, dict[str, Any]]] = []
    s = first
    for entry in changes:
        if not isinstance(entry, dict) or not isinstance(entry.get("changes"), dict):
            raise TypeError("each settings change must be an object with its changes")
        at = entry.get("round")
        if isinstance(at, bool) or not isinstance(at, int) or at < 0:
            raise TypeError(f"a settings change's round must be a whole number, got {at!r}")
        if s is None:
            raise TypeError("settings_changes need the run's settings")
        s = _settings_from_table({**s.to_dict(), **entry["changes"]},
                                 f"{where} (its settings change at round {at})")
        out.append((at, dict(entry["changes"])))
    return tuple(out)


def _rounds_from(rounds: Any) -> tuple[RoundEvent, ...]:
    """The recorded rounds, or a TypeError that says which round is wrong and how."""
    if not isinstance(rounds, list):
        raise TypeError("rounds must be a list")
    known = {f.name for f in dataclasses.fields(RoundEvent)}
    out = []
    for i, r in enumerate(rounds):
        if not isinstance(r, dict):
            raise TypeError(f"round {i} is not an object")
        unknown = sorted(set(r) - known)
        if unknown:
            raise TypeError(f"round {i} has unknown key(s) {', '.join(unknown)}")
        tokens = r.get("tokens")
        if not isinstance(tokens, list) or not all(
            isinstance(t, list) and len(t) == 2 and isinstance(t[0], int)
            and not isinstance(t[0], bool) and isinstance(t[1], str)
            for t in tokens
        ):
            raise TypeError(f"round {i}'s tokens must be a list of [id, origin] pairs")
        check_round(r, i)  # types, finite numbers in range: core/profile/run_check.py
        try:
            out.append(RoundEvent.from_dict(r))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"round {i} is malformed ({_first_line(exc)})") from None
    return tuple(out)


def _summary_from(summary: Any) -> RunSummary:
    """The recorded summary, or a TypeError naming what it lacks or has too many of."""
    if not isinstance(summary, dict):
        raise TypeError("the summary is not an object")
    fields = dataclasses.fields(RunSummary)
    missing = [f.name for f in fields if f.name not in summary
               and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise TypeError(f"the summary lacks {', '.join(missing)}")
    unknown = sorted(set(summary) - {f.name for f in fields})
    if unknown:
        raise TypeError(f"the summary has unknown key(s) {', '.join(unknown)}")
    check_summary(summary)
    return RunSummary.from_dict(summary)


# --------------------------------------------------------------------------- reading


def _read_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes, bounded (core/io/untrusted.py): a profile folder is shared and copied."""
    try:
        return read_bounded(path, limit, "profile file")
    except UntrustedFileError as exc:
        raise ProfileError(str(exc)) from None
    except FileNotFoundError:
        raise ProfileError(f"There is no profile file at {path}.") from None
    except OSError as exc:
        raise ProfileError(f"Could not read {path}: {reason(exc)}.") from None


def read_toml(path: Path) -> dict[str, Any]:
    """A NAME.toml parsed, or the sentence saying why it cannot be."""
    data = _read_bytes(path, TOML_MAX_BYTES)
    try:
        text = data.decode("utf-8-sig")  # a BOM (Windows editors) is not corruption
        check_depth(text, str(path))
        return tomllib.loads(text)
    except UntrustedFileError as exc:
        raise ProfileError(str(exc)) from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ProfileError(
            f"{path} is corrupt (not valid TOML: {_first_line(exc)}), so it was left untouched."
        ) from None


def _read_run(path: Path) -> RecordedRun:
    data = _read_bytes(path, JSON_MAX_BYTES)
    try:
        text = data.decode("utf-8-sig")
        check_depth(text, str(path))
        doc = json.loads(text)
    except UntrustedFileError as exc:
        raise ProfileError(str(exc)) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProfileError(
            f"{path} is corrupt (not valid JSON: {_first_line(exc)}), so it was left untouched."
        ) from None
    return _run_from_doc(doc, str(path))


def load_file(path: str | os.PathLike[str], with_run: bool = True) -> Profile:
    """Load NAME.toml (and NAME.run.json beside it) from anywhere, e.g. `--profile ./x.toml`."""
    path = Path(path)
    if not path.name.endswith(TOML_SUFFIX):
        raise ProfileError(f"A profile file ends in {TOML_SUFFIX}; got {path}.")
    name = path.name[: -len(TOML_SUFFIX)]
    settings, description = profile_from_toml(read_toml(path), str(path))
    run = None
    run_path = path.with_name(name + RUN_SUFFIX)
    if with_run and run_path.exists():
        run = _read_run(run_path)
    return Profile(name=name, settings=settings, description=description, run=run)
