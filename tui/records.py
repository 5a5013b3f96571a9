"""RunRecord: a finished run of this session as the app keeps it (to compare, save, show).

Plain data beside the widgets that show it (tui/widgets/profile_panel.py, tui/screens/compare.py)
and the app features that fill it (tui/features/runs.py, tui/features/profiles.py).
"""

from __future__ import annotations

import dataclasses

from core.events import RunSummary
from core.settings import Settings


@dataclasses.dataclass
class RunRecord:
    """A finished run as the Profile panel compares it."""

    label: str
    settings: Settings
    summary: RunSummary
    text: str = ""
    quality: float | None = None  # mean TV(pi, p) realised; lower is closer to the target
