"""The chat's legend: which colour means which origin, and whether rejected drafts are shown."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from core.chat.palette import COMMITTED_STYLES
from tui.transcript import ORIGIN_HELP, ORIGIN_STYLES, REJECTED, REJECTED_COPY


class Legend(Static):
    """Which colour means which origin, and whether rejected drafts are shown."""

    def render_legend(self, show_rejected: bool) -> None:
        text = Text()
        for origin, style in COMMITTED_STYLES.items():
            text.append("■ ", style)
            text.append(origin + "  ")
        text.append("rejected", ORIGIN_STYLES[REJECTED])
        text.append("/")
        text.append("copy", ORIGIN_STYLES[REJECTED_COPY])
        text.append(" shown (r)" if show_rejected else " hidden (r)", "dim")
        self.update(text)
        self.tooltip = "\n".join(f"{k}: {v}" for k, v in ORIGIN_HELP.items())
