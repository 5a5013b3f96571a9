"""The messages the engine thread posts to the app (tui/bridge.py posts them, with
post_message: thread-safe, never waited for; the app's features, tui/features/, fold them).

Kept apart from the thread that posts them so a widget or test that reads a message does not
import the thread and its queue. A run's messages carry `seq`, their place in the run, set by
the bridge as it posts (tui/ordering.py releases them in that order).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from textual.message import Message

from core.events import RoundEvent, RunSummary
from core.settings import Settings
from tui.engine_info import CurveInfo, PairInfo


class ModelsLoading(Message):
    """The thread started loading a pair: show the loading indicator."""

    def __init__(self, target: str, draft: str | None) -> None:
        super().__init__()
        self.target, self.draft = target, draft


class ModelsLoaded(Message):
    """A pair is ready; `decode` turns ids into text and is safe to call from the UI thread."""

    def __init__(self, info: PairInfo, decode: Callable[[Sequence[int]], str]) -> None:
        super().__init__()
        self.info, self.decode = info, decode


class RunStarted(Message):
    """Run `run_id` sent these prompt ids; `spans` and `roles` place each chat message in them
    (empty when they could not be worked out), so a copy's source can be named."""

    def __init__(self, run_id: int, prompt_ids: list[int], spans: list[tuple[int, int]],
                 roles: list[str]) -> None:
        super().__init__()
        self.seq = -1  # its place in its run, set by the engine thread as it posts
        self.run_id, self.prompt_ids, self.spans, self.roles = run_id, prompt_ids, spans, roles


class ContextTrimmed(Message):
    """Run `run_id` dropped its `dropped` oldest messages to fit a `window`-token context;
    `kept` is the conversation the engine now sees."""

    def __init__(self, run_id: int, kept: list[dict[str, str]], dropped: int, window: int) -> None:
        super().__init__()
        self.seq = -1  # its place in its run, set by the engine thread as it posts
        self.run_id, self.kept, self.dropped, self.window = run_id, kept, dropped, window


class RoundCommitted(Message):
    """One round of run `run_id` finished, run with `settings` (a key pressed since applies to
    later rounds: the app may fold this one after the change, and labels it by these)."""

    def __init__(self, run_id: int, event: RoundEvent, settings: Settings) -> None:
        super().__init__()
        self.seq = -1  # its place in its run, set by the engine thread as it posts
        self.run_id, self.event, self.settings = run_id, event, settings


class Prefilling(Message):
    """Run `run_id` handed its prompt to the engine: until its first round the turn waits on
    the prefill of its `tokens` the cache does not hold (80 s for a long prompt on a CPU;
    `cached`: those an earlier turn left in the cache), and the status says so."""

    def __init__(self, run_id: int, tokens: int, cached: int = 0, warming: bool = False) -> None:
        super().__init__()
        self.seq = -1  # its place in its run, set by the engine thread as it posts
        self.run_id, self.tokens, self.cached = run_id, tokens, cached
        self.warming = warming  # first the kernels of the turn's first rounds, then the prefill


class RunFinished(Message):
    """Run `run_id` ended (summary None when the engine stopped without one).

    `waited_s` is the time from Enter to the engine's start (the queue, fitting the context,
    a first-use calibration): the engine's TTFT and E2E start later, so the message adds it,
    and names `calibration_s` on a line of its own (a first turn's 4.5 minutes were hidden).
    `first_settings` are the settings the run's first round read, and `settings_changes`
    (round, changed fields) every later round that read others: a key pressed mid-turn
    applies from the next round, so the settings at the end are not what produced the run."""

    def __init__(
        self,
        run_id: int,
        summary: RunSummary | None,
        prompt_ids: list[int],
        waited_s: float = 0.0,
        calibration_s: float | None = None,
        first_settings: Settings | None = None,
        settings_changes: tuple[tuple[int, dict[str, Any]], ...] = (),
    ) -> None:
        super().__init__()
        self.seq = -1  # its place in its run, set by the engine thread as it posts
        self.run_id, self.summary, self.prompt_ids = run_id, summary, prompt_ids
        self.waited_s, self.calibration_s = waited_s, calibration_s
        self.first_settings, self.settings_changes = first_settings, settings_changes


class EngineFailed(Message):
    """A command raised; the thread keeps serving the next one."""

    def __init__(self, task: str, error: str, run_id: int | None = None) -> None:
        super().__init__()
        self.seq = -1  # its place in its run, set by the engine thread as it posts
        self.task, self.error, self.run_id = task, error, run_id


class EngineNotice(Message):
    """Something core warned about while serving a command (a damaged cached model fetched
    again): worth a sentence to the user, not a failure."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class KernelsCompiling(Message):
    """A first use is compiling GPU kernels (core.runtime.compile_watch.CompileNotice: kind "started",
    "progress" or "done", its text and elapsed seconds): the status line says so until done."""

    def __init__(self, notice: Any) -> None:
        super().__init__()
        self.notice = notice


class IdleWarmup(Message):
    """The engine thread warmed one more size while idle (core.runtime.warmer.IdleProgress:
    done, total, the last size): the status line says so until all are done."""

    def __init__(self, progress: Any) -> None:
        super().__init__()
        self.progress = progress


class Calibrated(Message):
    """A verify-cost curve was measured."""

    def __init__(self, curve: CurveInfo) -> None:
        super().__init__()
        self.curve = curve


class CalibrationStopped(Message):
    """A calibration was cancelled (Esc) before it measured all; `run_id` is the chat turn it
    ran before (first use), which then ends without generating."""

    def __init__(self, run_id: int | None) -> None:
        super().__init__()
        self.run_id = run_id


class CalibrationProgress(Message):
    """Calibration progress in [0, 1] with what it is measuring."""

    def __init__(self, fraction: float, label: str) -> None:
        super().__init__()
        self.fraction, self.label = fraction, label


class BenchProgress(Message):
    """Benchmark progress in [0, 1] with what it is doing."""

    def __init__(self, fraction: float, label: str) -> None:
        super().__init__()
        self.fraction, self.label = fraction, label


class BenchFinished(Message):
    """The benchmark protocol ended (report None when cancelled or failed)."""

    def __init__(self, report: Any) -> None:
        super().__init__()
        self.report = report
