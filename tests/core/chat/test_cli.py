"""`specdec-tui chat` as people run it (issue 29): the app's first-run settings, the
calibration's and the prefill's progress on stderr, and a legend for the colours."""

from __future__ import annotations

from core import cli
from core.settings import first_run_settings

TINY = ["--target", "shape:tiny", "--draft", "shape:tiny-draft"]


def test_chat_starts_where_the_app_does_and_says_what_it_waits_on(capsys) -> None:
    from core.chat.cli import chat_settings
    from tui.app import default_settings

    parser = cli.build_parser()
    assert chat_settings(parser.parse_args(["chat", "hi"])) == first_run_settings()
    assert default_settings() == first_run_settings()
    assert cli.main(["chat", "hi", *TINY, "--max-tokens", "3"]) == 0
    err = capsys.readouterr().err
    # cost-aware without a curve: calibrated first, with its percentage (once silent)
    assert "calibrating the verify cost (first use of the cost-aware k): 100%" in err, err
    assert "prefilling" in err and "prompt tokens" in err
    assert err.index("calibrated in") < err.index("prefilling")
    assert "colours:" in err and "copied" in err and "corrected" in err
