"""The tool's own identity: its version and, from a git checkout, the commit and a dirty flag.

Every record of a measurement (bench reports, saved runs) names the code that measured, so
a number can be traced to the commit that produced it. Run from a checkout (`make run`,
PYTHONPATH on a GPU machine) the version is the checkout's pyproject.toml and the commit is
git's; from an installed wheel, the installed version alone. Where the tree runs without
its own history, `SPECDEC_TUI_COMMIT` names the commit it is (a copy of the tree whose .git
holds an older HEAD would otherwise name that commit, dirty); its dirty flag is then unknown.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the repository root: this file is core/version.py


@functools.cache
def tool_version() -> dict[str, Any]:
    """{"version", "commit", "dirty"}: None where unknown (no checkout, no git, no metadata).

    Read once per process: a commit made while a long bench runs does not relabel it.
    """
    return {"version": _version(), **_git()}


def _version() -> str | None:
    pyproject = ROOT / "pyproject.toml"
    if pyproject.is_file():  # a checkout: its own version, not whatever is installed
        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
            if project.get("name") == "specdec-tui" and isinstance(project.get("version"), str):
                return str(project["version"])
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            pass
    from importlib import metadata

    try:
        return metadata.version("specdec-tui")
    except metadata.PackageNotFoundError:
        return None


def _git() -> dict[str, Any]:
    """The checkout's HEAD and whether tracked files differ from it; None outside a checkout.
    SPECDEC_TUI_COMMIT, where set, is the commit (the caller knows the tree; git does not)."""
    named = os.environ.get("SPECDEC_TUI_COMMIT", "").strip()
    if named:
        return {"commit": named, "dirty": None}
    if not (ROOT / ".git").exists():  # a folder in a clone, a file in a worktree
        return {"commit": None, "dirty": None}

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                                  text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def version_text(env: dict[str, Any]) -> str:
    """'specdec-tui 0.1.0 at 57d3e03 (dirty)' from a record's environment; 'unknown' parts
    for records written before the tool named itself."""
    version = env.get("specdec_tui") or "version unknown"
    commit = env.get("specdec_tui_commit")
    text = f"specdec-tui {version}"
    if commit:
        text += f" at {str(commit)[:12]}" + (" (dirty)" if env.get("specdec_tui_dirty") else "")
    elif "specdec_tui_commit" not in env:
        text += ", commit unknown"
    return text
