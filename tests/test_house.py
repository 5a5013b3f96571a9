"""The house rules: a newcomer finds their room because no module is a warehouse.

- A .py file in core/ or tui/ past 600 lines rings an alarm. The number is a smell alarm, not a
  design: modules are cut where an idea ends (docs/ARCHITECTURE.md maps them), never to come in
  under a count; a file that rings is split where its ideas part, and a file well under it is
  not "done" for that.
- At most 8 modules sit directly in core/ (the value types, the version and the command entry;
  everything else lives in a package by idea).
- Every package's __init__.py names its public names in `__all__` (docs/CONTRACTS.md); an empty
  one says that the package's modules are its API and are imported by their own names.
- Comments and docstrings explain the code as it is: no "run N" or "issue N" narrative. What a
  measurement found is linked by its page (docs/benchmarks/) or its decision record
  (docs/decisions/); history lives there, not beside the code.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from tests.helpers import REPO as ROOT

ALARM_LINES = 600
MAX_TOP_MODULES = 8


def test_no_module_in_core_or_tui_rings_the_600_line_alarm() -> None:
    long = []
    for top in ("core", "tui"):
        for path in sorted((ROOT / top).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > ALARM_LINES:
                long.append(f"{path.relative_to(ROOT).as_posix()} ({lines})")
    assert not long, (
        f"over {ALARM_LINES} lines, the alarm for a file that holds more than one idea; split "
        f"it where an idea ends, not to a count: {', '.join(long)}"
    )


def test_at_most_8_modules_sit_directly_in_core() -> None:
    top = sorted(p.name for p in (ROOT / "core").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly in core/: {', '.join(top)}"


def without_all(root: Path = ROOT) -> list[str]:
    """The __init__.py files under core/ and tui/ that assign no module-level `__all__`."""
    missing = []
    for top in ("core", "tui"):
        for path in sorted((root / top).rglob("__init__.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {
                t.id
                for node in tree.body
                if isinstance(node, ast.Assign | ast.AnnAssign)
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Name)
            }
            if "__all__" not in names:
                missing.append(path.relative_to(root).as_posix())
    return missing


def test_every_package_names_its_public_names() -> None:
    assert without_all() == []


def test_the_all_check_sees_a_package_without_one(tmp_path: Path) -> None:
    """A control: a docstring alone, or `__all__` only inside a function, is not a list."""
    for rel, text in {
        "core/__init__.py": '"""Core."""\n__all__: list[str] = []\n',
        "core/a/__init__.py": '"""A docstring and nothing else."""\n',
        "core/b/__init__.py": "def f():\n    __all__ = []\n",
        "tui/__init__.py": "__all__ = ['x']\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert without_all(tmp_path) == ["core/a/__init__.py", "core/b/__init__.py"]


LAB_NOTE = re.compile(r"\b(?:run|issue) \d+\b", re.IGNORECASE)
DOC_STARTS = ("#", '"""', "'''", 'r"""', "f'''")


def lab_notes(root: Path = ROOT) -> list[str]:
    """Comments and docstrings under core/ and tui/ that narrate a run or an issue by number."""
    found = []
    for top in ("core", "tui"):
        for path in sorted((root / top).rglob("*.py")):
            src = path.read_text(encoding="utf-8")
            for tok in tokenize.generate_tokens(io.StringIO(src).readline):
                if tok.type not in (tokenize.COMMENT, tokenize.STRING):
                    continue
                if tok.string.startswith(DOC_STARTS) and LAB_NOTE.search(tok.string):
                    found.append(f"{path.relative_to(root).as_posix()}:{tok.start[0]}")
    return found


def test_no_comment_narrates_a_run_or_an_issue() -> None:
    assert lab_notes() == []


def test_the_lab_note_check_sees_one(tmp_path: Path) -> None:
    """A control: a comment and a docstring that narrate are found; a string the program uses
    ("run 3" in a message), another project's issue (#6605) and "runs 4 matmuls" are not."""
    (tmp_path / "core").mkdir()
    (tmp_path / "tui").mkdir()
    (tmp_path / "core" / "a.py").write_text(
        '"""Why (issue 31): ..."""\n'
        "x = 1  # slower in run 8\n"
        'y = "run 3"\n'
        "# Textual issue #6605; a layer runs 4 matmuls\n"
    )
    assert lab_notes(tmp_path) == ["core/a.py:1", "core/a.py:2"]


def test_the_rules_see_the_tree() -> None:
    """The checks above read real files: a moved root would make them pass on nothing."""
    assert (ROOT / "core" / "decode" / "engine.py").is_file()
    assert len(list((ROOT / "tui").rglob("*.py"))) > 20
    assert len(list((ROOT / "core").rglob("__init__.py"))) > 10
