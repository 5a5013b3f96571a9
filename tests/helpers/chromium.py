"""Headless Chromium for the page tests: where it is, and one run of it (DOM or screenshot)
with flags that keep it off the network and out of the user's profile."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    """The Chromium binary, or None (the tests then skip, saying so)."""
    for name in CANDIDATES:
        found = shutil.which(name) if not name.startswith("/") else (
            name if Path(name).is_file() else None)
        if found:
            return found
    return None


def run_chromium(page: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Chromium headless on `page` with `args` (--dump-dom, --screenshot=PNG, ...)."""
    binary = chromium_path()
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="specdec-chromium-") as profile:
        return subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", *args, page.resolve().as_uri()],
            capture_output=True, text=True, timeout=timeout, check=False,
        )
