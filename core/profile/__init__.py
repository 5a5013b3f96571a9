"""Profiles: named Settings plus an optional recorded run, kept on disk so they can be trusted.

A profile is what a user compares and switches between, so its files are built to survive
people and accidents: settings are TOML a person edits and diffs (``NAME.toml``), a recorded
run is JSON beside it (``NAME.run.json``); both carry a schema version; an older version is
migrated in memory, a newer or corrupt one is refused in one sentence and never touched; every
write goes to a temp file that is fsynced and renamed, and a save never replaces an existing
file unless asked (a free name is chosen instead).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import errno
import io
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs
import tomli_w

from core.errors import UserError
from core.events import PHASES, RoundEvent, RunSummary
from core.settings import Settings, SettingsError

SCHEMA = 2  # of both files; bump it and add a migration when a stored key changes meaning
TOML_SUFFIX = ".toml"
RUN_SUFFIX = ".run.json"
APP_NAME = "specdec-tui"
CSV_COLUMNS = (
    "index",
    "tokens",
    "proposed",
    "accepted",
    "rows",
    "kernel",
    *(f"{p}_ms" for p in PHASES),
    "total_ms",
    "tv",
    "traced",
)
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
_TOP_KEYS = frozenset({"schema", "description", "settings"})
_MAX_FREE_NAME_TRIES = 10_000
_TOML_HEADER = (
    "# specdec-tui profile: edit freely; unknown keys are refused.\n"
    "# A recorded run, when there is one, is NAME.run.json beside this file.\n"
)


class ProfileError(UserError):
    """A profile cannot be named, read or written; one sentence, and saved files stay intact."""


# --------------------------------------------------------------------------- the types


@dataclass(frozen=True)
class RecordedRun:
    """One finished run under a profile's settings: what the listeners saw, and where."""

    environment: dict[str, Any]
    rounds: tuple[RoundEvent, ...]
    summary: RunSummary
    prompt: str = ""
    calibration: dict[str, Any] | None = None  # VerifyCostCurve.to_dict(), kept opaque
    settings: Settings | None = None  # what the run was recorded with, to spot a stale run


@dataclass(frozen=True)
class Profile:
    """A named set of Settings, and the run recorded with them when there is one."""

    name: str
    settings: Settings
    description: str = ""
    run: RecordedRun | None = None

    @property
    def run_is_stale(self) -> bool:
        """True when the settings were edited after the run was recorded: its numbers lie."""
        return (
            self.run is not None
            and self.run.settings is not None
            and self.run.settings != self.settings
        )


@dataclass(frozen=True)
class ProfileInfo:
    """One line of a listing; `error` holds the sentence when the file cannot be read."""

    name: str
    description: str
    has_run: bool
    preset: bool = False  # found only among the shipped presets
    error: str | None = None


# --------------------------------------------------------------------------- names, places


def validate_name(name: str) -> str:
    """Refuse names that could escape the folder or hide as dotfiles (one sentence)."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ProfileError(
            f"Profile name {name!r} is not allowed: use up to 100 letters, digits, '.', '_', "
            "'+' or '-', starting with a letter or digit, and no path separators."
        )
    return name


def shipped_presets_dir() -> Path | None:
    """The repository's profiles/ folder (the presets), when this checkout has one."""
    path = Path(__file__).resolve().parents[2] / "profiles"
    return path if path.is_dir() else None


def profiles_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """Where profiles live: the override, else ./profiles/ when present, else the user data dir."""
    if override is not None:
        path = Path(override).expanduser()
        if path.exists() and not path.is_dir():
            raise ProfileError(f"The profiles folder {path} is a file, not a folder.")
        return path
    local = Path.cwd() / "profiles"
    if local.is_dir():
        return local
    path = Path(platformdirs.user_data_dir(APP_NAME)) / "profiles"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProfileError(
            f"Could not create the profiles folder {path}: {_reason(exc)}."
        ) from None
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
        raise ProfileError(f"{where}: {_lower_first(str(exc))}") from None


def _profile_from_toml(doc: dict[str, Any], where: str) -> tuple[Settings, str]:
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


def _dump_toml(profile: Profile) -> bytes:
    doc = {
        "schema": SCHEMA,
        "description": profile.description,
        "settings": profile.settings.to_dict(),
    }
    return (_TOML_HEADER + "\n" + tomli_w.dumps(doc)).encode("utf-8")


