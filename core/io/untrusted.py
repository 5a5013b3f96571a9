"""Reading a file someone else may have written: bounded in size and nesting before parsing.

Profiles (TOML), recorded runs and curves (JSON) come from folders a user shares, downloads
or copies around. Python's parsers recurse once per nested array or table, so a 1 KB file
nested 500 deep raised RecursionError out of `profiles list` and closed the app; a 50 MB
description took minutes to show; a FIFO given as a prompt file, a curve or a profile hung
the command (open() waits for a writer) and /dev/zero as a prompt file read without end.
Every reader of such a file goes through `read_bounded` (a regular file, checked with
os.stat before it is opened and again on the open descriptor; its size bounded before it is
read whole) and `check_depth` (nesting, before the parser sees it). Files this program only
hands to another library (a GGUF, an mlx-lm folder's config and weights) go through
`check_regular` / `check_folder_files` first, so a FIFO among them is refused instead of
blocking inside MLX. Each refusal is one sentence naming the file.
"""

from __future__ import annotations

import lzma
import os
import re
import stat
from pathlib import Path

from core.errors import UserError

MAX_DEPTH = 32  # arrays/tables/objects inside each other; ours nest at most 4 deep
TOML_MAX_BYTES = 1 << 20  # a profile is a few hundred bytes of settings and a description
JSON_MAX_BYTES = 256 << 20  # a recorded run or a bench report: rounds and outputs, kept whole
PROMPT_MAX_BYTES = 4 << 20  # a user message: ~1M tokens, past every context window we load
CONFIG_MAX_BYTES = 16 << 20  # a model's config.json (a few KB; tokenizer configs inline more)

# What opens or closes a level, and what hides brackets from it (strings, TOML comments).
# The multi-line string forms come first so that `"""` is not read as an empty string.
_TOKENS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'  # TOML multi-line basic string
    r"|'''(?:[^']|'(?!''))*'''"  # TOML multi-line literal string
    r'|"(?:[^"\\\n]|\\.)*"'  # a basic (JSON, TOML) string
    r"|'[^'\n]*'"  # a TOML literal string
    r"|#[^\n]*"  # a TOML comment
    r"|[\[\]{}]",
    re.DOTALL,
)


class UntrustedFileError(UserError, ValueError):
    """A file too large or too deeply nested to parse safely; one sentence naming it."""


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in the words a user knows."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(what: str, path: Path, mode: int) -> UntrustedFileError:
    return UntrustedFileError(
        f"The {what} {path} is {kind_of(mode)}, not a regular file, so it was not read."
    )


def check_regular(path: str | os.PathLike[str], what: str = "file") -> os.stat_result:
    """`path`'s stat (links followed) when it is a regular file; else one sentence, without
    opening it (opening a FIFO blocks until someone writes to it).

    OSErrors (missing, unreadable) propagate for the caller's own sentence."""
    p = Path(path)
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(what, p, st.st_mode)
    return st


def check_folder_files(folder: str | os.PathLike[str], what: str) -> None:
    """Every entry directly in `folder` is a regular file or a folder (links followed): a
    model folder is handed to a library that opens its files, and one FIFO among them hung
    the load with no output. A dangling link is left to the library's own message."""
    base = Path(folder)
    for entry in sorted(base.iterdir()):
        try:
            mode = os.stat(entry).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise UntrustedFileError(
                f"{entry.name} in the {what} {base} is {kind_of(mode)}, not a regular file, "
                "so the folder was not loaded."
            )


def read_bounded(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """The file's bytes, refused in one sentence when it is not a regular file (a FIFO, a
    device, a folder: checked before it is opened, so nothing blocks) or larger than `limit`
    (checked from its size, then by reading at most `limit + 1` bytes: it is never read whole).

    OSErrors (missing, unreadable) propagate for the caller's own sentence."""
    p = Path(path)
    check_regular(p, what)
    # O_NONBLOCK: were it swapped for a FIFO since the stat, the open still returns at once
    # and the fstat below refuses it. On a regular file the flag changes nothing.
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(what, p, st.st_mode)
        if st.st_size > limit:
            raise _too_large(what, p, limit)
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while we read it
        raise _too_large(what, p, limit)
    return data


def read_bounded_xz(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """`read_bounded`, and when the name ends in `.xz` its bytes decompressed, at most `limit`
    of them: the repository keeps its raw benchmark JSON xz'd (docs/benchmarks/rawdata.py
    says why), and `bench --curve` takes such a file as it is. The decompressor stops after
    `limit + 1` bytes, so a small file that expands without end is refused like a large one;
    a damaged stream is refused in one sentence."""
    data = read_bounded(path, limit, what)
    p = Path(path)
    if p.suffix != ".xz":
        return data
    dec = lzma.LZMADecompressor()
    try:
        out = dec.decompress(data, max_length=limit + 1)
    except lzma.LZMAError as exc:
        raise UntrustedFileError(f"The {what} {p} is not a readable xz file ({exc}).") from None
    if len(out) > limit:
        raise UntrustedFileError(
            f"The {what} {p} holds more than {_size(limit)} once decompressed, so it was not read."
        )
    if not dec.eof:
        raise UntrustedFileError(f"The {what} {p} is a truncated xz file.")
    return out


def _too_large(what: str, path: Path, limit: int) -> UntrustedFileError:
    return UntrustedFileError(
        f"The {what} {path} is larger than {_size(limit)}, so it was not read."
    )


def check_depth(text: str, where: str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON or TOML nested deeper than `limit` before a recursive parser meets it.

    Brackets inside strings and comments do not count; an unbalanced file is left to the
    parser, which says what is wrong with it."""
    depth = deepest = 0
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    raise UntrustedFileError(
                        f"{where} nests arrays or tables more than {limit} deep, so it was not "
                        "parsed; it is not one this program wrote."
                    )
        elif tok in "]}":
            depth = max(depth - 1, 0)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
