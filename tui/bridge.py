"""EngineBridge: the one long-lived thread that owns every MLX call (its messages: tui/messages.py).

MLX streams are per thread (textual-notes.md), so loading the pair, generating, calibrating
and benchmarking all run on this thread. The UI sends commands through a queue; the thread
answers with `post_message`, which never waits for the UI, so the decode loop never stalls
on a repaint. Cancelling sets a threading.Event that the engine checks once per round.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from textual.message import Message
from textual.message_pump import MessagePump

from core.events import RoundEvent, RunSummary
from core.settings import Settings
from tui.engine_info import CurveInfo, PairInfo
from tui.engine_log import core_warnings_to
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
    ModelsLoaded,
    ModelsLoading,
    Prefilling,
    RoundCommitted,
    RunFinished,
    RunStarted,
)
from tui.settings_watch import SettingsWatch


class EngineSession(Protocol):
    """Everything the thread does with a loaded pair; real in tui.session, scripted in tests
    (tests/helpers/app.py's FakeSession). The thread reads nothing of a session that is not
    declared here."""

    info: PairInfo
    # The tokens the pair can hold: a turn's oldest messages are dropped to fit it with
    # max_tokens (None: no window known, nothing is dropped).
    context_window: int | None

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]: ...

    def message_spans(self, messages: list[dict[str, str]]) -> list[tuple[int, int]]:
        """Per message, its [start, end) in prompt_ids(messages)."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def generate(
        self,
        prompt_ids: list[int],
        settings: Settings,
        cancel: threading.Event,
        settings_source: Callable[[], Settings],
    ) -> Iterable[RoundEvent | RunSummary]: ...

    def calibrate(
        self,
        settings: Settings,
        progress: Callable[[float, str], None],
        cancel: threading.Event,
    ) -> CurveInfo:
        """Measure the curve; raise core.dispatch.CalibrationCancelled once `cancel` is set."""
        ...

    def needs_curve(self, settings: Settings) -> bool: ...

    def kept_curve(self, settings: Settings) -> tuple[CurveInfo | None, tuple[str, ...]]:
        """The curve an earlier start kept for this pair, machine and settings (None: none
        matches), and a sentence for each kept file ignored (damaged, foreign)."""
        ...

    def warm_idle_next(self, settings: Settings) -> Any:
        """What the next `warm_idle` will warm (an IdleProgress with `running` set), said before
        it runs so the status line names it; None once nothing is left to warm."""
        ...

    def warm_idle(self, settings: Settings) -> Any:
        """One more size of the idle warm-up (core.runtime.warmer.IdleProgress), preferring
        what `settings`' next turn would use; None once nothing is left to warm."""
        ...

    def bench(
        self,
        prompt_ids: list[int],
        settings: Settings,
        progress: Callable[[float, str], None],
        cancel: threading.Event,
    ) -> Any: ...


# Called on the engine thread with (target_spec, draft_spec); must do all model loading there.
SessionFactory = Callable[[str, "str | None"], EngineSession]


# ---------------------------------------------------------------------------------------------


