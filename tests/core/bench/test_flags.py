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
