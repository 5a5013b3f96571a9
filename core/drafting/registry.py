"""Draft sources by name: `draft_source = "model"` in Settings picks a registered factory.

Adding a source is one module with a Drafter and one `register(name, factory)` call; the
engine's round never changes. The built-ins are named here by import path, so Settings can
validate a name without importing MLX.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# name -> "module:attribute" of a factory(DraftResources) -> Drafter, imported on first use.
_BUILTIN = {
    "model": "core.drafting.model:ModelDrafter.from_resources",
    "lookup": "core.drafting.lookup:LookupDrafter.from_resources",
    "hybrid": "core.drafting.lookup:HybridDrafter.from_resources",
    "tree": "core.drafting.tree:TreeDrafter.from_resources",
}
_REGISTERED: dict[str, Callable[[DraftResources], Any] | str] = dict(_BUILTIN)


@dataclass(frozen=True)
class DraftResources:
    """What a draft source may be built from: the draft model with its cache (the engine's,
    shared with draft-only mode), if one is loaded, and the common vocabulary size."""

    draft: Any | None  # core.primitives.cached_model.CachedModel
    vocab_size: int
    draft_reason: str | None = None  # why the draft model cannot speculate, if it cannot
    source: Callable[[str], Any] | None = None  # the engine's other sources, by name


def register(name: str, factory: Callable[[DraftResources], Any]) -> None:
    """Make `name` a valid draft_source; the factory builds one drafter per engine."""
    _REGISTERED[name] = factory


def unregister(name: str) -> None:
    """Remove a registered source (built-ins come back as they were)."""
    _REGISTERED.pop(name, None)
    if name in _BUILTIN:
        _REGISTERED[name] = _BUILTIN[name]


def names() -> tuple[str, ...]:
    """The draft sources a Settings may name, built-ins first."""
    return tuple(_REGISTERED)


def factory(name: str) -> Callable[[DraftResources], Any]:
    """The factory registered under `name` (KeyError if none)."""
    f = _REGISTERED[name]
    if isinstance(f, str):
        module, _, attr = f.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        f = obj
    return f  # type: ignore[return-value]
