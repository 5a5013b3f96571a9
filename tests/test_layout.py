"""The test tree's own rules (issue 27): its folders mirror the source packages, no test module
imports another test module or a conftest (what they share is in tests/helpers/, fixtures in
conftest.py files), and the slow modules the suite starts first (tests/conftest.py's SLOW_FIRST) exist, so a move cannot
silently drop them back to the end of the run."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import SLOW_FIRST

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


def python_files(root: Path = TESTS) -> list[Path]:
    """Every Python file under `root` but the __init__ files."""
    return sorted(p for p in root.rglob("*.py") if p.name != "__init__.py")


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (a function's local import included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from tests.core import test_engine` imports a module by its name
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def forbidden(module: str) -> bool:
    """A test module (tests...test_x) or a conftest, which nothing should import."""
    parts = module.split(".")
    return parts[0] == "tests" and (parts[-1].startswith("test_") or parts[-1] == "conftest")


def crossings(root: Path = TESTS) -> list[str]:
    """'path imports module' for each import of a test module or conftest under `root`."""
    out = []
    for path in python_files(root):
        for module in sorted(imported_modules(path)):
            # tests/test_layout.py reads SLOW_FIRST, the conftest's data: that one is allowed
            if forbidden(module) and not (path.name == "test_layout.py"
                                          and module == "tests.conftest"):
                out.append(f"{path.relative_to(root.parent)} imports {module}")
    return out


def test_no_test_module_imports_another_or_a_conftest() -> None:
    assert crossings() == []


def test_the_check_sees_a_crossing(tmp_path: Path) -> None:
    """A control: a made-up tree where one test module imports another's helper, one reaches
    a conftest inside a function, and one imports the helpers (allowed)."""
    root = tmp_path / "tests"
    (root / "core").mkdir(parents=True)
    (root / "core" / "test_a.py").write_text("from tests.core.test_b import run\n")
    (root / "core" / "test_b.py").write_text(
        "def f():\n    from tests.tui.conftest import ready\n    return ready\n")
    (root / "core" / "test_c.py").write_text("from tests.helpers.engine import run\n")
    (root / "core" / "test_d.py").write_text("from tests.core import test_a\n")
    assert crossings(root) == [
        "tests/core/test_a.py imports tests.core.test_b",
        "tests/core/test_b.py imports tests.tui.conftest",
        "tests/core/test_d.py imports tests.core.test_a",
    ]


def test_the_slow_modules_started_first_exist() -> None:
    missing = [path for path in SLOW_FIRST if not (ROOT / path).is_file()]
    assert missing == [], f"tests/conftest.py's SLOW_FIRST names modules that are gone: {missing}"


def unmirrored(root: Path = ROOT) -> list[str]:
    """Test folders under tests/core and tests/tui with no source package at the same path
    (tests/core/decode/ needs core/decode/): the tests mirror the tree they test."""
    out = []
    for side in ("core", "tui"):
        base = root / "tests" / side
        # __pycache__ and the snapshot plugin's __snapshots__ are not test folders
        for folder in sorted(p for p in base.rglob("*") if p.is_dir()
                             and not any(part.startswith("__") for part in p.relative_to(base).parts)):
            source = root / folder.relative_to(root / "tests")
            if not (source / "__init__.py").is_file():
                out.append(str(folder.relative_to(root)))
    return out


def test_test_folders_mirror_the_source_packages() -> None:
    assert unmirrored() == []


def test_the_mirror_check_sees_a_folder_without_its_package(tmp_path: Path) -> None:
    (tmp_path / "core" / "decode").mkdir(parents=True)
    (tmp_path / "core" / "decode" / "__init__.py").write_text("")
    (tmp_path / "tests" / "core" / "decode").mkdir(parents=True)
    (tmp_path / "tests" / "core" / "gone").mkdir(parents=True)
    (tmp_path / "tests" / "tui" / "__snapshots__" / "test_x").mkdir(parents=True)
    assert unmirrored(tmp_path) == ["tests/core/gone"]
