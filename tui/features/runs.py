"""A turn of the chat, as SpecDecApp's feature (tui/features/base.py): send a message, fold the
run's messages in the engine's order, repaint once per batch of rounds, record the finished
run; and esc, which cancels whatever the engine runs.

A run's messages pass through one RunSequencer first, so they are folded in the order the
engine posted them whatever order Textual's queue hands them over in: a run is finished,
recorded and compared only after every one of its rounds was counted.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.text import Text
from textual.widgets import Static

from core.events import RunSummary
from core.settings import Settings
from tui.copies import CopyOrigin, PromptLayout, locate_copy
from tui.features.base import Feature, RecordedRunShown, RunRecorded
from tui.messages import (
    CalibrationStopped,
    ContextTrimmed,
    EngineFailed,
    Prefilling,
    RoundCommitted,
    RunFinished,
    RunStarted,
)
from tui.ordering import RunSequencer
from tui.records import RunRecord
from tui.stats import RoundStats, SourceStats
from tui.status import RunStatus
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.chat import ChatView
from tui.widgets.composer import Composer
from tui.widgets.user_message import UserMessage

# The status's word for a turn waiting on its prefill; Esc's toast reads it to say what stops
PREFILLING = "prefilling"
STOPPING = "stopping after this chunk"  # the status once esc or ctrl+q stops a prefill

MAX_RUNS = 100  # runs of this session kept for comparing (the soak test found the list grew)

_FAILED = {"load": "could not load models", "generate": "generation failed",
           "calibrate": "calibration failed", "bench": "benchmark failed"}


@dataclass
class RunsState:
    """The conversation and this session's runs: what the running turn folds into."""

    messages: list[dict[str, str]] = field(default_factory=list)
    dropped_messages: int = 0  # the chat's oldest messages the model no longer sees
    stats: RoundStats = field(default_factory=RoundStats)  # the running (or last) run's
    sources: SourceStats = field(default_factory=SourceStats)  # per source, whole session
    layout: PromptLayout | None = None  # where the running turn's messages lie
    last_copy: CopyOrigin | None = None  # the session's last accepted copied run
    current: AssistantMessage | None = None  # the running turn's message
    # rounds, summary, the first round's settings, prompt, (round, changed fields) after it
    last_run: tuple[list, RunSummary, Settings, str, tuple] | None = None
    last_run_at: str | None = None  # when it finished (UTC, ISO): a saved run's timestamp
    runs: list[RunRecord] = field(default_factory=list)  # the latest MAX_RUNS runs
    run_count: int = 0  # every run so far, for their labels
    flushes: int = 0  # repaints so far (one per batch of rounds)
    flush_pending: bool = False
    sequencer: RunSequencer = field(default_factory=RunSequencer)

    def last_prompt(self) -> str | None:
        """The conversation's last user message (what `b` benchmarks), or None."""
        for m in reversed(self.messages):
            if m["role"] == "user":
                return m["content"]
        return None


