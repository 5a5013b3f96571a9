"""The repository's scripts as modules: docs/benchmarks/ (with its h200/ and real-pair/
folders) and tools/device/ hold Python files that are run, not imported (render.py, peer_ops.py,
never_slower.py, pack_split.py, ...).
Their tests load them by path; this is the one way they do it (eight copies had grown)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.helpers import REPO


def load_script(relative: str, name: str, *, register: bool = False) -> ModuleType:
    """The script at REPO/`relative`, executed as the module `name`; `register` puts it in
    sys.modules first (a script whose dataclasses look their module up needs it)."""
    spec = importlib.util.spec_from_file_location(name, Path(REPO) / relative)
    assert spec is not None and spec.loader is not None, relative
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
