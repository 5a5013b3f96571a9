"""The bench's and the sweep's bar (core/bench/progress.py): never `0/None` before the first
step is counted, and every protocol count's default in `--help`."""

from __future__ import annotations

import pytest
from rich.progress import Progress

from core.bench.progress import steps_text


def test_the_bar_says_what_it_does_before_it_counts() -> None:
    bar = Progress()
    bar.add_task("benchmark", total=None)
    task = bar.tasks[0]
    assert steps_text(task, "warming up") == "warming up"
    bar.update(task.id, completed=3, total=12)  # once the protocol knows its steps
    assert steps_text(bar.tasks[0]) == "3/12"


@pytest.mark.parametrize("command", ["bench", "sweep"])
def test_help_gives_the_protocol_counts_defaults(command, capsys) -> None:  # noqa: ANN001
    from core.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in (("--tokens", 256), ("--seeds", 3), ("--invocations", 3),
                          ("--warmup", 1)):
        at = text.rindex(f"{flag} {flag.lstrip('-').upper()}")
        # the sweep's add what a first look runs: "(default 256; a first look 32)"
        assert f"(default {default}" in text[at : at + 160], (flag, text[at : at + 160])
