"""No import circles in core/ and tui/: each module, and each package, imports only downwards.

Every import counts, the ones inside functions and under TYPE_CHECKING too: a lazy import
hides a circle from Python, not from the design (docs/ARCHITECTURE.md, "The packages"). Over
files no module imports one that imports it back; over packages no package (core/decode/,
core/dispatch/, tui/features/, ...) imports one that imports it back, even where the files
involved form no circle: a package that both sits below another and above it is two layers
in one folder."""

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


def _graph() -> tuple[dict[str, Path], dict[str, list[str]]]:
    mods = _modules()
    return mods, {m: sorted(_imports(m, p, mods)) for m, p in mods.items()}


def import_cycles() -> list[list[str]]:
    """The modules that import each other, one list per circle."""
    return strongly_connected(_graph()[1])


def package_of(name: str, mods: dict[str, Path]) -> str:
    """The package a module belongs to: its folder (core.decode for core.decode.engine, and
    for the package's own __init__). The top-level modules of core/ and tui/ (core.settings,
    core.cli, tui.app, ...) are each their own node: the root package is no layer (the CLI,
    which imports every command, and the settings, which every package reads, both sit in it)."""
    package = name if mods[name].name == "__init__.py" else name.rpartition(".")[0]
    return name if package in ("core", "tui") else package


def package_edges(mods: dict[str, Path], edges: dict[str, list[str]]) -> dict[str, list[str]]:
    """The module graph folded onto packages: P imports Q when a module of P imports one of Q."""
    out: dict[str, set[str]] = {}
    for name, targets in edges.items():
        p = package_of(name, mods)
        out.setdefault(p, set())
        out[p].update(q for t in targets if (q := package_of(t, mods)) != p)
    return {p: sorted(qs) for p, qs in out.items()}


def package_cycles() -> list[list[str]]:
    """The packages that import each other (directly or round a longer loop), one list each."""
    mods, edges = _graph()
    return strongly_connected(package_edges(mods, edges))


def strongly_connected(edges: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative), sorted."""
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
    return sorted(cycles)


def test_core_and_tui_have_no_import_circles() -> None:
    assert import_cycles() == []


def test_the_check_sees_a_circle(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """A lazy import back into a package that imports the module is found."""
    for rel, text in {"core/__init__.py": "", "core/a.py": "from core import b\n",
                      "core/b.py": "def f():\n    from core.a import x\n",
                      "tui/__init__.py": "", "tui/c.py": "import core.a\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert import_cycles() == [["core.a", "core.b"]]


def test_core_and_tui_have_no_package_cycles() -> None:
    assert package_cycles() == []


def test_the_package_check_sees_a_cycle_the_file_check_does_not(
    tmp_path: Path, monkeypatch  # noqa: ANN001
) -> None:
    """A control: two packages whose files form no circle (loop imports prims, prims.cache
    lazily imports drafts.step, drafts.model imports prims.cache) are a package cycle, and a
    third package only below them and a top-level module above them are in none."""
    files = {
        "core/__init__.py": "",
        "core/settings.py": "",
        "core/cli.py": "import core.loop.engine\n",
        "core/loop/__init__.py": "",
        "core/loop/engine.py": "from core.drafts import model\nimport core.settings\n",
        "core/drafts/__init__.py": "",
        "core/drafts/model.py": "from core.prims.cache import Cached\n",
        "core/drafts/step.py": "from core.io.files import read\n",
        "core/prims/__init__.py": "",
        "core/prims/cache.py": "def f():\n    from core.drafts.step import x\n",
        "core/io/__init__.py": "",
        "core/io/files.py": "import core.settings\n",
        "tui/__init__.py": "",
        "tui/app.py": "import core.cli\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert import_cycles() == []
    assert package_cycles() == [["core.drafts", "core.prims"]]
