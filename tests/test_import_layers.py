"""No import circles in core/ and tui/: each package imports only downwards.

Every import counts, the ones inside functions and under TYPE_CHECKING too: a lazy import
hides a circle from Python, not from the design (docs/ARCHITECTURE.md, "The packages")."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO as ROOT


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted([*ROOT.glob("core/**/*.py"), *ROOT.glob("tui/**/*.py")]):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file, with the packages they imply."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [f"{base}.{a.name}" for a in node.names]
            if base in mods and base != name:
                found.add(base)  # `from pkg import x` reads pkg itself, even from inside it
        else:
            continue
        for target in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            # importing a.b.c runs a and a.b first (a module's own packages aside)
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                implied = ".".join(parts[:i])
                if implied in mods and implied != name and not name.startswith(implied + "."):
                    found.add(implied)
    return found


def import_cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    mods = _modules()
    edges = {m: sorted(_imports(m, p, mods)) for m, p in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            for j in range(i, len(edges[v])):
                w = edges[v][j]
                if w not in index:
                    work += [(v, j + 1), (w, 0)]
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        cycles.append(sorted(comp))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
    return cycles


def test_core_and_tui_have_no_import_circles() -> None:
    assert import_cycles() == []


def test_the_check_sees_a_circle(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A lazy import back into a package that imports the module is found."""
    for rel, text in {"core/__init__.py": "", "core/a.py": "from core import b\n",
                      "core/b.py": "def f():\n    from core.a import x\n",
                      "tui/__init__.py": "", "tui/c.py": "import core.a\n"}.items():  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert import_cycles() == [["core.a", "core.b"]]
