"""The bench's flag checks (core/bench/flags.py): peer k and prompt tokens checked before the
models load (issue 32)."""

from __future__ import annotations

import pytest

from tests.helpers.cli_checks import QUICK, refused


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize(
    "extra, words",
    [
        (["--peer", "mlx-lm", "--peer-k", "99"], "--peer-k must be between 1 and 16"),
        (["--peer", "mlx-lm", "--peer-k", "0"], "--peer-k must be between 1 and 16"),
        (["--peer-k", "4"], "--peer-k needs --peer"),
        (["--prompt-tokens", "0"], "--prompt-tokens must be between 1 and"),
        (["--prompt-tokens", "-5"], "--prompt-tokens must be between 1 and"),
    ],
)
def test_peer_k_and_prompt_tokens_are_checked_before_the_models_load(
    extra, words, capsys, no_load  # noqa: F811
) -> None:
    refused(capsys, ["bench", *QUICK, *extra], words)
    assert no_load == []


@pytest.mark.usefixtures("wide_console")
@pytest.mark.parametrize("command", ["bench", "sweep"])
@pytest.mark.parametrize(
    "check, words",
    [
        (["rhyme", "x"], "--check: unknown check 'rhyme' (known: number, rename"),
        (["number", "many"], "--check: 'number' needs a number, got 'many'."),
        (["regex", "("], "--check: the regex '(' does not compile"),
        (["rename", "a=b"], "--check: 'rename' needs the prompt's code in a ```python block."),
        (["contains"], "--check: 'contains' needs an argument"),
    ],
)
def test_a_bad_check_is_one_sentence_before_the_models_load(
    command, check, words, capsys, no_load  # noqa: F811
) -> None:
    quick = QUICK if command == "bench" else [a for a in QUICK if a not in ("--no-predict",)]
    refused(capsys, [command, *quick, "--check", *check], words)
    assert no_load == []


def test_a_users_check_is_the_benchs_task_check(tmp_path) -> None:
    """--check on a prompt of one's own: every row's answers judged by it, named in the JSON;
    the words after the kind are its argument (a regex with a space stays whole)."""
    import json

    from core import cli

    out = tmp_path / "b.json"
    argv = ["bench", *QUICK, "--check", "regex", ".* .*|^$|.", "--json", str(out)]
    assert cli.main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["protocol"]["task_check"] == "regex .* .*|^$|."
    assert all(r["quality"]["task_passed"] == [True] for r in doc["results"])
    for r in doc["results"]:  # copying measured on every row's answers (4 tokens: no 8-run)
        assert r["quality"]["copied"] == 0.0 and 0.0 <= r["quality"]["repetition"] <= 1.0
    argv = ["bench", *QUICK, "--check", "contains", "no such words here", "--json", str(out),
            "--force"]
    assert cli.main(argv) == 0
    doc = json.loads(out.read_text())
    assert all(r["quality"]["task_passed"] == [False] for r in doc["results"])
