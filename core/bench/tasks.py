"""Checks of an answer: whether the text did what the prompt asked, beside NLL.

NLL says how far a setting's text drifted from what the target would write; it does not say
whether the answer is still right, and text copied back from the prompt is likely under the
target (the prompt is in its context). A prompt file may carry `# check: KIND ARGS` lines (all
must pass), and `bench`/`sweep --check KIND ARGS` gives one for a prompt of the user's own. The
answer is the text before the first EOS. Kinds:

- ``number N``: the last number in the answer is N (commas inside it ignored).
- ``rename OLD=NEW[,...] [except FUNC]``: the answer's code parses and its syntax tree is the
  prompt's code block with exactly those renames made (names, attributes, parameters, keyword
  arguments, function and class names): every rename made, the old names gone, nothing else
  changed; with ``except FUNC``, FUNC's own definition may differ (the edit asked there).
- ``param FUNC NAME=DEFAULT``: the answer's code defines FUNC with a parameter NAME defaulting
  to DEFAULT (a Python literal), and FUNC's body reads NAME (an unused parameter is no edit).
- ``changed FUNC [gone CODE|CODE...]``: the answer's code defines FUNC, parses, FUNC's tree
  is not the prompt's, and none of the gone fragments (the bugs, as Python) is left in it.
  Why no more: a bug fix can take many right forms, and telling a right one from a wrong one
  needs running the function, which nothing here does; this catches the copy, the broken and
  a bug left in.
- ``split FUNC``: FUNC keeps the prompt's parameters, at least one new helper function is
  defined, and no ``for`` loop is nested in another (a lookup replaced the nested loops).
- ``rewrite KEEP|KEEP... [gone WORD|WORD...]``: every kept fact is in the answer, none of the
  gone words is (a misspelling to fix, a tense to change), and the answer is not a copy of the
  prompt (at least one gone word, or the prompt's text verbatim, tells a copy).
- ``roles NAME[|ALIAS...]=ROLE[|ROLE...]; ...``: the named characters keep their names and
  roles: one at least named (another may enter after the token budget), no first name joined
  to another's surname, no name given another's role ("Kofi Mensah, the keeper"), no
  self-introduction under another's name in a line spoken by someone else, and not the prompt
  copied back.
- ``contains TEXT``: TEXT is in the answer (case-insensitive).
- ``regex PATTERN``: PATTERN (Python `re`) matches somewhere in the answer.

Code is found fenced or not: the first fenced block, else the whole answer, else the answer
from its first line that starts a Python statement. Code is parsed by `ast`; nothing the model
wrote is executed. An answer `cut` by the token budget (no EOS) is judged on what it reached:
its complete top-level statements against the prompt's first ones, a rewrite's facts up to the
last one it reached.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from core.bench.errors import BenchError
from core.bench.prose import parse_rewrite, parse_roles, rewritten, roles_kept

CHECK_PREFIX = "# check:"
KINDS = ("number", "rename", "param", "changed", "split", "rewrite", "roles", "contains",
         "regex")
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_CODE_START = re.compile(r"^(?:def |class |async def |import |from |@|\"\"\"|[A-Za-z_]\w* *=)",
                         re.M)
MAX_CHECKED_CHARS = 200_000  # a longer answer is judged on its first 200,000 characters


@dataclass(frozen=True)
class TaskCheck:
    """One check (its kind, its argument, the prompt it refers to) and any that must pass too."""

    kind: str
    arg: str
    prompt: str
    also: tuple[TaskCheck, ...] = ()

    def describe(self) -> str:
        return "; ".join(f"{c.kind} {c.arg}".strip() for c in (self, *self.also))

    def __call__(self, answer: str, cut: bool = False) -> bool:
        """Whether `answer` (the text up to the first EOS) does what the prompt asked. `cut`:
        the answer never reached an EOS (the token budget ended it), so it is judged on what it
        reached: its complete statements, the facts up to where it got (see `KINDS`)."""
        answer = answer[:MAX_CHECKED_CHARS]
        return _passes(self.kind, self.arg, self.prompt, answer, cut) and all(
            c(answer, cut) for c in self.also
        )


def _passes(kind: str, arg: str, prompt: str, answer: str, cut: bool = False) -> bool:
    if kind == "number":
        found = _NUMBER.findall(answer)
        try:
            return bool(found) and float(found[-1].replace(",", "")) == float(arg)
        except ValueError:
            return False
    if kind == "rename":
        renames, skip = parse_rename_arg(arg)
        return renamed_exactly(prompt, answer, renames, skip, cut)
    if kind == "param":
        func, name, default = _parse_param(arg)
        return has_param(answer, func, name, default, cut)
    if kind == "changed":
        func, gone = parse_changed(arg)
        return changed_function(prompt, answer, func, gone, cut)
    if kind == "split":
        return split_function(prompt, answer, arg, cut)
    if kind == "rewrite":
        keep, gone = parse_rewrite(arg)
        return rewritten(prompt, answer, keep, gone, cut)
    if kind == "roles":
        return roles_kept(prompt, answer, parse_roles(arg))
    if kind == "contains":
        return arg.casefold() in answer.casefold()
    if kind == "regex":
        return re.search(arg, answer) is not None
    raise BenchError(f"Unknown task check {kind!r}.")


def parse_check(line: str, prompt: str, name: str = "the prompt") -> TaskCheck:
    """A ``# check: KIND ARGS`` line as a TaskCheck; a bad line is one sentence."""
    body = line[len(CHECK_PREFIX) :].strip() if line.startswith(CHECK_PREFIX) else line.strip()
    kind, _, arg = body.partition(" ")
    arg = arg.strip()
    if kind not in KINDS:
        raise BenchError(f"{name}: unknown check {kind!r} (known: {', '.join(KINDS)}).")
    if not arg:
        raise BenchError(f"{name}: '{kind}' needs an argument (as in {_EXAMPLES[kind]}).")
    if kind == "number":
        try:
            float(arg)
        except ValueError:
            raise BenchError(f"{name}: 'number' needs a number, got {arg!r}.") from None
    elif kind == "rename":
        parse_rename_arg(arg, name)
    elif kind == "param":
        _parse_param(arg, name)
    elif kind == "rewrite":
        parse_rewrite(arg)
    elif kind == "roles":
        parse_roles(arg, name)
    elif kind == "regex":
        try:
            re.compile(arg)
        except re.error as exc:
            raise BenchError(f"{name}: the regex {arg!r} does not compile ({exc}).") from None
    if kind == "changed":
        parse_changed(arg, name)
    if kind == "split" and not arg.isidentifier():
        raise BenchError(f"{name}: 'split' names one function, got {arg!r}.")
    if kind in ("rename", "changed", "split") and code_block(prompt) is None:
        raise BenchError(f"{name}: '{kind}' needs the prompt's code in a ```python block.")
    return TaskCheck(kind, arg, prompt)


