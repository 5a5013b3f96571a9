"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Every file the project writes for a user (profiles, runs, reports, calibrations, the cached
default model) goes through here: a temporary file in the destination's folder, fsynced,
then renamed over the destination. Errors stay `OSError`; each caller words its own sentence.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO


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


@contextlib.contextmanager
def staged_file(directory: Path, stem: str, like: Path | None = None) -> Iterator[tuple[IO[bytes], Path]]:
    """A fsynced temp file in `directory`, removed again if the block fails.

    The block writes through the yielded file; on success the file is flushed, fsynced and
    given `like`'s permissions (0644 without one). The caller renames or links it.
    """
    import tempfile

    fd, name = tempfile.mkstemp(dir=directory, prefix=f".{stem}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f, tmp
            f.flush()
            os.fsync(f.fileno())
        mode = 0o644
        if like is not None:
            with contextlib.suppress(OSError):
                mode = like.stat().st_mode & 0o777
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
