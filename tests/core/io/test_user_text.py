"""Prompts as the terminal gives them (core/io/user_text.py): bytes that are not text, the
locale's encoding, empty prompts, each a sentence, never a traceback (issue 21)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from core import cli
from tests.helpers import REPO as ROOT
from tests.helpers.cli_checks import TINY, last_error
from tests.helpers.models import one_sentence


@pytest.mark.usefixtures("wide_console")
def test_a_prompt_of_bytes_that_are_not_text_is_a_sentence_not_a_traceback() -> None:
    code = "import sys; from core.cli import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, LC_ALL="C.UTF-8", PYTHONUTF8="1")
    for argv in ([b"chat", b"caf\xe9", *(a.encode() for a in TINY)],
                 [b"bench", b"--prompt", b"caf\xe9", *(a.encode() for a in TINY)]):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              cwd=ROOT, env=env, timeout=120)
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 2 and "Traceback" not in err, err[-2000:]
        assert err.strip().count("\n") == 0 and "byte 0xe9 at position 3" in err, err


@pytest.mark.usefixtures("wide_console")
def test_the_locale_encoding_decodes_what_the_terminal_meant(monkeypatch) -> None:
    from core.io import user_text

    monkeypatch.setattr(user_text.locale, "getpreferredencoding", lambda do_setlocale=True: "latin-1")
    assert user_text.prompt_text("caf\udce9") == "café"  # how Python hands over b"caf\xe9"
    monkeypatch.setattr(user_text.locale, "getpreferredencoding", lambda do_setlocale=True: "utf-8")
    with pytest.raises(user_text.PromptError) as exc:
        user_text.prompt_text("caf\udce9")
    assert "byte 0xe9 at position 3" in one_sentence(exc.value)


@pytest.mark.usefixtures("wide_console")
def test_empty_prompts_are_refused_the_same_way_everywhere(capsys) -> None:
    from core.io.user_text import EMPTY_PROMPT

    for argv in (["chat", "", *TINY], ["chat", "  \n", *TINY],
                 ["bench", "--prompt", "", *TINY], ["bench", "--prompt", " ", *TINY]):
        assert cli.main(argv) == 2, argv
        assert last_error(capsys) == f"specdec-tui: {EMPTY_PROMPT}", argv


# --------------------------------------------------------------------------- invisible controls

RLO = "\u202e"


def test_shown_makes_bidi_and_invisible_controls_visible() -> None:
    """A right-to-left override in a profile's description was printed raw: `txt.exe` read
    as `exe.txt`. Escapes were stripped; bidi and zero-width controls went through."""
    from core.io.user_text import shown

    assert shown(f"safe{RLO}txt.exe") == "safe<U+202E>txt.exe"
    for ch in ("\u200b", "\u200e", "\u2066", "\u2069", "\u2028", "\u2029", "\ufeff", "\u061c"):
        out = shown(f"a{ch}b")
        assert ch not in out and f"<U+{ord(ch):04X}>" in out, (hex(ord(ch)), out)
    # what carries meaning stays: joiners in scripts and emoji, accents, CJK
    for kept in ("👩\u200d💻", "می\u200cخواهم", "é", "漢字", "tab\tand\nnewline"):
        assert shown(kept) == kept


def test_profiles_list_and_show_make_a_bidi_override_visible(tmp_path, capsys) -> None:
    (tmp_path / "rlo.toml").write_text(f'schema = 2\ndescription = "fast {RLO}gnp.exe"\n[settings]\n')
    d = ["--profiles-dir", str(tmp_path)]
    for argv in (["profiles", "list", *d], ["profiles", "show", "rlo", *d]):
        assert cli.main(argv) == 0
        out = capsys.readouterr().out
        assert RLO not in out and "<U+202E>" in out, out


def test_a_profile_file_named_with_a_newline_is_one_escaped_row(tmp_path, capsys) -> None:
    (tmp_path / "two\nlines.toml").write_text("schema = 2\n")
    (tmp_path / "good.toml").write_text("schema = 2\n")
    assert cli.main(["profiles", "list", "--profiles-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if "two" in line]
    assert len(row) == 1 and "two\\nlines.toml" in row[0] and "skipped" in row[0], out
    assert not any(line.strip().startswith("lines.toml") for line in out.splitlines()), out
