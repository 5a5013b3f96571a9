"""The bench's CLI path in tests: the tiny pair's specs and `specdec-tui bench ARGV` run through
the real parser in this process."""

from __future__ import annotations

import argparse

from core import bench

TINY = ("shape:tiny", "shape:tiny-draft")


def _bench_parser() -> tuple[argparse.ArgumentParser, list[str]]:
    """The real `specdec-tui` parser and the words that select its bench subcommand."""
    from core.cli import build_parser

    return build_parser(), ["bench"]


def run_cli(argv: list[str]) -> int:
    parser, head = _bench_parser()
    args = parser.parse_args(head + argv)
    return bench.run_bench_cli(args)
