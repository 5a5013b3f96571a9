"""Fixtures of the UI tests: a scripted engine, a profiles folder of the test's own, and an app
on both. The scripted engine itself (FakeSession, Script, chat, ready, wait_for) is in
tests/helpers/app.py, which test modules import; a conftest is never imported."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from core.settings import Settings
from tests.helpers.app import Script, scripted_app
from tui.app import SpecDecApp


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    path = tmp_path / "profiles"
    path.mkdir()
    return path


@pytest.fixture
def make_app(script: Script, profiles: Path) -> Callable[..., SpecDecApp]:
    """An app on the scripted engine, saving profiles into a temporary folder."""

    def make(settings: Settings | None = None, **kw: object) -> SpecDecApp:
        return scripted_app(script, profiles, settings, **kw)

    return make
