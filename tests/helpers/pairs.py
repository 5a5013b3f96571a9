"""The real default pair, loaded once per test process and shared by every real-model test:
the `default_pair` fixture, and the CLI and the app where they load it themselves (a bench, a
sweep, the app's engine). Loading it (the GGUF read, the self-draft requantized) is seconds of
each such test on a 2-core CPU, and nothing a test does changes a loaded pair: engines keep
their own caches, and the verification patches restore what they swap on exit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_LOADED: dict[tuple[str, str], Any] = {}


def default_spec() -> tuple[str, str]:
    """The app's default pair as load_pair is called for it: ("default", Settings().draft)."""
    from core.settings import Settings

    return ("default", Settings().draft)


def default_pair(load: Callable[..., Any] | None = None) -> Any:
    """The process's one ModelPair of the default spec, loaded by `load` (core.models.load_pair)
    the first time."""
    spec = default_spec()
    if spec not in _LOADED:
        if load is None:
            from core.models import load_pair as load
        _LOADED[spec] = load(*spec)
    return _LOADED[spec]


def sharing(load: Callable[..., Any]) -> Callable[..., Any]:
    """core.models.load_pair that answers the default spec with the process's one pair and
    loads any other pair as `load` does."""

    def load_pair(target_spec: str, draft_spec: str | None, **kw: Any) -> Any:
        if (target_spec, draft_spec) == default_spec():
            return default_pair(load)
        return load(target_spec, draft_spec, **kw)

    return load_pair


def loaded() -> int:
    """How many pairs the memo holds (its test reads it)."""
    return len(_LOADED)
