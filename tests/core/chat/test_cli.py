"""`specdec-tui chat` as people run it (issue 29): the app's first-run settings, the
calibration's and the prefill's progress on stderr, and a legend for the colours."""

from __future__ import annotations

import json

import pytest

from core import cli
from core.settings import first_run_settings
from tests.helpers.cli_checks import TINY


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


# --------------------------------------------------------------------------- folded in from test_reliability_inputs.py


@pytest.mark.usefixtures("wide_console")
def test_chat_on_a_folder_with_a_broken_template_answers_and_says_so(
    tiny_folder, tmp_path, capsys  # noqa: ANN001
) -> None:
    import shutil

    from core import cli

    folder = tmp_path / "broken"
    shutil.copytree(tiny_folder, folder)
    bad = "{{ raise_exception('this template refuses') }}"
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = bad
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    if (folder / "chat_template.jinja").exists():
        (folder / "chat_template.jinja").write_text(bad)
    argv = ["chat", "hi", "--target", str(folder), "--draft", "shape:tiny-draft",
            "--max-tokens", "3"]
    assert cli.main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert "The chat template of broken could not be used" in err and "refuses" in err, err


def test_ctrl_c_in_the_prefill_clears_the_spinner_before_it_says_interrupted(
    monkeypatch, capsys  # noqa: ANN001
) -> None:
    """ctrl+c lands when the prefill's chunk under way returns: the spinner must stop first,
    or its last frame stays on the line after "interrupted" (seen in tmux)."""
    import core.chat.cli as chat_cli
    from core.decode.engine import Engine

    said: list[str] = []

    class Spinner:
        def __init__(self, err, what: str) -> None:  # noqa: ANN001
            said.append("start")

        def stop(self) -> None:
            said.append("stop")

    def interrupted(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(chat_cli, "Waiting", Spinner)
    monkeypatch.setattr(Engine, "generate", interrupted)
    assert cli.main(["chat", "hi", *TINY, "--max-tokens", "3"]) == 130
    assert said[-2:] == ["start", "stop"] and said.count("start") == said.count("stop")
    assert capsys.readouterr().err.rstrip().endswith("interrupted")
