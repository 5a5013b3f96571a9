"""ProfileStore: a folder of profiles whose saves never lose or half-write a file.

Every save stages its files as fsynced temp files (core.io.atomic) and renames them into place;
without `overwrite` it never replaces an existing name, here or among the shipped presets, but
takes the first free `name-2`, `name-3`, ... even when another saver races it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

from core.io.atomic import fsync_dir, publish_new, stage, unlink_quietly
from core.profile.files import (
    RUN_SUFFIX,
    TOML_SUFFIX,
    dump_run,
    dump_toml,
    load_file,
    profile_from_toml,
    profiles_dir,
    read_toml,
    reason,
    shipped_presets_dir,
)
from core.profile.records import (
    MAX_NAME,
    Profile,
    ProfileError,
    ProfileInfo,
    validate_name,
)

_MAX_FREE_NAME_TRIES = 10_000


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
        """Where `name`'s settings are saved in this folder."""
        return self.directory / (validate_name(name) + TOML_SUFFIX)

    def run_path(self, name: str) -> Path:
        """Where `name`'s recorded run is saved in this folder."""
        return self.directory / (validate_name(name) + RUN_SUFFIX)

    def _find(self, name: str) -> Path | None:
        validate_name(name)
        for folder in (self.directory, self.presets):
            if folder is not None and (folder / (name + TOML_SUFFIX)).is_file():
                return folder / (name + TOML_SUFFIX)
        return None

    def exists(self, name: str) -> bool:
        """True when `name` is saved here or is a shipped preset."""
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
        and a run recorded under the old settings is removed rather than left to mislead; a
        description the save does not give (the app's save dialog edits settings and the
        name only) is the one already written, never erased.
        """
        name = validate_name(profile.name)
        if overwrite and not profile.description:
            profile = dataclasses.replace(profile, description=self._description(name))
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ProfileError(
                f"Could not create the profiles folder {self.directory}: {reason(exc)}."
            ) from None
        toml_bytes = dump_toml(profile)
        run_bytes = dump_run(profile.run) if profile.run is not None else None
        staged: list[Path] = []
        try:
            try:
                staged.append(stage(self.directory, name, toml_bytes, like=self.toml_path(name)))
                if run_bytes is not None:
                    staged.append(stage(self.directory, name, run_bytes, like=self.run_path(name)))
            except OSError as exc:
                raise self._failed(name, exc) from None
            tmp_run = staged[1] if run_bytes is not None else None
            if overwrite:
                saved = self._publish_over(name, staged[0], tmp_run)
            else:
                saved = self._publish_free(name, staged[0], tmp_run)
            fsync_dir(self.directory)
            return saved
        finally:
            for tmp in staged:
                unlink_quietly(tmp)

    def _description(self, name: str) -> str:
        """The description in this folder's NAME.toml; "" when there is none to keep (no file,
        or one that cannot be read: its error is said where it is loaded)."""
        path = self.toml_path(name)
        try:
            _, description = profile_from_toml(read_toml(path), str(path))
        except ProfileError:
            return ""
        return description

    def _failed(self, name: str, exc: OSError) -> ProfileError:
        return ProfileError(
            f"Could not save profile {name!r} in {self.directory}: {reason(exc)}; "
            "nothing was changed."
        )

    def _publish_free(self, name: str, tmp_toml: Path, tmp_run: Path | None) -> str:
        for candidate in _candidates(name):
            if self._taken(candidate):
                continue
            toml_path = self.directory / (candidate + TOML_SUFFIX)
            try:
                publish_new(tmp_toml, toml_path)
            except FileExistsError:
                continue  # someone else took it a moment ago
            except OSError as exc:
                raise self._failed(name, exc) from None
            if tmp_run is not None:
                try:
                    publish_new(tmp_run, self.directory / (candidate + RUN_SUFFIX))
                except OSError as exc:
                    unlink_quietly(toml_path)  # ours, created a moment ago
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
                f"Saved the settings of profile {name!r}, but not its recorded run: {reason(exc)}."
            ) from None
        return name

    def names(self) -> list[str]:
        """Every name `list()` shows, sorted."""
        return [info.name for info in self.list()]

    def list(self) -> list[ProfileInfo]:
        """Every profile here and every preset not shadowed by one; unreadable ones say why."""
        found: dict[str, ProfileInfo] = {}
        for folder, preset in ((self.directory, False), (self.presets, True)):
            if folder is None or not folder.is_dir():
                continue
            for path in sorted(folder.glob("*" + TOML_SUFFIX)):
                name = path.name[: -len(TOML_SUFFIX)]
                if name in found or not _allowed(name):
                    continue
                description, error = "", None
                try:
                    _, description = profile_from_toml(read_toml(path), str(path))
                except ProfileError as exc:
                    error = str(exc)
                has_run = (folder / (name + RUN_SUFFIX)).is_file()
                found[name] = ProfileInfo(name, description, has_run, preset, error)
        return [found[n] for n in sorted(found)]


    def skipped(self) -> list[tuple[Path, str]]:
        """Profile files `list()` leaves out because their names are not allowed, and why."""
        out: list[tuple[Path, str]] = []
        for folder in (self.directory, self.presets):
            if folder is None or not folder.is_dir():
                continue
            for path in sorted(folder.glob("*" + TOML_SUFFIX)):
                name = path.name[: -len(TOML_SUFFIX)]
                if not _allowed(name):
                    try:
                        validate_name(name)
                    except ProfileError as exc:
                        out.append((path, str(exc)))
        return out


def _is_path_spec(spec: str) -> bool:
    return spec.endswith(TOML_SUFFIX) or "/" in spec or os.sep in spec


def load_profile(
    spec: str, profiles_dir_override: str | None = None, with_run: bool = True
) -> Profile:
    """What `--profile SPEC` means: a path when it looks like one, else a name in the store."""
    if _is_path_spec(spec):
        return load_file(spec, with_run=with_run)
    return ProfileStore.default(profiles_dir_override).load(spec, with_run=with_run)


def profile_paths(spec: str, profiles_dir_override: str | None = None) -> list[Path]:
    """The files `load_profile(spec)` reads (its .toml and the .run.json beside it), for a
    command that must never write onto its own inputs; [] when there is none to find."""
    try:
        if _is_path_spec(spec):
            toml = Path(spec).expanduser()
        else:
            found = ProfileStore.default(profiles_dir_override)._find(spec)
            if found is None:
                return []
            toml = found
    except (ProfileError, OSError, ValueError):
        return []  # the load itself says why, in its own sentence
    if not toml.name.endswith(TOML_SUFFIX):
        return [toml]
    return [toml, toml.with_name(toml.name[: -len(TOML_SUFFIX)] + RUN_SUFFIX)]


def _allowed(name: str) -> bool:
    """Whether a file's stem is a name `validate_name` takes (else `skipped()` says why)."""
    try:
        validate_name(name)
    except ProfileError:
        return False
    return True


def _candidates(name: str) -> Iterator[str]:
    """`name`, then `name-2`, `name-3`, ...: a long name is shortened so that each candidate
    is itself an allowed name (a 100-character name once became a 102-character one that
    `list` skipped and `show` refused)."""
    yield name
    for i in range(2, _MAX_FREE_NAME_TRIES):
        suffix = f"-{i}"
        yield name[: MAX_NAME - len(suffix)] + suffix


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
