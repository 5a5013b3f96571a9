"""The bench's CLI path in tests: the tiny pair's specs and `specdec-tui bench ARGV` run through
the real parser in this process."""

from __future__ import annotations

import argparse

from core import bench

TINY = ("shape:tiny", "shape:tiny-draft")

# The prompt of the bench's and the sweep's runs on the real default pair: a word, so the
# prompt is the chat template's ~30 tokens and little more. Why: the bench prefills the prompt
# afresh for every request (and for the target and the draft of a speculative row), and this
# CPU prefills a row at about the cost of a decode step (~0.2 s for SmolLM2); the haiku request
# these tests used (41 tokens) cost ~10 rows more per prefill, ~25 s per test. What they check
# (the contract of every row, acceptance, rounds, the outputs written) does not depend on what
# the prompt asks; the generated tokens are as many (EOS ignored).
SHORT_PROMPT = "Hi."


def _bench_parser() -> tuple[argparse.ArgumentParser, list[str]]:
    """The real `specdec-tui` parser and the words that select its bench subcommand."""
    from core.cli import build_parser

    return build_parser(), ["bench"]


def run_cli(argv: list[str]) -> int:
    parser, head = _bench_parser()
    args = parser.parse_args(head + argv)
    return bench.run_bench_cli(args)
