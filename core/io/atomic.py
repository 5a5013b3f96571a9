"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Every file the project writes for a user (profiles, runs, reports, calibrations, the cached
default model) goes through here: a temporary file in the destination's folder, fsynced,
then renamed over the destination. Errors stay `OSError`; each caller words its own sentence.

Every output a command is asked for (bench's --markdown/--json/--csv/--trace, calibrate's
--json, profiles export's --csv/--trace, a sweep's files) is checked by `check_outputs` before
any work, with one rule: a folder, a device node, a FIFO or a socket is refused (the rename
used to replace /dev/null or a FIFO with a regular file); a symbolic link is written through
(the file it points at is replaced, beside itself, and the link stays a link) and a dangling
one is refused; an existing file needs --force; an input of the same command (its prompt
file, curve, profile or model, and every file the tool keeps: core/io/kept.py) is never an
output, nor is anything inside a folder it reads; no two outputs name one file; `-` is
stdout where the command allows it; the folder must take a new file (tried, not guessed).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from core.errors import UserError

STDOUT = "-"


def unlink_quietly(path: str | os.PathLike[str]) -> None:
    """Remove a file if it is there; a leftover temp file is never worth an error."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def fsync_dir(directory: Path) -> None:
    """Make renames durable; some systems cannot open a folder, which only costs durability."""
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


# Our temp files: `.<name>.sd<pid>.<random>.tmp`, so a later writer can tell whose they are.
_TEMP = re.compile(r"\..+\.sd(\d+)\.[A-Za-z0-9_]+\.tmp")
STALE_TEMP_S = 60.0  # a temp younger than this may be another machine's writer at work


def sweep_stale_temps(directory: Path) -> None:
    """Remove the temps of ours in `directory` whose writer is gone (killed mid-write: a
    SIGKILL or a power cut runs no cleanup) and that are older than STALE_TEMP_S."""
    import time

    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        m = _TEMP.fullmatch(entry.name)
        if m is None or _alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_TEMP_S:
                os.unlink(entry.path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's, or not ours to judge: left alone
    return True


@contextlib.contextmanager
def staged_file(directory: Path, stem: str, like: Path | None = None) -> Iterator[tuple[IO[bytes], Path]]:
    """A fsynced temp file in `directory`, removed again if the block fails.

    The block writes through the yielded file; on success the file is flushed, fsynced and
    given `like`'s permissions when `like` is a regular file (a device's or a FIFO's mode,
    0666, made a kept curve world-writable), 0644 otherwise. The caller renames or links it.
    Stale temps of writers that were killed are swept from `directory` first.
    """
    import tempfile

    sweep_stale_temps(directory)
    fd, name = tempfile.mkstemp(dir=directory, prefix=f".{stem}.sd{os.getpid()}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f, tmp
            f.flush()
            os.fsync(f.fileno())
        mode = 0o644
        if like is not None:
            with contextlib.suppress(OSError):
                st = like.stat()
                if stat.S_ISREG(st.st_mode):
                    mode = st.st_mode & 0o777
        os.chmod(tmp, mode)
    except BaseException:
        unlink_quietly(tmp)
        raise


def stage(directory: Path, stem: str, data: bytes, like: Path | None = None) -> Path:
    """Write `data` to a fsynced temp file in `directory`: the one step that can fill a disk."""
    with staged_file(directory, stem, like) as (f, tmp):
        f.write(data)
    return tmp


def publish_new(tmp: Path, dest: Path) -> None:
    """Rename tmp to dest only if dest does not exist (FileExistsError otherwise), race-free."""
    try:
        os.link(tmp, dest)  # fails rather than clobbers, even if another writer got there first
    except FileExistsError:
        raise
    except OSError:
        # No hard links here (some network or FAT file systems): check, then rename.
        if dest.exists():
            raise FileExistsError(errno.EEXIST, "File exists", str(dest)) from None
        os.replace(tmp, dest)
        return
    unlink_quietly(tmp)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """Stream into `path` atomically: it is replaced only when the block ends without error."""
    dest = Path(path)
    with staged_file(dest.parent, dest.name, like=dest) as (f, tmp):
        yield f
    try:
        os.replace(tmp, dest)
    except BaseException:
        unlink_quietly(tmp)
        raise
    fsync_dir(dest.parent)


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, new: bool = False) -> None:
    """Replace `path` with `data` atomically (`new`: refuse with FileExistsError if it exists)."""
    dest = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = stage(dest.parent, dest.name, raw, like=dest)
    try:
        if new:
            publish_new(tmp, dest)
        else:
            os.replace(tmp, dest)
        fsync_dir(dest.parent)
    finally:
        unlink_quietly(tmp)


def reason(exc: OSError) -> str:
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


# --------------------------------------------------------------------------- output paths


class OutputPathError(UserError, ValueError):
    """An output a command cannot or must not write; one sentence naming the flag and path."""


@dataclass(frozen=True)
class Output:
    """One checked output: `path` is where the bytes go (a link's target, resolved), None
    for stdout. `write` is the only way the command writes it."""

    flag: str
    given: str
    path: Path | None

    @property
    def to_stdout(self) -> bool:
        return self.path is None

    def write(self, data: bytes | str) -> None:
        """Write the whole output: stdout at once, or a file atomically. OSError propagates
        (the caller words it); a path that became a device or FIFO since the check is an
        OutputPathError, never replaced."""
        if self.path is None:
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        _refuse_special(self.flag, self.given, self.path)
        write_atomic(self.path, data)


def _refuse_special(flag: str, given: str, path: Path) -> os.stat_result | None:
    """The path's stat when it is a regular file, None when nothing is there; a folder,
    device, FIFO or socket is refused in one sentence."""
    from core.io.untrusted import kind_of

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise OutputPathError(f"{flag} {given} is a folder, not a file; give a file name in it.")
    if not stat.S_ISREG(st.st_mode):
        hint = " (use - for stdout)" if given.startswith("/dev/std") else ""
        raise OutputPathError(
            f"{flag} {given} is {kind_of(st.st_mode)}, not a regular file, so it was not "
            f"written{hint}; give a file name."
        )
    return st


def check_outputs(
    outputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
    *,
    force: bool = False,
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]] = (),
    stdout: Iterable[str] = (),
) -> dict[str, Output]:
    """Check every output a command will write, before it does any work; one rule for all.

    `outputs`: (flag, path or None) pairs (a flag may be a description, for a file that no
    flag names: "the SVG beside --markdown"); `inputs`: (what, path) pairs the command reads
    (never overwritten, even with --force); `stdout`: the flags whose format may go to
    stdout as `-`. Returns the checked outputs by flag (None paths left out); raises
    OutputPathError, one sentence, for the first that cannot be written."""
    allow_stdout = set(stdout)
    input_ids = []
    input_folders: list[tuple[Path, str, str]] = []  # a folder read: nothing inside it is written
    for what, value in inputs:
        if value is None or str(value) in ("", STDOUT):
            continue
        with contextlib.suppress(OSError, ValueError):
            st = os.stat(Path(value).expanduser())
            input_ids.append(((st.st_dev, st.st_ino), what, str(value)))
            if stat.S_ISDIR(st.st_mode):
                input_folders.append((Path(os.path.realpath(Path(value).expanduser())), what,
                                      str(value)))
    checked: dict[str, Output] = {}
    seen: dict[object, str] = {}
    for flag, value in outputs:
        if value is None:
            continue
        given = str(value)
        if given == STDOUT:
            if flag not in allow_stdout:
                raise OutputPathError(f"{flag} cannot go to stdout; give a file name.")
            if STDOUT in seen:
                raise OutputPathError(f"{seen[STDOUT]} and {flag} both go to stdout; give one "
                                      "of them a file name.")
            seen[STDOUT] = flag
            checked[flag] = Output(flag, given, None)
            continue
        if not given.strip():
            raise OutputPathError(f"{flag} is empty; give a file name.")
        path = Path(given).expanduser()
        try:
            st = _refuse_special(flag, given, path)
        except NotADirectoryError:  # a file where a folder of the path should be
            parent = Path(os.path.realpath(path)).parent
            raise OutputPathError(f"{flag} {given}: the folder {parent} does not exist.") from None
        except OSError as exc:
            raise OutputPathError(f"{flag} {given} cannot be checked ({reason(exc)}).") from None
        if st is None and os.path.lexists(path):
            raise OutputPathError(
                f"{flag} {given} is a symbolic link to {os.readlink(path)}, which does not "
                "exist; give the file itself."
            )
        real = Path(os.path.realpath(path))
        for folder, what, source in input_folders:
            if real.is_relative_to(folder):
                raise OutputPathError(
                    f"{flag} {given} is inside the {what} this command reads ({source}); give "
                    "the output a place outside it."
                )
        if st is not None:
            for ident, what, source in input_ids:
                if ident == (st.st_dev, st.st_ino):
                    raise OutputPathError(
                        f"{flag} {given} is the {what} this command reads ({source}); give "
                        "the output another name."
                    )
            if not force:
                named = "" if flag.startswith("-") else f" ({flag})"  # an output no flag named
                raise OutputPathError(f"{given}{named} already exists; pass --force to replace "
                                      "it.")
        key: object = (st.st_dev, st.st_ino) if st is not None else real
        if key in seen:
            raise OutputPathError(f"{seen[key]} and {flag} both name {given}; give each output "
                                  "its own file.")
        seen[key] = flag
        if not real.parent.is_dir():
            raise OutputPathError(f"{flag} {given}: the folder {real.parent} does not exist.")
        _check_writable(flag, given, real.parent)
        checked[flag] = Output(flag, given, real)
    return checked


def _check_writable(flag: str, given: str, folder: Path) -> None:
    """Create and remove a scratch file where the output will go (root ignores mode bits,
    a read-only mount or an immutable folder does not: only trying tells)."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".specdec-check-"):
            pass
    except OSError as exc:
        raise OutputPathError(f"{flag} {given}: the folder {folder} cannot be written "
                              f"({reason(exc)}).") from None


def publish_all(outputs: Sequence[tuple[Output, bytes | str]]) -> None:
    """All or nothing: every file output is staged beside its destination first (the step
    that can fail: a full disk, a folder gone), and only when all are staged are they renamed
    into place and the stdout ones written. A failure leaves every destination as it was."""
    staged: list[tuple[Path, Path]] = []
    try:
        for out, data in outputs:
            if out.path is None:
                continue
            _refuse_special(out.flag, out.given, out.path)
            raw = data.encode("utf-8") if isinstance(data, str) else data
            staged.append((stage(out.path.parent, out.path.name, raw, like=out.path), out.path))
        for tmp, dest in staged:
            os.replace(tmp, dest)
            fsync_dir(dest.parent)
        for out, data in outputs:
            if out.path is None:
                out.write(data)
    finally:
        for tmp, _ in staged:
            unlink_quietly(tmp)