_EXAMPLES = {
    "number": "number 1462", "rename": "rename old_name=new_name",
    "param": "param read_log skip_invalid=False", "changed": "changed max_window_sum",
    "split": "split summarize_orders", "rewrite": "rewrite Marta Lind|forty-two gone nothern",
    "roles": "roles Ingrid Solheim=keeper; Kofi Mensah=agronomist", "contains": "contains 42",
    "regex": r"regex \b42\b",
}


def parse_checks(lines: list[str], prompt: str, name: str = "the prompt") -> TaskCheck | None:
    """Several `# check:` lines as one TaskCheck that all of them must pass (None for none)."""
    checks = [parse_check(line, prompt, name) for line in lines]
    if not checks:
        return None
    return TaskCheck(checks[0].kind, checks[0].arg, prompt, tuple(checks[1:]))


# -- code ---------------------------------------------------------------------------------


def parse_rename_arg(arg: str, name: str = "the prompt") -> tuple[dict[str, str], str | None]:
    """'a=b, c=d except f' -> ({'a': 'b', 'c': 'd'}, 'f') (identifiers only)."""
    pairs, _, skip = arg.partition(" except ")
    skip = skip.strip() or None
    if skip is not None and not skip.isidentifier():
        raise BenchError(f"{name}: 'rename ... except' names one function, got {skip!r}.")
    return parse_renames(pairs, name), skip


