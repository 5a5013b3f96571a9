"""What the hostile-input tests of the CLI share: the tiny pair's flags, a quick bench, and
the one-sentence refusal they check for (test_hostile_input, test_io and
test_reliability_inputs once each kept their own copies, which had begun to drift)."""

from __future__ import annotations

from core import cli

TINY = ["--target", "shape:tiny", "--draft", "shape:tiny-draft"]
QUICK = ["--prompt", "hi", "--tokens", "4", "--seeds", "1", "--invocations", "1", "--warmup",
         "0", "--no-quality", "--no-predict", *TINY]


def last_error(capsys) -> str:  # noqa: ANN001
    """The last line on stderr, whitespace folded; never a traceback."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert lines, "no error on stderr"
    return " ".join(lines[-1].split())


def refused(capsys, argv: list[str], *words: str) -> str:  # noqa: ANN001
    """argv exits 2 with one line on stderr holding every one of `words`."""
    assert cli.main(argv) == 2, argv
    msg = last_error(capsys)
    for w in words:
        assert w in msg, (w, msg)
    return msg
