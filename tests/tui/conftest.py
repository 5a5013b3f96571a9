"""Fixtures of the UI tests: a scripted engine, a profiles folder of the test's own, and an app
on both. The scripted engine itself (FakeSession, Script, chat, ready, wait_for) is in
tests/helpers/app.py, which test modules import; a conftest is never imported."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from core.profile import ProfileStore
from core.settings import Settings
from tests.helpers.app import FakeSession, Script
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
        def factory(target: str, draft: str | None) -> FakeSession:
            return FakeSession(script, target, draft)

        # No shipped presets: the picker and the snapshots see only this test's profiles.
        store = ProfileStore(profiles, presets=None)
        app = SpecDecApp(settings or Settings(), factory, profiles_dir=profiles,
                         profile_store=store, **kw)
        # "From Enter" on a clock that stands still: the queue's real milliseconds would
        # move a message's TTFT in every snapshot (a test that times a wait sets its own).
        app.bridge.clock = lambda: 0.0
        return app

    return make