@dataclass
class _Command:
    kind: str  # "load" | "generate" | "calibrate" | "bench"
    args: dict[str, Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    run_id: int | None = None


_CANCELLABLE = ("generate", "bench", "calibrate")  # every long command the app starts
# A turn's prefill is fed in chunks of about this many seconds, so Esc and ctrl+q stop it
# within about that (core.primitives.cached_model.PacedCancel).
STOP_WITHIN_S = 1.0


def describe_error(exc: BaseException) -> str:
    """One sentence for the notification: a UserError's message, else the type and message."""
    from core.errors import UserError

    if isinstance(exc, UserError):
        return str(exc)
    text = str(exc).strip() or "no message"
    return f"{type(exc).__name__}: {text}"


class _RunPoster:
    """Posts one run's messages numbered 0, 1, 2, ...: RunFinished's number is how many came
    before it, so the app can hold it until each of them was handled (tui/ordering.py)."""

    def __init__(self, post: Callable[[Message], None]) -> None:
        self._post, self._seq = post, itertools.count()

    def __call__(self, message: Message) -> None:
        message.seq = next(self._seq)  # type: ignore[attr-defined]
        self._post(message)


class EngineBridge:
    """Owns the engine thread; every public method is called from the UI thread and returns at once."""

    def __init__(
        self,
        target: MessagePump,
        factory: SessionFactory,
        settings_source: Callable[[], Settings],
    ) -> None:
        self._target = target
        self._factory = factory
        self._settings_source = settings_source
        self._queue: queue.Queue[_Command | None] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="specdec-engine", daemon=True)
        self._run_ids = itertools.count(1)
        self._active: _Command | None = None
        self._session: EngineSession | None = None
        # Set once the thread took the close: no MLX call runs after it (an exit while a round
        # runs aborts MLX: "terminate called without an active exception", or a segfault),
        # so the process may end.
        self._stopped = threading.Event()
        self._idle_failed = False
        self._idle_paused_until = 0.0
        self.clock: Callable[[], float] = time.monotonic  # faked in tests: "from Enter"

    # -- UI side ------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def load(self, target: str, draft: str | None) -> None:
        """Load a pair (replacing the current one) on the engine thread."""
        self._queue.put(_Command("load", {"target": target, "draft": draft}))

    def generate(self, messages: list[dict[str, str]], settings: Settings) -> int:
        """Queue a chat turn; returns its run id. `messages` is the whole conversation."""
        from core.primitives.cached_model import PacedCancel  # no MLX call: an Event

        run_id = next(self._run_ids)
        self._queue.put(
            _Command("generate", {"messages": [dict(m) for m in messages], "settings": settings,
                                  "entered": self.clock()}, PacedCancel(STOP_WITHIN_S),
                     run_id=run_id)
        )
        return run_id

    def calibrate(self, settings: Settings) -> None:
        self._queue.put(_Command("calibrate", {"settings": settings}))

    def bench(self, messages: list[dict[str, str]], settings: Settings) -> None:
        self._queue.put(_Command("bench", {"messages": [dict(m) for m in messages],
                                           "settings": settings}))

    def cancel(self) -> bool:
        """Ask the running command to stop at the end of its round (a calibration: after the
        forward under way); False if none is running."""
        active = self._active
        pending = False
        with self._queue.mutex:
            for cmd in self._queue.queue:
                if cmd is not None and cmd.kind in _CANCELLABLE:
                    cmd.cancel.set()
                    pending = True
        if active is not None and active.kind in _CANCELLABLE:
            active.cancel.set()
            return True
        return pending

    def request_close(self) -> None:
        """Stop after the current round: commands not yet started are dropped, the running
        one is cancelled, and the thread stops (parks) before any other MLX call. Returns at
        once; `stopped` says when it is safe to exit."""
        if not self._thread.is_alive():
            self._stopped.set()
            return
        with self._queue.mutex:
            self._queue.queue.clear()
        self.cancel()
        self._queue.put(None)

    @property
    def stopped(self) -> bool:
        """True once no MLX work runs on the engine thread, nor will (or it never started)."""
        return self._stopped.is_set() or not self._thread.is_alive()

    @property
    def busy_with(self) -> str | None:
        """The kind of command running now ("generate", "load", ...), or None."""
        active = self._active
        return None if active is None else active.kind

    def close(self, timeout: float = 30.0) -> bool:
        """Stop the thread after the current round and wait for it (up to `timeout` s; a
        round or a calibration forward ends well within it). True when it stopped: the
        thread is a daemon, so exit never hangs on it, but an exit mid-round crashed MLX."""
        self.request_close()
        return self._stopped.wait(timeout) or not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- engine thread ------------------------------------------------------------------------

    def _post(self, message: Message) -> None:
        self._target.post_message(message)

    def _next_command(self) -> _Command | None:
        """The next command; while none is queued, the session's idle warm-up runs one size
        at a time, so a command that arrives waits at most for the size in flight."""
        while True:
            try:
                return self._queue.get_nowait()
            except queue.Empty:
                pass
            paused = self._idle_paused_until - time.monotonic()
            if paused > 0:  # the user is typing: the UI gets the CPU, the warm-up waits
                try:
                    return self._queue.get(timeout=paused)
                except queue.Empty:
                    continue
            if not self._warm_idle_once():
                return self._queue.get()

    def pause_idle(self, seconds: float) -> None:
        """No idle warm-up size starts for `seconds` (the composer calls it per keystroke;
        the size in flight ends first)."""
        self._idle_paused_until = time.monotonic() + seconds

    def _warm_idle_once(self) -> bool:
        """One size of the session's idle warm-up (False: nothing left, or it cannot)."""
        session = self._session
        if session is None or self._idle_failed:
            return False
        try:
            with core_warnings_to(self._post):
                settings = self._settings_source()
                coming = session.warm_idle_next(settings)
                if coming is not None:  # the status says what runs while it runs
                    self._post(IdleWarmup(coming))
                progress = session.warm_idle(settings)
        except Exception as exc:  # never worth stopping the thread for: compiles happen later
            self._idle_failed = True
            self._post(EngineNotice("Warming GPU kernels in the background stopped: "
                                    f"{describe_error(exc)}"))
            return False
        if progress is None:
            return False
        self._post(IdleWarmup(progress))
        return True

    def _serve(self) -> None:
        while True:
            cmd = self._next_command()
            if cmd is None:
                self._stopped.set()
                if getattr(self._factory, "park_thread_on_close", False):
                    # MLX aborts the process at exit ("terminate called without an active
                    # exception") once a thread that ran its compiled samplers has ended
                    # (cf. ml-explore/mlx#3126), so the engine thread parks instead: it is a
                    # daemon, and the process exits around it.
                    threading.Event().wait()
                return
            self._active = cmd
            try:
                with core_warnings_to(self._post):  # a load, a calibration, a bench may warn
                    getattr(self, f"_do_{cmd.kind}")(cmd)
            except Exception as exc:  # every failure becomes a notification; the thread lives on
                self._post(EngineFailed(cmd.kind, describe_error(exc), cmd.run_id))
                if cmd.kind == "bench":
                    self._post(BenchFinished(None))
            finally:
                self._active = None

    def _need_session(self) -> EngineSession:
        if self._session is None:
            from core.errors import UserError

            raise UserError("No models are loaded; fix the model paths and restart.")
        return self._session

    def _do_load(self, cmd: _Command) -> None:
        self._post(ModelsLoading(cmd.args["target"], cmd.args["draft"]))
        self._session = None
        session = self._factory(cmd.args["target"], cmd.args["draft"])
        self._session = session
        self._idle_failed = False
        self._post(ModelsLoaded(session.info, session.decode))

    def _do_generate(self, cmd: _Command) -> None:
        assert cmd.run_id is not None
        post = _RunPoster(self._post)  # numbers the run's messages: the app replays them in order
        try:
            session = self._need_session()
            prompt_ids = self._fit(session, cmd, post)  # a ContextError ends the turn: a sentence
        except Exception as exc:
            post(EngineFailed("generate", describe_error(exc), cmd.run_id))
            post(RunFinished(cmd.run_id, None, []))
            return
        messages = cmd.args["messages"]
        try:
            spans = [(int(a), int(b)) for a, b in session.message_spans(messages)]
        except Exception:  # a template that renders oddly: copies go unnamed, the run goes on
            spans = []
        post(RunStarted(cmd.run_id, list(prompt_ids), spans,
                              [m["role"] for m in messages]))
        summary: RunSummary | None = None
        watch = SettingsWatch(self._settings_source)
        entered = cmd.args.get("entered", self.clock())
        calibration_s: float | None = None
        started = entered
        try:
            settings = cmd.args["settings"]
            # The run would calibrate silently before its first token (~30 s on a CPU): reuse
            # the curve kept for this pair and machine, else measure it here, where the
            # Kernels panel shows the progress and then the curve.
            if session.needs_curve(settings) and not self._kept_curve(session, settings):
                began = self.clock()
                calibrated = self._calibrate(session, settings, cmd, "first use, ")
                calibration_s = self.clock() - began
                if not calibrated:
                    post(RunFinished(cmd.run_id, None, prompt_ids,  # Esc: no tokens
                                     self.clock() - entered, calibration_s))
                    return
            held = getattr(session, "cached_tokens", None)  # a turn prefills only the rest
            cached = held(prompt_ids, settings) if held is not None else 0
            # The session warms what the first rounds use when generate is called (seconds
            # on a busy CPU the first time), then the prefill runs: the status says each.
            post(Prefilling(cmd.run_id, len(prompt_ids) - cached, cached, warming=True))
            started = self.clock()
            items = session.generate(prompt_ids, cmd.args["settings"], cmd.cancel, watch)
            post(Prefilling(cmd.run_id, len(prompt_ids) - cached, cached))
            for item in items:
                if isinstance(item, RunSummary):
                    summary = item
                else:
                    watch.rounds += 1
                    post(RoundCommitted(cmd.run_id, item, watch.current or settings))
        except Exception as exc:
            # The failure first, so the message it belongs to can show it; then the end of
            # the run, so the UI always leaves "generating".
            post(EngineFailed("generate", describe_error(exc), cmd.run_id))
        post(RunFinished(cmd.run_id, summary, prompt_ids, max(started - entered, 0.0),
                         calibration_s, watch.first or cmd.args["settings"], watch.changes))

    def _fit(self, session: EngineSession, cmd: _Command,
             post: Callable[[Message], None]) -> list[int]:
        """The turn's prompt ids, the oldest messages dropped when the conversation plus
        max_tokens would outgrow the model's context window (ContextTrimmed tells the app)."""
        messages = cmd.args["messages"]
        window = session.context_window
        if not window:
            return session.prompt_ids(messages)
        from core.models.context import fit_conversation

        kept, ids, dropped = fit_conversation(
            messages, session.prompt_ids, window, cmd.args["settings"].max_tokens,
            model=session.info.target_name,
        )
        if dropped:
            cmd.args["messages"] = kept
            post(ContextTrimmed(cmd.run_id, kept, dropped, window))
        return ids

    def _kept_curve(self, session: EngineSession, settings: Settings) -> bool:
        """The curve kept from an earlier start (core.dispatch.curve_cache), when the session
        has one for this pair, machine and settings: posted as Calibrated, and True."""
        curve, notices = session.kept_curve(settings)
        for text in notices:  # a damaged or foreign file, ignored: measured again
            self._post(EngineNotice(text))
        if curve is None:
            return False
        self._post(Calibrated(curve))
        return True

    def _do_calibrate(self, cmd: _Command) -> None:
        self._calibrate(self._need_session(), cmd.args["settings"], cmd)

    def _calibrate(self, session: EngineSession, settings: Settings, cmd: _Command,
                   prefix: str = "") -> bool:
        """Measure the curve; False (and CalibrationStopped posted) when Esc cancelled it."""
        from core.dispatch.curve import CalibrationCancelled

        def progress(fraction: float, label: str) -> None:
            self._post(CalibrationProgress(fraction, prefix + label))

        if cmd.cancel.is_set():  # cancelled while queued
            self._post(CalibrationStopped(cmd.run_id))
            return False
        # Said at once: its first step (a prefill of the calibration's context) took 30 s on
        # a busy CPU while the status line could only say "waiting for the engine".
        progress(0.0, "starting: the context's prefill")
        try:
            curve = session.calibrate(settings, progress, cmd.cancel)
        except CalibrationCancelled:
            self._post(CalibrationStopped(cmd.run_id))
            return False
        self._post(Calibrated(curve))
        return True

    def _do_bench(self, cmd: _Command) -> None:
        session = self._need_session()
        prompt_ids = session.prompt_ids(cmd.args["messages"])

        def progress(fraction: float, label: str) -> None:
            self._post(BenchProgress(fraction, label))

        report = session.bench(prompt_ids, cmd.args["settings"], progress, cmd.cancel)
        self._post(BenchFinished(report))
