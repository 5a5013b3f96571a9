"""What every feature of the app is, and what it may use of the app shell.

A feature (runs, calibration, bench, profiles, compare, models, view, settings keys) is one
class mixed into SpecDecApp: its keys' `action_*`, the bridge messages it folds (`on_*`,
found by Textual on the app), and its state: a small object of its own (`self.runs_state`,
`self.profiles_state`, ...) and, for what the status line says, its frozen part of the one
`status` reactive (tui/status.py). A feature changes its part with `set_status(part=...)`;
the shell's `watch_status` redraws. It never calls another feature's private helpers: what
features share is declared here (`AppShell`) or is a feature's public method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from core.settings import Settings
    from tui.bridge import EngineBridge
    from tui.engine_info import CurveInfo, PairInfo
    from tui.status import Status


class AppShell(Protocol):
    """The app shell's side of the seam (tui/app.py): what any feature reads or calls."""

    settings: Settings  # the reactive settings the next round runs with
    status: Status  # the one status reactive: each feature replaces its own part
    bridge: EngineBridge  # the engine thread's commands
    info: PairInfo | None  # the loaded pair (tui/features/models.py)
    curve: CurveInfo | None  # the cost curve shown (tui/features/calibration.py)

    def apply(self, **changes: Any) -> bool: ...
    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None: ...
    def query_one(self, selector: Any, expect_type: Any = None) -> Any: ...
    def refresh_panels(self, all_panels: bool = False) -> None: ...
    def show_panel(self, pane: str) -> None: ...


class Feature:
    """Base of the app's features: the status seam, shared by all of them."""

    status: Status

    def set_status(self, **parts: Any) -> None:
        """Replace this feature's part(s) of the status; the status line follows (watch_status)."""
        self.status = self.status.with_(**parts)

    def can_start(self: Any, what: str) -> bool:
        """Whether `c` or `b` may start now (a pair loaded, the engine idle); if not, a
        notification says why."""
        if self.info is None:
            self.notify(f"Cannot {what}: no models are loaded yet.", severity="warning")
            return False
        if self.status.busy:
            self.notify(f"Cannot {what} while the engine is busy (esc cancels a run).",
                        severity="warning")
            return False
        return True


def state_view(state: str, name: str, doc: str) -> property:
    """`app.<name>`, read-only, reading `app.<state>.<name>`: the names tests, the screenshot
    script and the soak read on the app stay, while the value lives in its feature's state
    object, written by that feature alone."""

    def get(self: Any) -> Any:
        return getattr(getattr(self, state), name)

    return property(get, doc=doc)
