"""tui/features/models.py: a first use that stalls on GPU kernel compilation while the pair
loads is said at once, in a notification and the status line, until it is done."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.widgets import Static

from core.runtime.compile_watch import CompileWatch
from tests.helpers.app import GATE_S, FakeSession, Script, ready, wait_for
from tests.helpers.app_shown import app_on

SIZE = (160, 45)


async def test_a_compile_at_load_shows_in_the_status_line_until_done(profiles: Path) -> None:
    """A first use that stalls on GPU kernel compilation (core.runtime.warmup's watch, as the real
    session's warm-up runs it while loading) is said at once: a notification and the status
    line, then the final "compiled in N s". The load holds until the status line showed it."""
    shown = threading.Event()

    def factory(target: str, draft: str | None) -> FakeSession:
        with CompileWatch("fake [model]", threshold_s=0.05, interval_s=60.0):
            assert shown.wait(GATE_S)
        return FakeSession(Script(), target, draft)

    app = app_on(factory, profiles)
    said = "compiling GPU kernels for fake [model]: first use on this machine"

    def status() -> str:
        return str(app.query_one("#status", Static).render())

    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: said in status())
        assert [n.severity for n in app._notifications if n.message == said] == ["warning"]
        shown.set()
        await ready(pilot)
        await wait_for(pilot, lambda: any(n.message.startswith("compiled GPU kernels for fake "
                                                               "[model] in ")
                                          for n in app._notifications))
        assert app.compiling is None and said not in status() and "ready" in status()
