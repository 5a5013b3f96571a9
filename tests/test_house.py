"""Issue 27's house rules: a newcomer finds their room because no module is a warehouse.

No .py file in core/ or tui/ over 450 lines (a file that grows past it holds more than one
idea: cut it by idea, as docs/ARCHITECTURE.md maps), and at most 8 modules directly in core/
(the value types and the command entry; everything else lives in a package by idea).
"""

from __future__ import annotations

from tests.helpers import REPO as ROOT

MAX_LINES = 450
MAX_TOP_MODULES = 8


def test_no_module_in_core_or_tui_is_over_450_lines() -> None:
    long = []
    for top in ("core", "tui"):
        for path in sorted((ROOT / top).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(ROOT).as_posix()} ({lines})")
    assert not long, f"over {MAX_LINES} lines, cut by idea: {', '.join(long)}"


def test_at_most_8_modules_sit_directly_in_core() -> None:
    top = sorted(p.name for p in (ROOT / "core").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly in core/: {', '.join(top)}"


def test_the_rules_see_the_tree() -> None:
    """The checks above read real files: a moved root would make them pass on nothing."""
    assert (ROOT / "core" / "decode" / "engine.py").is_file()
    assert len(list((ROOT / "tui").rglob("*.py"))) > 20
