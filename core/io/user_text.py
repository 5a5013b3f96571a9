"""Text a user typed: decoded the way their terminal meant it, refused in one sentence otherwise.

Python hands over command-line bytes that are not valid in the file-system encoding as lone
surrogates (surrogateescape), which no tokenizer accepts: `chat $'caf\\xe9'` was a traceback.
Such text is turned back into its bytes and decoded with the locale's encoding (a Latin-1
terminal meant "café"); when that fails too, the user gets a sentence. An empty prompt is
refused with the same sentence everywhere (chat, bench).

Text that came from a file (a profile's description, a run's prompt and environment, a
model spec recorded in it) is shown through `shown`: a shared profiles folder once wrote to
the clipboard (OSC 52), retitled and cleared the terminal through `profiles list/show`.
"""

from __future__ import annotations

import locale
import os
import re

from core.errors import UserError

EMPTY_PROMPT = "The prompt is empty; give the user message to send to the model."


class PromptError(UserError):
    """A prompt that cannot be sent: empty, or bytes that are not text in any known encoding."""


def decode_arg(raw: str, what: str = "The prompt") -> str:
    """A command-line string as real text: surrogate-escaped bytes decoded with the locale's
    encoding, or a PromptError naming the first byte that is not text."""
    try:
        raw.encode("utf-8")
        return raw
    except UnicodeEncodeError:
        pass
    data = os.fsencode(raw)  # the bytes the terminal sent (surrogateescape undone)
    encoding = locale.getpreferredencoding(False) or "utf-8"
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        if isinstance(exc, UnicodeDecodeError):
            where = f"byte 0x{data[exc.start]:02x} at position {exc.start}"
        else:
            where = f"the locale's encoding {encoding!r} is unknown"
        raise PromptError(
            f"{what} is not valid {encoding} text ({where}), so it cannot be tokenized; "
            "check the terminal's character encoding."
        ) from None


def prompt_text(raw: str | None, what: str = "The prompt") -> str:
    """The user message to send: decoded (see `decode_arg`) and not blank."""
    if raw is None or not raw.strip():
        raise PromptError(EMPTY_PROMPT)
    text = decode_arg(raw, what)
    if not text.strip():
        raise PromptError(EMPTY_PROMPT)
    return text


# ESC-introduced sequences whole (CSI ... final byte, OSC/DCS/APC/PM/SOS ... ST or BEL, and
# two-byte escapes), then any other C0/C1 control character but tab and newline; DEL too.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # 8-bit OSC, ...
    r"|\x1b[ -/]*[0-~]?"  # other escapes (and a lone ESC)
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


# Characters that change how text reads without being seen: the bidi embeddings, overrides,
# isolates and marks (a right-to-left override shows `txt.exe` as `exe.txt`), zero-width
# spaces, word joiners, invisible operators, the BOM, interlinear annotations, tag characters,
# and the line and paragraph separators (U+2028/9 break a line where none is seen). This is
# Unicode's format category (Cf) with Zl and Zp, less the zero-width non-joiner and joiner
# (U+200C/D), which Persian words and emoji sequences need to read as written.
_INVISIBLE = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b"
    "\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def shown(text: object) -> str:
    """`text` as it is safe to print to a terminal: escape sequences and control characters
    removed (tab and newline kept), so a file cannot drive the terminal it is shown on, and
    invisible controls (bidi overrides, zero-width spaces) made visible as `<U+202E>`."""
    out = _ESCAPES.sub("", text if isinstance(text, str) else str(text))
    if out.isascii():
        return out
    return _INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", out)


def shown_line(text: object) -> str:
    """`shown`, on one line: a newline or tab (a file named with one) written as `\\n`,
    `\\t`, so a table row stays one row."""
    return shown(text).replace("\n", "\\n").replace("\t", "\\t")