class RunsFeature(Feature):
    """The chat's turns: send, fold, repaint, record; esc cancels."""

    runs_state: RunsState
    live_settings: Settings

    @property
    def run_id(self) -> int | None:
        """The running turn's id, None between turns."""
        return self.status.run.run_id

    @property
    def busy(self) -> bool:
        return self.status.busy

    def _run(self, **changes: Any) -> None:
        self.set_status(run=dataclasses.replace(self.status.run, **changes))

    def send_prompt(self, composer: Composer, value: str) -> None:
        """Enter in the message box: the turn starts, unless nothing is loaded or busy."""
        text = value.strip()
        if not text:
            return
        if self.info is None:
            self.notify("The models are not loaded yet." if self.status.models.loading else
                        "No models are loaded; see the error above.", severity="warning")
            return
        if self.busy:
            self.notify("The engine is busy; esc cancels the running generation.",
                        severity="warning")
            return
        state = self.runs_state
        composer.clear()
        state.messages.append({"role": "user", "content": text})
        chat = self.query_one(ChatView)
        assistant = AssistantMessage(self.models_state.decode, self.info.eos_ids,
                                     self.info.target_name)
        chat.add(UserMessage(text), assistant)
        state.current = assistant
        state.stats = RoundStats()
        started = time.monotonic()
        run_id = self.bridge.generate(state.messages, self.settings)
        self._run(run_id=run_id, rounds=0, waiting=("waiting for the engine", started),
                  turn_started=started)
        self.call_after_refresh(assistant.refresh_view, self.show_rejected, state.stats)
        chat.anchor()

    def on_recorded_run_shown(self, message: RecordedRunShown) -> None:
        """A recorded run's rounds in the panels (a profile's), unless a turn is running."""
        if self.run_id is None:
            self.runs_state.stats = RoundStats.from_rounds(message.run.rounds,
                                                           message.run.summary)

    def on_calibration_stopped(self, message: CalibrationStopped) -> None:
        """Esc stopped the first-use calibration of the running turn: the turn ends without
        generating, and its message says why (tui/features/calibration.py keeps the curve)."""
        current = self.runs_state.current
        if message.run_id is not None and message.run_id == self.run_id \
                and current is not None:
            current.note = "cancelled during the first-use calibration: nothing generated"

    def action_cancel(self) -> None:
        """esc: cancel the run, bench or calibration under way; else leave the message box."""
        status = self.status
        if status.busy:
            if self.bridge.cancel():
                # A calibration's forward cannot be cut short: say so, not nothing.
                measuring = status.calibration.running or (status.run.run_id is not None
                                                           and status.calibration.label
                                                           is not None)
                prefilling = self.stopping_prefill()
                self.notify("cancelling the calibration: it stops after the forward under way"
                            if measuring else "cancelling: the prefill stops after its chunk "
                            "under way" if prefilling else "cancelling after this round",
                            timeout=3)
            return
        prompt = self.query_one("#prompt", Composer)
        if prompt.has_focus:
            self.query_one(ChatView).focus()

    def stopping_prefill(self) -> bool:
        """After esc or ctrl+q: a turn waiting on its prefill says "stopping after this chunk"
        with the seconds since (its chunks take about a second: tui/bridge.py STOP_WITHIN_S);
        False when no prefill is under way."""
        waiting = self.status.run.waiting
        if waiting is None or not waiting[0].startswith(PREFILLING):
            return False
        self._run(waiting=(STOPPING, time.monotonic()))
        return True

    # -- the run's messages, in the engine's order -----------------------------------------

    def on_run_started(self, message: RunStarted) -> None:
        self._in_order(message)

    def on_context_trimmed(self, message: ContextTrimmed) -> None:
        self._in_order(message)

    def on_round_committed(self, message: RoundCommitted) -> None:
        self._in_order(message)

    def on_prefilling(self, message: Prefilling) -> None:
        self._in_order(message)

    def on_run_finished(self, message: RunFinished) -> None:
        self._in_order(message)

    def on_engine_failed(self, message: EngineFailed) -> None:
        if message.run_id is not None:
            self._in_order(message)  # a run's failure belongs before its finish
        else:
            self._engine_failed(message)

    def _in_order(self, message: RunStarted | ContextTrimmed | RoundCommitted | RunFinished
                  | EngineFailed | Prefilling) -> None:
        state = self.runs_state
        # each kind of message to its handler, released in the engine's order
        handlers: dict[type, Any] = {
            RunStarted: self._run_started, ContextTrimmed: self._context_trimmed,
            RoundCommitted: self._round_committed, RunFinished: self._run_finished,
            EngineFailed: self._engine_failed, Prefilling: self._prefilling,
        }
        for ready in state.sequencer.push(message, ends_run=isinstance(message, RunFinished)):
            handlers[type(ready)](ready)

    def _prefilling(self, message: Prefilling) -> None:
        """The turn now waits on its prefill: the status line says so, with the time."""
        if message.run_id != self.run_id or self.runs_state.stats.rounds:
            return
        if message.warming:  # a first use of these sizes: seconds on a busy CPU
            self._run(waiting=("warming the kernels of this turn's first rounds",
                               time.monotonic()))
            return
        held = f" ({message.cached:,} cached)" if message.cached else ""
        self._run(waiting=(f"{PREFILLING} {message.tokens:,} new prompt tokens{held}"
                           if held else f"{PREFILLING} {message.tokens:,} prompt tokens",
                           time.monotonic()))

    def _run_started(self, message: RunStarted) -> None:
        if message.run_id == self.run_id:
            self.runs_state.layout = PromptLayout(tuple(message.prompt_ids),
                                                  tuple(message.spans), tuple(message.roles))

    def _context_trimmed(self, message: ContextTrimmed) -> None:
        """The conversation outgrew the context: keep what the engine now sees, and say so."""
        if message.run_id != self.run_id:
            return
        state = self.runs_state
        state.messages = [dict(m) for m in message.kept]
        state.dropped_messages += message.dropped
        chat = self.query_one(ChatView)
        # One note, moved to the latest turn with the running count: once a chat is past
        # its window every turn drops more, and a note a turn buried the conversation.
        for old in chat.query(".context-note"):
            old.remove()
        note = Static(Text(
            f"The conversation outgrew the model's {message.window:,}-token context: so far its "
            f"{state.dropped_messages} oldest messages were dropped, and the model no longer "
            "sees them.", "italic yellow"), classes="context-note")
        if state.current is not None and state.current.parent is chat:
            chat.add(note, before=state.current)
        else:
            chat.add(note)

    def _round_committed(self, message: RoundCommitted) -> None:
        state = self.runs_state
        if message.run_id != self.run_id or state.current is None:
            return
        ev = message.event
        # A plain target step of speculative mode counts against each source's hit rate, a
        # target-only round does not: by the settings the round ran with, not the ones now
        # (a key pressed since applies to later rounds).
        ran = message.settings
        speculative = bool(ev.source) or (
            ran.mode == "speculative"  # the lookup needs no draft model to speculate
            and (self.info is None or self.info.speculation_ok or ran.draft_source in ("lookup", "tree"))
        )
        state.stats.add(ev, speculative)
        state.sources.observe(ev, speculative)
        state.current.transcript.add_round(ev)
        if state.sources.last_copy is ev and ev.copied_from is not None:
            kept = sum(t.origin == "copied" for t in ev.tokens)
            state.last_copy = locate_copy(ev.copied_from, kept, state.layout,
                                          state.current.transcript.ids,
                                          self.models_state.decode)
        if not state.flush_pending:
            state.flush_pending = True
            self.call_later(self._repaint)

    def _repaint(self) -> None:
        """One repaint for all rounds queued since the last one."""
        state = self.runs_state
        state.flush_pending = False
        state.flushes += 1
        if state.current is not None:
            state.current.refresh_view(self.show_rejected, state.stats)
        self.refresh_panels()
        # the rounds so far; after the first, the wait for it is over
        self._run(rounds=len(state.stats.rounds), waiting=None)

    def _run_finished(self, message: RunFinished) -> None:
        if message.run_id != self.run_id:
            return
        state = self.runs_state
        assistant = state.current
        state.current = None
        summary = message.summary
        fallback = self.status.run.fallback_reason if summary is None \
            else summary.fallback_reason
        self.set_status(run=RunStatus(fallback_reason=fallback))
        if assistant is not None:
            assistant.waited_s = message.waited_s
            assistant.calibration_s = message.calibration_s
            assistant.summary = summary
            assistant.finished = True
            if assistant.text or summary is not None:
                state.messages.append({"role": "assistant", "content": assistant.text})
            elif state.messages and state.messages[-1]["role"] == "user":
                state.messages.pop()  # nothing came back: the next turn must not follow it
        if summary is not None:
            state.stats.summary = summary
            # what the first round ran with, and what later rounds changed: the settings now
            # (a key pressed mid-turn) did not produce the run
            run_settings = message.first_settings or self.live_settings
            state.last_run = (list(state.stats.rounds), summary, run_settings,
                              state.last_prompt() or "", message.settings_changes)
            state.last_run_at = datetime.now(UTC).isoformat(timespec="seconds")
            state.run_count += 1
            record = RunRecord(f"run {state.run_count}", run_settings, summary,
                               assistant.text if assistant else "", summary.mean_tv)
            state.runs.append(record)
            del state.runs[:-MAX_RUNS]  # a long session keeps its latest runs, not every one
            self.post_message(RunRecorded(record))  # compare's B (tui/features/compare.py)
        if assistant is not None:
            assistant.refresh_view(self.show_rejected, state.stats)
        self.refresh_panels()

    def _engine_failed(self, message: EngineFailed) -> None:
        """Every failure is said here; a load's and a calibration's state is their features'
        (their own `on_engine_failed`), a run's failure shows on its message."""
        self.notify(message.error, title=_FAILED.get(message.task, message.task),
                    severity="error", timeout=8)
        if message.task == "generate" and self.runs_state.current is not None \
                and message.run_id == self.run_id:
            self.runs_state.current.error = message.error
