"""What an app on the scripted engine showed its user, and apps built on a session factory of
the test's own: the UI tests of hostile and untrusted input (profiles, markup, notices) read
these, so each reads a notification, a toast or a widget's text one way.

The conftest's `make_app` fixture is the app on a plain scripted session; `app_on` is for a
test whose session must differ (a context window, a warning while loading, a pair's info).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from textual.widgets._toast import Toast

from core.profile import ProfileStore
from core.settings import Settings
from tests.helpers.app import FakeSession, Script
from tui.app import SpecDecApp


def app_on(factory: Callable[[str, str | None], FakeSession], profiles: Path,
           settings: Settings | None = None) -> SpecDecApp:
    """An app whose engine thread builds its session with `factory`, saving profiles into
    `profiles` (no shipped presets: a test sees only its own)."""
    return SpecDecApp(settings or Settings(), factory, profiles_dir=profiles,
                      profile_store=ProfileStore(profiles, presets=None))


def app_with(script: Script, profiles: Path, settings: Settings | None = None,
             **info_changes: object) -> SpecDecApp:
    """An app on the scripted engine whose pair info carries `info_changes`."""

    def factory(target: str, draft: str | None) -> FakeSession:
        session = FakeSession(script, target, draft)
        session.info = dataclasses.replace(session.info, **info_changes)
        return session

    return app_on(factory, profiles, settings)


def said(app: SpecDecApp, severity: str | None = None) -> list[str]:
    """Every notification so far, expired or not (a loaded machine outlives a 2 s toast).

    The first call starts the record: call it before the app runs."""
    if not hasattr(app, "said"):
        app.said = []  # type: ignore[attr-defined]
        real = app.notify

        def notify(message: str, **kw: object) -> None:
            app.said.append((message, kw.get("severity", "information")))  # type: ignore[attr-defined]
            real(message, **kw)  # type: ignore[arg-type]

        app.notify = notify  # type: ignore[method-assign]
    return [m for m, sev in app.said if severity is None or sev == severity]  # type: ignore[attr-defined]


def notices(app: SpecDecApp, severity: str) -> list[str]:
    """The notifications of `severity` the app still holds (those not expired yet)."""
    return [n.message for n in app._notifications if n.severity == severity]


def plain(widget: object) -> str:
    """What a widget renders, as plain text (markup, if any had been parsed, is gone)."""
    rendered = widget.render()  # type: ignore[attr-defined]
    return getattr(rendered, "plain", str(rendered))


def toasts(app: SpecDecApp) -> str:
    """The text of the toasts on the current screen, joined."""
    return " ".join(plain(t) for t in app.screen.query(Toast))
