"""The files the tool keeps for itself: where they are, how they are read, and that no output
ever lands on one.

What it keeps (each rebuilt when missing): the model cache folder (the default model, its
verified mark `<model>.verified.json`, the sha256 cache `sha256-cache.json`, GGUF conversions
under `gguf-mlx/`), the kept curves (`curves/`, or $SPECDEC_TUI_CURVES) and the copy of the
last sweep (`sweeps/last.json`, or $SPECDEC_TUI_SWEEP). These paths are named here once;
core.models.loaded, core.dispatch.curve_cache and core.sweep.last read them from here.

A kept file is as hostile as one a user hands over: anything could have been put there (a
FIFO hung `chat`, a link to /dev/zero read until memory ran out, a NaN date ended every turn
in a traceback). So every kept file is read by `read_kept`: core.io.untrusted's bounded,
regular-files-only, non-blocking read, then JSON within a nesting bound, then the caller's
schema check, which validates every number (`number`, `count`). A file that fails any step
is set aside (renamed to `<name>.damaged`), said once in a sentence on the `core` logger
(stderr in a command, a notification in the app), and the caller rebuilds it: never trusted,
never fatal.

Outputs: `kept_inputs` lists these folders and the model files a command resolves its specs
to, for core.io.atomic.check_outputs, which refuses any output inside a folder it is given
(`--json <cache>/SmolLM2-….gguf --force` once replaced the default model it had just read).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from core.io.untrusted import UntrustedFileError, check_depth, read_bounded

log = logging.getLogger(__name__)

CACHE_ENV = "SPECDEC_TUI_CACHE"
CURVES_ENV = "SPECDEC_TUI_CURVES"
SWEEP_ENV = "SPECDEC_TUI_SWEEP"
KEPT_MAX_BYTES = 16 << 20  # a kept curve or hash cache is a few KB; a sweep's copy, some MB
ASIDE_SUFFIX = ".damaged"

T = TypeVar("T")


class KeptFileError(ValueError):
    """A kept file whose content fails its schema; the text says what, in words."""


def cache_dir() -> Path:
    """Where fetched and converted models live; ``SPECDEC_TUI_CACHE`` overrides it (tests)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("specdec-tui"))


def curves_dir() -> Path:
    """Where kept curves live: $SPECDEC_TUI_CURVES, else `curves/` in the model cache folder.
    The test suite points the variable at a folder of its own, so no run reuses (or leaves) a
    curve in the user's cache."""
    env = os.environ.get(CURVES_ENV)
    return Path(env).expanduser() if env else cache_dir() / "curves"


def last_sweep_path() -> Path:
    """$SPECDEC_TUI_SWEEP, else <user data folder>/sweeps/last.json."""
    env = os.environ.get(SWEEP_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("specdec-tui")) / "sweeps" / "last.json"


# --------------------------------------------------------------------------- outputs


def kept_inputs(*specs: str | None) -> list[tuple[str, Path]]:
    """What a command reads whatever the user typed, for check_outputs' `inputs`: the kept
    folders and file (the default model, its verified mark and every conversion are in the
    model cache folder), and the file or folder each other model spec names (`self:` drafts
    read their target, listed with it; `shape:` specs read nothing)."""
    found: list[tuple[str, Path]] = [
        ("model cache folder", cache_dir()),
        ("kept curves folder", curves_dir()),
        ("last sweep's copy", last_sweep_path()),
    ]
    for spec in specs:
        spec = str(spec or "").strip()
        if spec in ("", "default") or spec.startswith(("self:", "shape:")):
            continue
        found.append(("model", Path(spec).expanduser()))
    return found


# --------------------------------------------------------------------------- reading


def number(value: Any, what: str, *, low: float = 0.0, high: float | None = None) -> float:
    """A finite number within [low, high]: JSON's NaN, Infinity and 1e300 dates are refused,
    as are booleans and strings."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KeptFileError(f"{what} is not a number")
    v = float(value)
    if not math.isfinite(v) or v < low or (high is not None and v > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise KeptFileError(f"{what} is {value!r}, not a finite number {bound}")
    return v


def count(value: Any, what: str, *, low: int = 0) -> int:
    """A whole number, at least `low` (never a bool, a float or a string)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise KeptFileError(f"{what} is {value!r}, not a whole number of at least {low}")
    return value


