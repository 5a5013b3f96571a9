"""Shared fixtures for core tests: the real default pair is loaded once per session; the tiny
random pair the bench tests run on, once per module (a module's engines share its weights)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def default_pair():
    """ModelPair of the embedded SmolLM2 target and its `self:bits=3` draft (~2 s to load).

    Mark tests that use it `@pytest.mark.real_model`; `make test` fetches the model first.
    """
    from core.models import load_pair

    return load_pair("default", "self:bits=3")


@pytest.fixture(scope="module")
def tiny_pair():
    """ModelPair of `shape:tiny` / `shape:tiny-draft`: random ~100k-parameter llamas (CPU, ms)."""
    from core.models import load_pair

    return load_pair("shape:tiny", "shape:tiny-draft")


@pytest.fixture
def engine(tiny_pair):
    """A fresh Engine on the module's tiny pair (empty caches each test)."""
    from core.decode.engine import Engine

    return Engine.from_pair(tiny_pair)
