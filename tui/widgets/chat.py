"""Chat pane: the conversation, each assistant token coloured by the model that decided it.

Messages are Static widgets holding rich Text built from a Transcript; a message re-renders
at most once per flush of rounds, and the scroll view stays anchored to the newest text.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from core.chat.palette import COMMITTED_STYLES
from core.events import RunSummary
from tui.stats import RoundStats
from tui.transcript import (
    ORIGIN_HELP,
    ORIGIN_STYLES,
    REJECTED,
    REJECTED_COPY,
    Decode,
    Transcript,
)


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


class UserMessage(Static):
    """A user turn."""

    def __init__(self, content: str) -> None:
        super().__init__(Text(content), classes="user-message")
        self.content_text = content
        self.border_title = "you"


class AssistantMessage(Vertical):
    """An assistant turn: coloured text that grows per round, and a stats footer line."""

    def __init__(self, decode: Decode, eos_ids: frozenset[int], model_name: str) -> None:
        super().__init__(classes="assistant-message")
        self.transcript = Transcript(decode, eos_ids)
        self.border_title = Text(model_name)  # a GGUF's own name may hold brackets: not markup
        self.summary: RunSummary | None = None
        self.error: str | None = None
        self.note: str | None = None  # why a turn ended without a summary (not an error)
        # From Enter to the engine's start (tui.messages.RunFinished): TTFT and E2E add it
        self.waited_s = 0.0
        self.calibration_s: float | None = None
        self.finished = False
        self._body = Static("", classes="body")
        self._footer = Static("…", classes="footer")

    def compose(self) -> ComposeResult:
        yield self._body
        yield self._footer

    @property
    def text(self) -> str:
        return self.transcript.text

    def refresh_view(self, show_rejected: bool, stats: RoundStats | None = None) -> None:
        body = self.transcript.render(show_rejected)
        if not body.plain and not self.finished:
            body = Text("thinking…", "dim italic")
        self._body.update(body)
        self._footer.update(self.footer_text(stats))

    def footer_text(self, stats: RoundStats | None) -> Text:
        """tokens · tok/s · TTFT · acceptance: the per-message numbers of the issue."""
        s = self.summary
        parts: list[str] = []
        if s is not None:
            parts.append(f"{s.tokens} tok")
            # 0: every token came in the first round, so there is no decode time to divide by
            parts.append(f"{s.decode_tok_s:.1f} tok/s" if s.decode_tok_s else "- tok/s")
            # From Enter: the queue and a first-use calibration before the engine's own clock
            parts.append(f"TTFT {s.ttft_s + self.waited_s:.2f}s")
            if s.acceptance is not None:
                mal = f", {s.mean_accepted_length:.2f}/round" if s.mean_accepted_length else ""
                parts.append(f"acc {s.acceptance:.0%}{mal}")
            parts.append(f"{s.rounds} rounds")
            parts.append(f"E2E {s.e2e_s + self.waited_s:.2f}s")
            if s.stop_reason != "length":
                parts.append(s.stop_reason)
        elif stats is not None:
            parts.append(f"{stats.tokens} tok")
            parts.append(f"{len(stats.rounds)} rounds")
            if stats.acceptance is not None:
                parts.append(f"acc {stats.acceptance:.0%}")
            if not self.finished:
                parts.append("generating…")
        if self.transcript.rejected_count:
            parts.append(f"{self.transcript.rejected_count} rejected")
        out = Text(" · ".join(parts), "dim")
        if self.calibration_s is not None and s is not None:  # a cancelled one: the note says
            out.append(("\n" if parts else "") + f"first use: calibrated the verify cost for "
                       f"{self.calibration_s:.1f}s before the first round (in TTFT and E2E)",
                       "dim yellow")
        if self.note:
            out.append(("  " if parts else "") + self.note, "yellow")
        if self.error:
            out.append(("  " if parts else "") + f"error: {self.error}", "red")
        return out


# Messages (and notes) the chat keeps on screen. Every layout of the screen walks all of
# them, so an unbounded chat slowed every keypress and round as a session grew (a 200-turn
# soak went from 0.3 s to 1.5 s of CPU a turn) and held every message's widgets forever.
MAX_SHOWN = 60


class ChatView(VerticalScroll):
    """The scrolling conversation, anchored to the bottom while text streams in.

    It keeps the newest MAX_SHOWN messages; older ones leave the screen (not the model's
    context, which core.models.context trims on its own terms) and one line says how many.
    """

    can_focus = True

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.hidden = 0  # messages no longer shown

    def on_mount(self) -> None:
        self.anchor()

    def add(self, *widgets: Widget, before: Widget | None = None) -> None:
        """Mount messages (before `before` when given), then drop the oldest beyond MAX_SHOWN."""
        self.mount(*widgets, before=before)
        shown = [c for c in self.children if not c.has_class("hidden-note")]
        extra = len(shown) - MAX_SHOWN
        if extra <= 0:
            return
        for widget in shown[:extra]:
            widget.remove()
        self.hidden += extra
        text = Text(f"{self.hidden} earlier messages are no longer shown (the chat keeps the "
                    f"last {MAX_SHOWN}).", "dim italic")  # fmt: skip
        notes = self.query(".hidden-note")
        if notes:
            notes.first(Static).update(text)
        else:
            self.mount(Static(text, classes="hidden-note"), before=0)