def mapping(value: Any, what: str) -> dict[str, Any]:
    """A JSON object."""
    if not isinstance(value, dict):
        raise KeptFileError(f"{what} is not a JSON object")
    return value


class _Stderr(logging.Handler):
    """Each notice as a line on whatever sys.stderr is when it is said (not the stream of
    when the handler was made, which a test's capture may since have closed)."""

    def emit(self, record: logging.LogRecord) -> None:
        import sys

        try:
            sys.stderr.write(record.getMessage() + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # no stderr left to say it on: the file is still set aside and rebuilt


def notices_to_stderr() -> None:
    """Say this module's notices on stderr (a headless command; the app shows the `core`
    logger's warnings as notifications instead). Installed once per process."""
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        log.addHandler(_Stderr(logging.WARNING))


# When a kept file was last set aside in this process, so a caller that looks twice says once.
_SAID: set[str] = set()


def set_aside(path: Path, what: str, why: str, *, then: str = "will be rebuilt",
              notices: list[str] | None = None) -> str:
    """Move a failing kept file out of the way (a link is moved, never what it points at) and
    say so once, on the `core` logger or into `notices` when the caller shows its own; returns
    the sentence. A folder that takes no rename leaves it in place: the caller still ignores
    it, and its rebuild writes over it."""
    path = Path(path)
    aside = path.with_name(path.name + ASIDE_SUFFIX)
    try:
        if os.path.isdir(aside) and not os.path.islink(aside):
            raise IsADirectoryError(str(aside))
        os.replace(path, aside)
        where = f"set aside as {aside.name}"
    except OSError:
        where = "ignored"
    said = f"The {what} {path} {why.rstrip('.')}, so it was {where} and {then}."
    if notices is not None:
        notices.append(said)
    elif said not in _SAID:
        _SAID.add(said)
        log.warning(said)
    return said


def read_kept(path: str | os.PathLike[str], what: str, check: Callable[[Any], T],
              limit: int = KEPT_MAX_BYTES, *, then: str = "will be rebuilt",
              notices: list[str] | None = None) -> T | None:
    """The kept JSON file at `path` as `check` returns it; None when it is absent, or when
    it fails (not a regular file, too large, not UTF-8 JSON, nested too deep, or refused by
    `check` with a KeptFileError, TypeError or ValueError): then it is set aside with one
    notice (`set_aside`) and the caller rebuilds it. Never blocks, never raises for content."""
    p = Path(path)
    if not os.path.lexists(p):
        return None
    try:
        text = read_bounded(p, limit, what).decode("utf-8")
        check_depth(text, str(p))
        doc = json.loads(text)
        return check(doc)
    except UntrustedFileError as exc:
        set_aside(p, what, _tail(str(exc), p), then=then, notices=notices)
    except FileNotFoundError:  # a dangling link: nothing to read, nothing of value to keep
        set_aside(p, what, "is a link to nothing", then=then, notices=notices)
    except OSError as exc:
        from core.io.atomic import reason

        set_aside(p, what, f"cannot be read ({reason(exc)})", then=then, notices=notices)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        set_aside(p, what, f"is damaged (not JSON: {_first(exc)})", then=then, notices=notices)
    except (KeptFileError, TypeError, ValueError, KeyError, OverflowError) as exc:
        set_aside(p, what, f"is damaged ({_first(exc)})", then=then, notices=notices)
    return None


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__).rstrip(".")


def _tail(sentence: str, path: Path) -> str:
    """An untrusted-read refusal ("The curve P is a FIFO …, so it was not read.") cut to what
    follows the path: "is a FIFO (named pipe), not a regular file"."""
    head, sep, rest = sentence.partition(f"{path} ")
    core = rest if sep else sentence
    return core.split(", so it was not")[0].split(", so it was")[0].rstrip(".")
