"""Shipped prompts whose answers a program checks: task success beside NLL.

NLL says how far a setting's text drifted from what the target would write; it does not say
whether the answer is still right. A prompt file may carry one line ``# check: KIND ARGS``
naming a check of the answer (the text before the first EOS):

- ``number N``: the last number in the answer is N (commas and spaces inside it ignored);
- ``rename OLD=NEW[,OLD=NEW...]``: the answer's first Python code block parses, and its
  syntax tree is the prompt's code block with exactly those renames made (names, parameters,
  keyword arguments, function and class names): every rename made, nothing else changed.

Nothing the model wrote is executed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from core.bench.errors import BenchError

CHECK_PREFIX = "# check:"
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class TaskCheck:
    """One prompt's check: its kind, its argument, and the prompt text it refers to."""

    kind: str
    arg: str
    prompt: str

    def describe(self) -> str:
        return f"{self.kind} {self.arg}"

    def __call__(self, answer: str) -> bool:
        """Whether `answer` (the text up to the first EOS) does what the prompt asked."""
        if self.kind == "number":
            found = _NUMBER.findall(answer)
            if not found:
                return False
            try:
                return float(found[-1].replace(",", "")) == float(self.arg)
            except ValueError:
                return False
        if self.kind == "rename":
            return renamed_exactly(self.prompt, answer, parse_renames(self.arg))
        raise BenchError(f"Unknown task check {self.kind!r}.")


def parse_check(line: str, prompt: str, name: str = "the prompt") -> TaskCheck:
    """A ``# check: KIND ARGS`` line as a TaskCheck; a bad line is one sentence."""
    body = line[len(CHECK_PREFIX) :].strip()
    kind, _, arg = body.partition(" ")
    arg = arg.strip()
    if kind == "number":
        try:
            float(arg)
        except ValueError:
            raise BenchError(f"{name}: '# check: number' needs a number, got {arg!r}.") from None
    elif kind == "rename":
        parse_renames(arg)
        if code_block(prompt) is None:
            raise BenchError(f"{name}: '# check: rename' needs a ```python block in the prompt.")
    else:
        raise BenchError(f"{name}: unknown check {kind!r} (known: number, rename).")
    return TaskCheck(kind, arg, prompt)


def parse_renames(arg: str) -> dict[str, str]:
    """'a=b, c=d' -> {'a': 'b', 'c': 'd'} (identifiers only)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in arg.split(","))):
        old, sep, new = (s.strip() for s in part.partition("="))
        if not sep or not old.isidentifier() or not new.isidentifier():
            raise BenchError(f"'# check: rename' wants OLD=NEW identifiers, got {part!r}.")
        out[old] = new
    if not out:
        raise BenchError("'# check: rename' names no rename.")
    return out


def code_block(text: str) -> str | None:
    """The first fenced code block (an unclosed one runs to the end), else None."""
    m = _FENCE.search(text)
    return m.group(1) if m else None


class _Rename(ast.NodeTransformer):
    def __init__(self, renames: dict[str, str]) -> None:
        self.renames = renames

    def _new(self, name: str) -> str:
        return self.renames.get(name, name)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._new(node.arg)
        return self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg is not None:
            node.arg = self._new(node.arg)
        return self.generic_visit(node)

    def _named(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
        node.name = self._new(node.name)
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _named


def renamed_exactly(prompt: str, answer: str, renames: dict[str, str]) -> bool:
    """Whether the answer's code is the prompt's code with exactly `renames` made."""
    original, given = code_block(prompt), code_block(answer)
    if original is None or given is None:
        return False
    try:
        want = _Rename(renames).visit(ast.parse(original))
        got = ast.parse(given)
    except SyntaxError:
        return False
    return ast.dump(want) == ast.dump(got)
