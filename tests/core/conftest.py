"""Shared fixtures for core tests: the real default pair is loaded once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def default_pair():
    """ModelPair of the embedded SmolLM2 target and its `self:bits=3` draft (~2 s to load).

    Mark tests that use it `@pytest.mark.real_model`; `make test` fetches the model first.
    """
    from core.models import load_pair

    return load_pair("default", "self:bits=3")
