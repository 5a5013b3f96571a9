"""Suite-wide: user profiles go to a folder of the run's own, never the user's real one."""

from __future__ import annotations

import os
import tempfile

from core.profile.files import PROFILES_ENV


def pytest_configure() -> None:
    # Set before any test and inherited by every CLI the tests start: a test that saves without
    # --profiles-dir writes here, not into the user data folder of whoever runs the suite.
    # One folder per process: parallel workers (pytest-xdist) never save over each other.
    os.environ[PROFILES_ENV] = tempfile.mkdtemp(prefix="specdec-profiles-")