def _run_to_doc(run: RecordedRun) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "environment": run.environment,
        "settings": run.settings.to_dict() if run.settings is not None else None,
        "prompt": run.prompt,
        "calibration": run.calibration,
        "summary": run.summary.to_dict(),
        "rounds": [r.to_dict() for r in run.rounds],
    }


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
            rounds=tuple(RoundEvent.from_dict(r) for r in doc["rounds"]),
            summary=RunSummary.from_dict(doc["summary"]),
            prompt=str(doc.get("prompt", "")),
            calibration=calibration,
            settings=settings,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ProfileError(f"{where} is corrupt ({detail}), so it was left untouched.") from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"There is no profile file at {path}.") from None
    except OSError as exc:
        raise ProfileError(f"Could not read {path}: {_reason(exc)}.") from None


def _read_toml(path: Path) -> dict[str, Any]:
    data = _read_bytes(path)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(
            f"{path} is corrupt (not valid TOML: {_first_line(exc)}), so it was left untouched."
        ) from None


def _read_run(path: Path) -> RecordedRun:
    data = _read_bytes(path)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
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
    settings, description = _profile_from_toml(_read_toml(path), str(path))
    run = None
    run_path = path.with_name(name + RUN_SUFFIX)
    if with_run and run_path.exists():
        run = _read_run(run_path)
    return Profile(name=name, settings=settings, description=description, run=run)


def load_profile(spec: str, profiles_dir_override: str | None = None) -> Profile:
    """What `--profile SPEC` means: a path when it looks like one, else a name in the store."""
    if spec.endswith(TOML_SUFFIX) or "/" in spec or os.sep in spec:
        return load_file(spec)
    return ProfileStore.default(profiles_dir_override).load(spec)


# --------------------------------------------------------------------------- atomic writes


def _reason(exc: OSError) -> str:
    """An OSError as the tail of a sentence a user can act on."""
    known = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exceeded",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EROFS: "the file system is read-only",
    }
    if exc.errno in known:
        return known[exc.errno]
    return (exc.strerror or str(exc) or type(exc).__name__).rstrip(".").lower()


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__