def parse_renames(arg: str, name: str = "the prompt") -> dict[str, str]:
    """'a=b, c=d' -> {'a': 'b', 'c': 'd'} (identifiers only)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in arg.split(","))):
        old, sep, new = (s.strip() for s in part.partition("="))
        if not sep or not old.isidentifier() or not new.isidentifier():
            raise BenchError(f"{name}: 'rename' wants OLD=NEW identifiers, got {part!r}.")
        out[old] = new
    if not out:
        raise BenchError(f"{name}: 'rename' names no rename.")
    return out


def code_block(text: str) -> str | None:
    """The first fenced code block (an unclosed one runs to the end), else None."""
    m = _FENCE.search(text)
    return m.group(1) if m else None


def _parse(code: str) -> ast.Module | None:
    """The code's tree, or None where it does not parse (or is too deep to)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _prompt_tree(prompt: str) -> ast.Module | None:
    """The prompt's code block parsed; None where it has none or it does not parse."""
    original = code_block(prompt)
    return _parse(original) if original is not None else None


def answer_tree(answer: str, cut: bool = False, partial: bool = False) -> ast.Module | None:
    """The tree of the answer's code, fenced or not: its first fenced block, else the whole
    answer, else the answer from its first line that starts a Python statement (prose before
    unfenced code). None when none of them parses. A `cut` answer: the longest run of its
    first lines that parses, less its last top-level statement (it may end mid-way) unless
    `partial` keeps it or a new top-level line follows it."""
    m = _FENCE.search(answer)
    block = m.group(1) if m else None
    if m is not None and m.group(0).endswith("```"):
        cut = False  # the block closed: its code is whole, wherever the text was cut
    if block is None:
        tree = _parse(answer.strip())
        if tree is not None and _has_code(tree):
            return _complete(tree) if cut and not partial else tree
        start = _CODE_START.search(answer)
        if start is None:
            return None
        block = answer[start.start() :].strip()
    if not cut:
        return _parse(block)
    lines = block.splitlines()
    for end in range(len(lines), 0, -1):
        tree = _parse("\n".join(lines[:end]))
        if tree is not None:
            after = next((x for x in lines[end:] if x.strip()), "")
            whole = after[:1] not in ("", " ", "\t")  # a new top-level line began after it
            return tree if partial or whole else _complete(tree)
    return None


def _complete(tree: ast.Module) -> ast.Module:
    tree.body = tree.body[:-1]
    return tree


def _has_code(tree: ast.Module) -> bool:
    """More than a bare expression (one word of prose parses as a Name)."""
    return any(not isinstance(n, ast.Expr) or isinstance(n.value, ast.Call) for n in tree.body)


