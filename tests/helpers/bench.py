"""The bench's CLI path in tests: the tiny pair's specs and `specdec-tui bench ARGV` run through
the real parser in this process."""

from __future__ import annotations

import argparse
from typing import Any

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

# The clause of SmolLM2's chat template that adds its default system message ("You are a
# helpful AI assistant named SmolLM, trained by Hugging Face") before a conversation without
# one: 21 of the 32 tokens SHORT_PROMPT templates to.
_DEFAULT_SYSTEM = ("{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
                   "system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                   "<|im_end|>\n' }}{% endif %}")


def without_default_system(pair: Any, monkeypatch: Any) -> None:
    """The default pair's chat template without its default system message, for one test (the
    pair is the session's: `monkeypatch` puts the template back). SHORT_PROMPT then templates
    to 11 tokens, not 32: every request's prefill (the target's, and the draft's of a
    speculative row) and the NLL scoring's forward cost ~20 rows less, each about a decode
    step on this CPU. What the bench's and the sweep's real-model tests check does not read
    the system message; the template still renders every request (the chat markers, the
    generation prompt), and the full template is the app's and chat's tests' own."""
    template = pair.target.tokenizer.chat_template
    assert _DEFAULT_SYSTEM in template, "the default model's template changed: update this"
    for model in (pair.target, pair.draft):  # the self-draft may share the target's tokenizer
        if model.tokenizer.chat_template == template:
            monkeypatch.setattr(model.tokenizer, "chat_template",
                                template.replace(_DEFAULT_SYSTEM, ""))


def _bench_parser() -> tuple[argparse.ArgumentParser, list[str]]:
    """The real `specdec-tui` parser and the words that select its bench subcommand."""
    from core.cli import build_parser

    return build_parser(), ["bench"]


def run_cli(argv: list[str]) -> int:
    parser, head = _bench_parser()
    args = parser.parse_args(head + argv)
    return bench.run_bench_cli(args)
