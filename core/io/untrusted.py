"""Reading a file someone else may have written: bounded in size and nesting before parsing.

Profiles (TOML), recorded runs and curves (JSON) come from folders a user shares, downloads
or copies around. Python's parsers recurse once per nested array or table, so a 1 KB file
nested 500 deep raised RecursionError out of `profiles list` and closed the app; a 50 MB
description took minutes to show. Every reader of such a file goes through `read_bounded`
(size, before reading it whole) and `check_depth` (nesting, before the parser sees it), and
each refusal is one sentence naming the file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from core.errors import UserError

MAX_DEPTH = 32  # arrays/tables/objects inside each other; ours nest at most 4 deep
TOML_MAX_BYTES = 1 << 20  # a profile is a few hundred bytes of settings and a description
JSON_MAX_BYTES = 256 << 20  # a recorded run or a bench report: rounds and outputs, kept whole

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


def read_bounded(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """The file's bytes, refused in one sentence when larger than `limit` (never read whole).

    OSErrors (missing, unreadable) propagate for the caller's own sentence."""
    p = Path(path)
    with open(p, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise UntrustedFileError(
            f"The {what} {p} is larger than {_size(limit)}, so it was not read; "
            "it is not one this program wrote."
        )
    return data


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
