"""docs/ARCHITECTURE.md is the truth about the layout: it must name every package and module.

A newcomer finds their room from that page, so a module added without a line there is a door
the map does not show. The packages block is read as a tree by indentation: a line whose
first word ends in "/" opens a package; every `name.py` on the lines under it (until a line
indented no deeper) is a module the page names in that package.
"""

from __future__ import annotations

import re

from tests.helpers import REPO as ROOT

DOC = ROOT / "docs" / "ARCHITECTURE.md"


def _named() -> tuple[set[str], set[str]]:
    """(packages, modules) the page's packages block names, as paths like core/decode/engine.py."""
    text = DOC.read_text()
    block = text[text.index("```\ncore/") + 4 :]
    block = block[: block.index("```")]
    packages: set[str] = set()
    modules: set[str] = set()
    stack: list[tuple[int, str]] = []  # (indent, package path)
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        first = line.split()[0]
        if indent < 22 and first.endswith("/"):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = (stack[-1][1] + "/" if stack else "") + first.rstrip("/")
            stack.append((indent, path))
            packages.add(path)
        elif indent < 22:
            while stack and stack[-1][0] >= indent:
                stack.pop()
        if stack:
            for name in re.findall(r"\b([a-z_]+\.py)\b", line):
                modules.add(f"{stack[-1][1]}/{name}")
    return packages, modules


def test_architecture_names_every_package_and_module() -> None:
    packages, modules = _named()
    missing = []
    for top in ("core", "tui"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "__pycache__" in rel:
                continue
            if path.name == "__init__.py":
                if rel.rsplit("/", 1)[0] not in packages:
                    missing.append(rel.rsplit("/", 1)[0] + "/")
            elif rel not in modules:
                missing.append(rel)
    assert not missing, f"docs/ARCHITECTURE.md does not name: {', '.join(missing)}"


def test_the_check_sees_a_module_the_page_does_not_name() -> None:
    # The parse must not be so loose that it names everything: a made-up module is absent.
    _, modules = _named()
    assert "core/decode/engine.py" in modules
    assert "core/decode/nowhere.py" not in modules
    assert "core/engine.py" not in modules
