"""The EngineBridge's messages (runs, loading, calibration, bench), mixed into SpecDecApp."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from tui.copies import PromptLayout, locate_copy
from tui.messages import (
    BenchFinished,
    BenchProgress,
    Calibrated,
    CalibrationProgress,
    CalibrationStopped,
    ContextTrimmed,
    EngineFailed,
    EngineNotice,
    IdleWarmup,
    KernelsCompiling,
    ModelsLoaded,
    ModelsLoading,
    Prefilling,
    RoundCommitted,
    RunFinished,
    RunStarted,
)
from tui.ordering import RunSequencer
from tui.records import RunRecord
from tui.widgets.chat import ChatView
from tui.widgets.kernels import KernelsPanel
from tui.widgets.profile_panel import ProfilePanel

MAX_RUNS = 100  # runs of this session kept for comparing (the soak test found the list grew)


class EngineEvents:
    """Folds each engine message into the app's state; rounds repaint once per batch.

    A run's messages pass through one RunSequencer first, so they are folded in the order the
    engine posted them whatever order Textual's queue hands them over in: a run is finished,
    recorded and compared only after every one of its rounds was counted."""

    sequencer: RunSequencer

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

    def _in_order(self, message: RunStarted | ContextTrimmed | RoundCommitted | RunFinished
                  | EngineFailed | Prefilling) -> None:
        for ready in self.sequencer.push(message, ends_run=isinstance(message, RunFinished)):
            if isinstance(ready, RunStarted):
                self._run_started(ready)
            elif isinstance(ready, ContextTrimmed):
                self._context_trimmed(ready)
            elif isinstance(ready, RoundCommitted):
                self._round_committed(ready)
            elif isinstance(ready, RunFinished):
                self._run_finished(ready)
            elif isinstance(ready, EngineFailed):
                self._engine_failed(ready)
            elif isinstance(ready, Prefilling):
                self._prefilling(ready)

    def _prefilling(self, message: Prefilling) -> None:
        """The turn now waits on its prefill: the status line says so, with the time."""
        if message.run_id == self.run_id and not self.stats.rounds:
            self.waiting = (f"prefilling {message.tokens:,} prompt tokens", time.monotonic())
            self._show_settings()

    def _run_started(self, message: RunStarted) -> None:
        if message.run_id == self.run_id:
            self.layout = PromptLayout(tuple(message.prompt_ids), tuple(message.spans),
                                       tuple(message.roles))

    def _context_trimmed(self, message: ContextTrimmed) -> None:
        """The conversation outgrew the context: keep what the engine now sees, and say so."""
        if message.run_id != self.run_id:
            return
        self.messages = [dict(m) for m in message.kept]
        self.dropped_messages += message.dropped
        chat = self.query_one(ChatView)
        # One note, moved to the latest turn with the running count: once a chat is past
        # its window every turn drops more, and a note a turn buried the conversation.
        for old in chat.query(".context-note"):
            old.remove()
        note = Static(Text(
            f"The conversation outgrew the model's {message.window:,}-token context: so far its "
            f"{self.dropped_messages} oldest messages were dropped, and the model no longer "
            "sees them.", "italic yellow"), classes="context-note")  # fmt: skip
        if self.current is not None and self.current.parent is chat:
            chat.add(note, before=self.current)
        else:
            chat.add(note)

    def _round_committed(self, message: RoundCommitted) -> None:
        if message.run_id != self.run_id or self.current is None:
            return
        ev = message.event
        self.waiting = None  # the first round: the wait for it is over
        # The engine reads the same live settings once per round; a plain target step of
        # speculative mode counts against each source's hit rate, a target-only round does not.
        live = self._live_settings
        speculative = bool(ev.source) or (
            live.mode == "speculative"  # the lookup needs no draft model to speculate
            and (self.info is None or self.info.speculation_ok or live.draft_source == "lookup")
        )
        self.stats.add(ev, speculative)
        self.sources.observe(ev, speculative)
        self.current.transcript.add_round(ev)
        if self.sources.last_copy is ev and ev.copied_from is not None:
            kept = sum(t.origin == "copied" for t in ev.tokens)
            self.last_copy = locate_copy(ev.copied_from, kept, self.layout,
                                         self.current.transcript.ids, self.decode)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            self.call_later(self._repaint)

    def _repaint(self) -> None:
        """One repaint for all rounds queued since the last one."""
        self._flush_pending = False
        self.flushes += 1
        if self.current is not None:
            self.current.refresh_view(self.show_rejected, self.stats)
        self._refresh_panels()
        self._show_settings()

    def _run_finished(self, message: RunFinished) -> None:
        if message.run_id != self.run_id:
            return
        assistant = self.current
        self.run_id = None
        self.current = None
        self.waiting = None
        summary = message.summary
        if assistant is not None:
            assistant.waited_s = message.waited_s
            assistant.calibration_s = message.calibration_s
            assistant.summary = summary
            assistant.finished = True
            if assistant.text or summary is not None:
                self.messages.append({"role": "assistant", "content": assistant.text})
            elif self.messages and self.messages[-1]["role"] == "user":
                self.messages.pop()  # nothing came back: the next turn must not follow it
        if summary is not None:
            self.stats.summary = summary
            self.fallback_reason = summary.fallback_reason
            self._show_banner()
            # what the first round ran with, and what later rounds changed: the settings now
            # (a key pressed mid-turn) did not produce the run (issue 32, row 16)
            run_settings = message.first_settings or self._live_settings
            prompt = self._last_prompt() or ""
            self.last_run = (list(self.stats.rounds), summary, run_settings, prompt,
                             message.settings_changes)  # fmt: skip
            self.run_count += 1
            label = f"run {self.run_count}"
            record = RunRecord(label, run_settings, summary,
                               assistant.text if assistant else "", summary.mean_tv)
            self.runs.append(record)
            del self.runs[:-MAX_RUNS]  # a long session keeps its latest runs, not every one
            previous = self.compare[1] if self.compare[1] is not None else self.compare[0]
            self.compare = (previous, record)
            self.query_one(ProfilePanel).show_compare(*self.compare)
        if assistant is not None:
            assistant.refresh_view(self.show_rejected, self.stats)
        self._refresh_panels()
        self._show_settings()

    def on_models_loading(self, message: ModelsLoading) -> None:
        self.models_loading = True
        self.info = None
        self.query_one(ChatView).loading = True
        self.sub_title = f"loading {message.target} ← {message.draft or 'no draft'}…"
        self._show_settings()

    def on_models_loaded(self, message: ModelsLoaded) -> None:
        self.models_loading = False
        self.info = message.info
        self.decode = message.decode
        self.query_one(ChatView).loading = False
        info = message.info
        draft = info.draft_name or "no draft"
        device = f" · {info.device}" if info.device else ""
        self.sub_title = f"{info.target_name} ← {draft} · {info.backend}{device}"
        self._show_banner()
        self._show_settings()
        for record in self.compare:
            if record is not None and not record.text:
                record.text = self._decode_ids(record.summary.token_ids)
        self.query_one(ProfilePanel).show_compare(*self.compare)
        self._refresh_panels(all_panels=True)

    def on_engine_notice(self, message: EngineNotice) -> None:
        self.notify(message.text, severity="warning", timeout=8)

    def on_kernels_compiling(self, message: KernelsCompiling) -> None:
        """A first use compiling GPU kernels: a notification when it starts and when it ends,
        the status line with its elapsed time in between."""
        notice = message.notice
        if notice.kind == "done":
            self.compiling = None
            self.notify(notice.text, timeout=8)
        else:
            self.compiling = notice.text
            if notice.kind == "started":
                self.notify(notice.text, severity="warning", timeout=8)
        self._show_settings()

    def on_idle_warmup(self, message: IdleWarmup) -> None:
        """The engine thread warmed one more size while idle: the status line says how far,
        and nothing once all are warm."""
        progress = message.progress
        self.idle_warming = None if progress.finished else progress.text()
        self._show_settings()

    def on_engine_failed(self, message: EngineFailed) -> None:
        if message.run_id is not None:
            self._in_order(message)  # a run's failure belongs before its finish
        else:
            self._engine_failed(message)

    def _engine_failed(self, message: EngineFailed) -> None:
        titles = {"load": "could not load models", "generate": "generation failed",
                  "calibrate": "calibration failed", "bench": "benchmark failed"}
        self.notify(message.error, title=titles.get(message.task, message.task),
                    severity="error", timeout=8)
        if message.task == "load":
            self.models_loading = False
            self.query_one(ChatView).loading = False
            self.sub_title = "no models loaded"
        elif message.task == "calibrate":
            self.calibrating = False
            self.calibration_label = None
        elif message.task == "generate" and self.current is not None \
                and message.run_id == self.run_id:
            self.current.error = message.error
        self._show_settings()

    def on_calibration_progress(self, message: CalibrationProgress) -> None:
        if self.calibration_label is None:
            self.calibration_since = time.monotonic()
        self.calibration_label = f"{message.fraction:.0%} {message.label}"
        self.query_one(KernelsPanel).show(self.info, self.stats, self.curve,
                                          self.calibration_label)
        self._show_settings()  # the status line carries the percentage (`c` showed none)

    def on_calibrated(self, message: Calibrated) -> None:
        self.calibrating = False
        self.calibration_label = None
        self.curve = message.curve
        kept = getattr(message.curve, "kept_at", None)
        self.notify(f"calibration kept from {kept} reused (c measures again)" if kept
                    else "calibration done: see the Kernels panel", timeout=2)  # fmt: skip
        self._show_settings()
        self._refresh_panels(all_panels=True)

    def on_calibration_stopped(self, message: CalibrationStopped) -> None:
        """Esc stopped a calibration: the curve stays as it was; a turn it ran before ends
        without generating (it once went on to its first round after the whole calibration)."""
        self.calibrating = False
        self.calibration_label = None
        if message.run_id is not None and message.run_id == self.run_id \
                and self.current is not None:
            self.current.note = "cancelled during the first-use calibration: nothing generated"
        self.notify("calibration cancelled: the curve is as it was", timeout=3)
        self._show_settings()
        self._refresh_panels(all_panels=True)

    def on_bench_progress(self, message: BenchProgress) -> None:
        self.query_one(ProfilePanel).show_bench(message.fraction, Text(message.label, "dim"))
        # The status line too: the panel's bar sat below the Profile tab's fold for 5 minutes.
        self.bench_label = f"{message.fraction:.0%} {message.label}"
        self._show_settings()

    def on_bench_finished(self, message: BenchFinished) -> None:
        self.benchmarking = False
        self.bench_label = None
        panel = self.query_one(ProfilePanel)
        if message.report is None:
            panel.show_bench(None, Text("benchmark stopped", "dim"))
        else:
            panel.show_bench(None, Text("done: protocol of core.bench on the last prompt", "dim"))
            panel.show_bench_results(list(message.report.results))
            if not message.report.results:
                panel.show_bench(None, Text(message.report.summary_text()))
            self.notify("benchmark done: see the Profile panel", timeout=3)
        self._show_settings()