class _Rename(ast.NodeTransformer):
    def __init__(self, renames: dict[str, str]) -> None:
        self.renames = renames

    def _new(self, name: str) -> str:
        return self.renames.get(name, name)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._new(node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        node.attr = self._new(node.attr)
        return self.generic_visit(node)

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


def _without(tree: ast.Module, func: str | None) -> ast.Module:
    """The tree with the top-level definition of `func` left out (the part an edit may change)."""
    if func is not None:
        tree.body = [n for n in tree.body if getattr(n, "name", None) != func]
    return tree


def renamed_exactly(prompt: str, answer: str, renames: dict[str, str],
                    skip: str | None = None, cut: bool = False) -> bool:
    """Whether the answer's code is the prompt's code with exactly `renames` made (and, with
    `skip`, that function present but free to differ). A `cut` answer: its complete
    statements are the prompt's first ones renamed, and it reached a renamed name (so a
    copy cut before the first rename does not pass)."""
    got = answer_tree(answer, cut, partial=True)
    want = _prompt_tree(prompt)
    if want is None or got is None:
        return False
    want = _Rename(renames).visit(want)
    if cut:  # the names of what it reached, the partial statement too; the whole ones compared
        seen = {x for n in ast.walk(got) for x in _names(n)}
        if not seen & set(renames.values()) or seen & set(renames):
            return False
        mine, theirs = _without(_complete(got), skip).body, _without(want, skip).body
        return bool(mine) and [ast.dump(n) for n in mine] == [
            ast.dump(n) for n in theirs[: len(mine)]
        ]
    if skip is not None and _function(got, skip) is None:
        return False
    return ast.dump(_without(want, skip)) == ast.dump(_without(got, skip))


def _names(node: ast.AST) -> set[str]:
    """The identifiers a node itself carries (a name, an attribute, a parameter, a def)."""
    for attr in ("id", "attr", "arg", "name"):
        v = getattr(node, attr, None)
        if isinstance(v, str):
            return {v}
    return set()


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name:
            return n
    return None


def _parse_param(arg: str, name: str = "the prompt") -> tuple[str, str, object]:
    """'func name=False' -> ('func', 'name', False)."""
    func, _, rest = arg.strip().partition(" ")
    param, sep, default = rest.strip().partition("=")
    try:
        value = ast.literal_eval(default.strip()) if sep else None
    except (ValueError, SyntaxError):
        value = ...
    if not func.isidentifier() or not param.strip().isidentifier() or not sep or value is ...:
        raise BenchError(f"{name}: 'param' wants FUNC NAME=DEFAULT (a Python literal), "
                         f"got {arg!r}.")
    return func, param.strip(), value


def has_param(answer: str, func: str, name: str, default: object, cut: bool = False) -> bool:
    """Whether the answer defines `func` with parameter `name` = `default`, read in its body
    (a `cut` answer: in a definition it completed)."""
    tree = answer_tree(answer, cut)
    fn = _function(tree, func) if tree is not None else None
    if fn is None:
        return False
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True))
    pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    found = next((d for p, d in pairs if p.arg == name), None)
    if found is None:
        return False
    try:
        if ast.literal_eval(found) != default or type(ast.literal_eval(found)) is not type(default):
            return False
    except ValueError:
        return False
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for stmt in fn.body for n in ast.walk(stmt))


def parse_changed(arg: str, name: str = "the prompt") -> tuple[str, list[ast.AST]]:
    """'func gone best = 0|readings[i - width + 1]' -> ('func', [their trees])."""
    func, _, gone = arg.partition(" gone ")
    func = func.strip()
    if not func.isidentifier():
        raise BenchError(f"{name}: 'changed' names one function, got {func!r}.")
    trees = []
    for code in filter(None, (g.strip() for g in gone.split("|"))):
        tree = _parse(code)
        if tree is None or len(tree.body) != 1:
            raise BenchError(f"{name}: 'changed ... gone' wants Python fragments, got {code!r}.")
        node = tree.body[0]
        trees.append(node.value if isinstance(node, ast.Expr) else node)
    return func, trees


def changed_function(prompt: str, answer: str, func: str, gone: list[ast.AST] | None = None,
                     cut: bool = False) -> bool:
    """The answer's code parses, defines `func`, `func` is not the prompt's unchanged, and
    none of the `gone` fragments (the bugs) is left in it."""
    got = answer_tree(answer, cut)
    want = _prompt_tree(prompt)
    if got is None or want is None:
        return False
    new, old = _function(got, func), _function(want, func)
    if new is None or (old is not None and ast.dump(new) == ast.dump(old)):
        return False
    left = {ast.dump(n) for n in ast.walk(new)}
    return not any(ast.dump(g) in left for g in gone or [])


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def split_function(prompt: str, answer: str, func: str, cut: bool = False) -> bool:
    """`func` kept with the prompt's parameters, at least one new helper, and no `for` loop
    nested in another anywhere in the answer's code."""
    got = answer_tree(answer, cut)
    want = _prompt_tree(prompt)
    if got is None or want is None:
        return False
    new, old = _function(got, func), _function(want, func)
    if new is None or old is None or _params(new) != _params(old):
        return False
    before = {
        n.name for n in ast.walk(want) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    helpers = [
        n
        for n in ast.walk(got)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name not in before
    ]
    nested = any(isinstance(inner, ast.For | ast.AsyncFor) and inner is not outer
                 for outer in ast.walk(got) if isinstance(outer, ast.For | ast.AsyncFor)
                 for inner in ast.walk(outer))
    return bool(helpers) and not nested
