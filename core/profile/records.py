"""What a profile is: named Settings, an optional recorded run, a listing line, and its error.

Kept free of file handling so the app, the bench and the recorder can hold profiles without
pulling in TOML, JSON or the store; `validate_name` lives here because a name is part of what
makes a Profile safe to put on disk at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.errors import UserError
from core.events import RoundEvent, RunSummary
from core.settings import Settings

MAX_NAME = 100
NAME_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._+-]{{0,{MAX_NAME - 1}}}")


class ProfileError(UserError):
    """A profile cannot be named, read or written; one sentence, and saved files stay intact."""


@dataclass(frozen=True)
class RecordedRun:
    """One finished run under a profile's settings: what the listeners saw, and where."""

    environment: dict[str, Any]
    rounds: tuple[RoundEvent, ...]
    summary: RunSummary
    prompt: str = ""
    calibration: dict[str, Any] | None = None  # VerifyCostCurve.to_dict(), kept opaque
    settings: Settings | None = None  # what the run was recorded with, to spot a stale run
    # (round index, {field: new value}) for each round that ran with other settings than the
    # round before it (a key pressed mid-turn): `settings` is the first round's
    settings_changes: tuple[tuple[int, dict[str, Any]], ...] = ()

    def settings_of_round(self, index: int) -> Settings | None:
        """The settings round `index` ran with: the first round's plus every change up to it."""
        if self.settings is None:
            return None
        s = self.settings
        for at, changed in self.settings_changes:
            if at <= index:
                s = s.replace(**changed)
        return s


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


def validate_name(name: str) -> str:
    """Refuse names that could escape the folder or hide as dotfiles (one sentence).

    A name ending in .toml is refused too: saved as `x.toml.toml`, it listed as `x.toml`, but
    `show`, `export` and `--profile x.toml` read `x.toml` as a path and found nothing."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ProfileError(
            f"Profile name {name!r} is not allowed: use up to {MAX_NAME} letters, digits, '.', "
            "'_', '+' or '-', starting with a letter or digit, and no path separators."
        )
    if name.lower().endswith(".toml"):
        raise ProfileError(
            f"Profile name {name!r} is not allowed: a name ending in .toml is read as a file "
            f"path; use {name[:-5]!r}."
        )
    return name