def _unlink_quietly(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _fsync_dir(directory: Path) -> None:
    """Make the renames durable; some systems cannot open a folder, which only costs durability."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _stage(directory: Path, stem: str, data: bytes, like: Path | None = None) -> Path:
    """Write data to a fsynced temp file in `directory`: the one step that can fill a disk."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        mode = 0o644
        if like is not None:
            with contextlib.suppress(OSError):
                mode = like.stat().st_mode & 0o777
        os.chmod(tmp, mode)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return Path(tmp)


def _publish_new(tmp: Path, dest: Path) -> None:
    """Rename tmp to dest only if dest does not exist (FileExistsError otherwise), race-free."""
    try:
        os.link(tmp, dest)  # fails rather than clobbers, even if another saver got there first
    except FileExistsError:
        raise
    except OSError:
        # No hard links here (some network or FAT file systems): check, then rename.
        if dest.exists():
            raise FileExistsError(errno.EEXIST, "File exists", str(dest)) from None
        os.replace(tmp, dest)
        return
    _unlink_quietly(tmp)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` atomically: readers see the old file or the new, never half."""
    path = Path(path)
    tmp: Path | None = None
    try:
        tmp = _stage(path.parent, path.name, data, like=path)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise ProfileError(
            f"Could not write {path}: {_reason(exc)}; nothing was changed."
        ) from None
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)


# --------------------------------------------------------------------------- the store


class ProfileStore:
    """A folder of profiles, with the shipped presets as a read-only fallback for names."""

    def __init__(self, directory: str | os.PathLike[str], presets: Path | None = None) -> None:
        self.directory = Path(directory)
        same = presets is not None and _same_dir(presets, self.directory)
        self.presets = None if same else presets

    @classmethod
    def default(cls, override: str | None = None) -> ProfileStore:
        """The store the CLI, bench and TUI use: `profiles_dir(override)` plus the presets."""
        return cls(profiles_dir(override), presets=shipped_presets_dir())

    def toml_path(self, name: str) -> Path:
        return self.directory / (validate_name(name) + TOML_SUFFIX)

    def run_path(self, name: str) -> Path:
        return self.directory / (validate_name(name) + RUN_SUFFIX)

    def _find(self, name: str) -> Path | None:
        validate_name(name)
        for folder in (self.directory, self.presets):
            if folder is not None and (folder / (name + TOML_SUFFIX)).is_file():
                return folder / (name + TOML_SUFFIX)
        return None

    def exists(self, name: str) -> bool:
        return self._find(name) is not None

    def load(self, name: str, with_run: bool = True) -> Profile:
        """Load a profile by name; `with_run=False` skips the (possibly large) run for switching."""
        path = self._find(name)
        if path is None:
            raise ProfileError(
                f"There is no profile named {name!r} in {self.directory}; "
                "`specdec-tui profiles list` shows the ones there are."
            )
        return load_file(path, with_run=with_run)

    def _taken(self, name: str) -> bool:
        folders = [f for f in (self.directory, self.presets) if f is not None]
        return any(
            (f / (name + TOML_SUFFIX)).exists() or (f / (name + RUN_SUFFIX)).exists()
            for f in folders
        )

    def save(self, profile: Profile, overwrite: bool = False) -> str:
        """Write the profile atomically and return the name it was saved under.

        Without `overwrite`, an existing name (here or among the presets) is never replaced:
        the first free `name-2`, `name-3`, ... is used. With it, the whole profile is replaced,
        and a run recorded under the old settings is removed rather than left to mislead.
        """
        name = validate_name(profile.name)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ProfileError(
                f"Could not create the profiles folder {self.directory}: {_reason(exc)}."
            ) from None
        toml_bytes = _dump_toml(profile)
        run_bytes = (
            json.dumps(_run_to_doc(profile.run), indent=1).encode("utf-8")
            if profile.run is not None
            else None
        )
        staged: list[Path] = []
        try:
            try:
                staged.append(_stage(self.directory, name, toml_bytes, like=self.toml_path(name)))
                if run_bytes is not None:
                    staged.append(_stage(self.directory, name, run_bytes, like=self.run_path(name)))
            except OSError as exc:
                raise self._failed(name, exc) from None
            tmp_run = staged[1] if run_bytes is not None else None
            if overwrite:
                saved = self._publish_over(name, staged[0], tmp_run)
            else:
                saved = self._publish_free(name, staged[0], tmp_run)
            _fsync_dir(self.directory)
            return saved
        finally:
            for tmp in staged:
                _unlink_quietly(tmp)

    def _failed(self, name: str, exc: OSError) -> ProfileError:
        return ProfileError(
            f"Could not save profile {name!r} in {self.directory}: {_reason(exc)}; "
            "nothing was changed."
        )

    def _publish_free(self, name: str, tmp_toml: Path, tmp_run: Path | None) -> str:
        for candidate in _candidates(name):
            if self._taken(candidate):
                continue
            toml_path = self.directory / (candidate + TOML_SUFFIX)
            try:
                _publish_new(tmp_toml, toml_path)
            except FileExistsError:
                continue  # someone else took it a moment ago
            except OSError as exc:
                raise self._failed(name, exc) from None
            if tmp_run is not None:
                try:
                    _publish_new(tmp_run, self.directory / (candidate + RUN_SUFFIX))
                except OSError as exc:
                    _unlink_quietly(toml_path)  # ours, created a moment ago
                    raise self._failed(name, exc) from None
            return candidate
        raise ProfileError(f"Could not find a free name for profile {name!r} in {self.directory}.")

    def _publish_over(self, name: str, tmp_toml: Path, tmp_run: Path | None) -> str:
        try:
            os.replace(tmp_toml, self.toml_path(name))
        except OSError as exc:
            raise self._failed(name, exc) from None
        try:
            if tmp_run is not None:
                os.replace(tmp_run, self.run_path(name))
            else:
                self.run_path(name).unlink(missing_ok=True)
        except OSError as exc:
            raise ProfileError(
                f"Saved the settings of profile {name!r}, but not its recorded run: {_reason(exc)}."
            ) from None
        return name

    def names(self) -> list[str]:
        return [info.name for info in self.list()]

    def list(self) -> list[ProfileInfo]:
        """Every profile here and every preset not shadowed by one; unreadable ones say why."""
        found: dict[str, ProfileInfo] = {}
        for folder, preset in ((self.directory, False), (self.presets, True)):
            if folder is None or not folder.is_dir():
                continue
            for path in sorted(folder.glob("*" + TOML_SUFFIX)):
                name = path.name[: -len(TOML_SUFFIX)]
                if name in found or not _NAME_RE.fullmatch(name):
                    continue
                description, error = "", None
                try:
                    _, description = _profile_from_toml(_read_toml(path), str(path))
                except ProfileError as exc:
                    error = str(exc)
                has_run = (folder / (name + RUN_SUFFIX)).is_file()
                found[name] = ProfileInfo(name, description, has_run, preset, error)
        return [found[n] for n in sorted(found)]


def _candidates(name: str) -> Iterator[str]:
    yield name
    for i in range(2, _MAX_FREE_NAME_TRIES):
        yield f"{name}-{i}"


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


# --------------------------------------------------------------------------- recording


def record_environment() -> dict[str, Any]:
    """Where a run happened, so numbers from two machines are never compared unknowingly."""
    import platform
    from importlib import metadata

    import mlx.core as mx

    device = mx.default_device()
    if device.type == mx.cpu:
        backend = "cpu"
    elif mx.metal.is_available():
        backend = "metal"
    elif getattr(mx, "cuda", None) is not None and mx.cuda.is_available():
        backend = "cuda"
    else:
        backend = "gpu"
    try:
        info = {str(k): v for k, v in mx.device_info(device).items()}
    except Exception:  # older MLX or a backend without the query: the rest still helps
        info = {}

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {
        "backend": backend,
        "device_name": str(info.get("device_name", "")),
        "device_info": info,
        "mlx": version("mlx"),
        "mlx_lm": version("mlx-lm"),
        "specdec_tui": version("specdec-tui"),
        "os": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


class ProfileRecorder:
    """The profile writer listener: keeps one run's rounds and summary, then makes a Profile."""

    def __init__(self, name: str, settings: Settings, description: str = "") -> None:
        self.name = validate_name(name)
        self.settings = settings
        self.description = description
        self.rounds: list[RoundEvent] = []
        self.summary: RunSummary | None = None

    def add(self, item: RoundEvent | RunSummary) -> None:
        if isinstance(item, RoundEvent):
            self.rounds.append(item)
        elif isinstance(item, RunSummary):
            self.summary = item
        else:
            raise TypeError(
                f"ProfileRecorder takes RoundEvent or RunSummary, not {type(item).__name__}"
            )

    def profile(
        self,
        *,
        prompt: str = "",
        calibration: Any = None,
        environment: dict[str, Any] | None = None,
    ) -> Profile:
        """The recorded profile; `calibration` is a VerifyCostCurve or its dict, or None."""
        if self.summary is None:
            raise ProfileError("The run has not finished yet, so there is no run to record.")
        if calibration is not None and not isinstance(calibration, dict):
            calibration = calibration.to_dict()
        run = RecordedRun(
            environment=record_environment() if environment is None else environment,
            rounds=tuple(self.rounds),
            summary=self.summary,
            prompt=prompt,
            calibration=calibration,
            settings=self.settings,
        )
        return Profile(self.name, self.settings, self.description, run)


# --------------------------------------------------------------------------- comparing, exporting


def diff_settings(a: Settings, b: Settings) -> list[tuple[str, Any, Any]]:
    """(field, a's value, b's value) for the fields that differ, in declaration order."""
    return [
        (f.name, getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(Settings)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


def summary_metrics(run: RecordedRun) -> list[tuple[str, float | None]]:
    """The numbers people compare runs by; phase rows are per request, None when untraced."""
    s = run.summary
    rows: list[tuple[str, float | None]] = [
        ("E2E s", s.e2e_s),
        ("TTFT s", s.ttft_s),
        ("decode tok/s", s.decode_tok_s),
        ("acceptance", s.acceptance),
        ("mean accepted length", s.mean_accepted_length),
        ("rounds", float(s.rounds)),
        ("tokens", float(s.tokens)),
        ("mean TV", s.mean_tv),
    ]
    for phase in PHASES:
        value = s.phase_s.get(phase) if s.traced else None
        rows.append((f"{phase} ms", None if value is None else value * 1e3))
    return rows


def rounds_csv(run: RecordedRun) -> str:
    """One row per round: what was proposed and kept, the kernel, and the phase split in ms."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in run.rounds:
        ms = r.timings.as_ms()
        writer.writerow(
            [
                r.index,
                len(r.tokens),
                r.proposed,
                r.accepted,
                r.rows,
                r.kernel,
                *(f"{ms[p]:.4f}" for p in (*PHASES, "total")),
                "" if r.tv is None else f"{r.tv:.6g}",
                int(r.traced),
            ]
        )
    return buf.getvalue()


def export_csv(profile: Profile, path: str | os.PathLike[str]) -> int:
    """Write the recorded rounds as CSV (atomically); returns how many rounds were written."""
    if profile.run is None:
        raise ProfileError(
            f"Profile {profile.name!r} has no recorded run to export; record one from the app "
            "or the bench first."
        )
    write_atomic(path, rounds_csv(profile.run).encode("utf-8"))
    return len(profile.run.rounds)


# --------------------------------------------------------------------------- CLI


def add_profiles_arguments(parser: argparse.ArgumentParser) -> None:
    """`profiles list | show NAME | diff A B | export NAME --csv PATH`."""
    sub = parser.add_subparsers(dest="profiles_command", metavar="ACTION", required=True)
    actions = {
        "list": sub.add_parser("list", help="saved profiles and shipped presets"),
        "show": sub.add_parser("show", help="one profile's settings and recorded run"),
        "diff": sub.add_parser("diff", help="the settings (and run metrics) that differ"),
        "export": sub.add_parser("export", help="a recorded run's rounds as CSV"),
    }
    actions["show"].add_argument("name", help="profile name, or a path to a .toml file")
    actions["diff"].add_argument("a", help="profile name or .toml path")
    actions["diff"].add_argument("b", help="profile name or .toml path")
    actions["export"].add_argument("name", help="profile name, or a path to a .toml file")
    actions["export"].add_argument("--csv", dest="csv_path", required=True, metavar="PATH")
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
        store = ProfileStore.default(override)
        _print_list(console, store)
    elif command == "show":
        _print_show(console, load_profile(args.name, override))
    elif command == "diff":
        _print_diff(console, load_profile(args.a, override), load_profile(args.b, override))
    elif command == "export":
        profile = load_profile(args.name, override)
        count = export_csv(profile, args.csv_path)
        console.print(f"wrote {count} rounds of {profile.name} to {args.csv_path}")
    else:  # argparse refuses other actions; kept for direct callers
        raise ProfileError(f"Unknown profiles action {command!r}.")
    return 0


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _print_list(console: Any, store: ProfileStore) -> None:
    from rich.table import Table

    infos = store.list()
    table = Table(title=f"profiles in {store.directory}", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("run")
    table.add_column("source")
    table.add_column("description")
    for info in infos:
        description = info.description if info.error is None else f"[red]{info.error}[/red]"
        table.add_row(
            info.name,
            "yes" if info.has_run else "-",
            "preset" if info.preset else "saved",
            description,
        )
    if not infos:
        console.print(f"no profiles in {store.directory}")
        return
    console.print(table)


def _print_show(console: Any, profile: Profile) -> None:
    from rich.table import Table

    defaults = Settings()
    console.print(f"[bold]{profile.name}[/bold]  {profile.description}", highlight=False)
    table = Table(title="settings", title_justify="left")
    table.add_column("setting", no_wrap=True)
    table.add_column("value")
    table.add_column("default")
    for f in dataclasses.fields(Settings):
        value, default = getattr(profile.settings, f.name), getattr(defaults, f.name)
        changed = value != default
        table.add_row(
            f.name,
            f"[bold]{_fmt(value)}[/bold]" if changed else _fmt(value),
            _fmt(default) if changed else "",
        )
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
        info.add_row(key, _fmt(env.get(key)))
    prompt = run.prompt if len(run.prompt) <= 60 else run.prompt[:57] + "..."
    info.add_row("prompt", prompt or "-")
    info.add_row("calibration", "yes" if run.calibration else "-")
    for label, value in summary_metrics(run):
        info.add_row(label, _fmt(value))
    console.print(info)
    if profile.run_is_stale:
        console.print("[yellow]the settings changed after this run was recorded[/yellow]")


def _print_diff(console: Any, a: Profile, b: Profile) -> None:
    from rich.table import Table

    changed = diff_settings(a.settings, b.settings)
    if changed:
        table = Table(title="settings that differ", title_justify="left")
        table.add_column("setting", no_wrap=True)
        table.add_column(a.name)
        table.add_column(b.name)
        for key, va, vb in changed:
            table.add_row(key, _fmt(va), _fmt(vb))
        console.print(table)
    else:
        console.print(f"{a.name} and {b.name} have the same settings")
    if a.run is None or b.run is None:
        missing = [p.name for p in (a, b) if p.run is None]
        console.print(f"no recorded run for {', '.join(missing)}, so no metrics to compare")
        return
    table = Table(title="recorded runs", title_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column(a.name)
    table.add_column(b.name)
    table.add_column(f"{b.name} / {a.name}")
    for key in ("backend", "device_name"):
        table.add_row(key, _fmt(a.run.environment.get(key)), _fmt(b.run.environment.get(key)))
    for (label, va), (_, vb) in zip(summary_metrics(a.run), summary_metrics(b.run), strict=True):
        ratio = vb / va if va and vb is not None else None
        table.add_row(label, _fmt(va), _fmt(vb), "-" if ratio is None else f"{ratio:.3g}x")
    console.print(table)
