"""An assistant turn in the chat: a Transcript's coloured text, re-rendered at most once per
flush of rounds, and the footer with its numbers (tokens, tok/s, TTFT and E2E from Enter)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from core.events import RunSummary
from tui.stats import RoundStats
from tui.transcript import Decode, Transcript


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
            # From Enter: the queue and a first-use calibration before the engine's own clock;
            # none without a token (a turn cancelled in its prefill: its E2E says how long)
            parts.append(f"TTFT {s.ttft_s + self.waited_s:.2f}s" if s.tokens else "TTFT -")
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
