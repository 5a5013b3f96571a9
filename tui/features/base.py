"""What every feature of the app is, what it may use of the app shell, and how features talk.

A feature (runs, calibration, bench, profiles, compare, models, view, settings keys) is one
class mixed into SpecDecApp: its keys' `action_*`, the messages it folds (`on_*`, found by
Textual on each class of the app: every feature that defines `on_engine_failed` gets the
message, in the order of the app's bases), and its state, a small object of its own
(`self.runs_state`, `self.profiles_state`, ...) that only its feature writes, and, for what
the status line says, its frozen part of the one `status` reactive (tui/status.py), replaced
with `set_status(part=...)`.

Features never call each other's methods. What one reads of another is declared in
`AppShell` (the feature states, read only); what one tells the others is a message posted to
the app (below, or the bridge's, tui/messages.py); the settings change only through `apply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from textual.message import Message

if TYPE_CHECKING:
    from core.profile import RecordedRun
    from core.settings import Settings
    from tui.bridge import EngineBridge
    from tui.engine_info import CurveInfo, PairInfo
    from tui.records import RunRecord
    from tui.status import Status


class AppShell(Protocol):
    """The app shell's side of the seam (tui/app.py): what any feature reads or calls."""

    settings: Settings  # the reactive settings the next round runs with: change with apply
    status: Status  # the one status reactive: each feature replaces its own part
    bridge: EngineBridge  # the engine thread's commands
    show_rejected: bool  # whether rejected drafts are drawn (tui/features/settings_keys.py)
    info: PairInfo | None  # the loaded pair (models_state.info)
    curve: CurveInfo | None  # the cost curve shown (calibration_state.curve)
    # Each feature's state (its module's XState): written by its feature alone, read by any.
    # Typed Any here: the feature modules import this one, so this one imports none of them.
    runs_state: Any
    models_state: Any
    calibration_state: Any
    bench_state: Any
    compare_state: Any
    profiles_state: Any
    view_state: Any

    def apply(self, **changes: Any) -> bool: ...
    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None: ...
    def post_message(self, message: Message) -> bool: ...
    def query_one(self, selector: Any, expect_type: Any = None) -> Any: ...
    def refresh_panels(self, all_panels: bool = False) -> None: ...
    def show_panel(self, pane: str) -> None: ...


class RunRecorded(Message):
    """A turn's run finished and was recorded (tui/features/runs.py): the compared pair
    takes it as B (tui/features/compare.py)."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__()
        self.record = record


class RecordedRunShown(Message):
    """A profile's recorded run is to be shown (tui/features/profiles.py): its rounds fill the
    panels unless a turn runs (runs), its calibration becomes the curve (calibration), it
    becomes compare's A (compare), and the panels are drawn once all did (view, which comes
    after them in the app's bases)."""

    def __init__(self, run: RecordedRun, record: RunRecord) -> None:
        super().__init__()
        self.run, self.record = run, record


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
