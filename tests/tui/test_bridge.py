"""tui/bridge.py: the engine thread warms the rest while idle, one size at a time, and yields
to a turn between sizes; a kept curve starts a cost-aware turn with no calibration (issue 31);
core's warnings while a pair loads reach the app (core_warnings_to), and only while it loads.

The bridge runs for real on its thread; the session is the scripted one of conftest with a
warm-up whose sizes take fake compile durations (a gate the test opens, and a short wait)."""

from __future__ import annotations

import logging
import threading
import time

from core.runtime.warmer import IdleProgress
from core.settings import Settings
from tests.helpers.app import FakeSession, Script, hold, ready, wait_for
from tests.helpers.app_shown import app_on
from tui.bridge import EngineBridge
from tui.engine_info import CurveInfo
from tui.messages import Calibrated, IdleWarmup, RunFinished

SIZES = 10


class _Target:
    """Stands in for the app: collects what the engine thread posts."""

    def __init__(self) -> None:
        self.messages: list[object] = []
        self.lock = threading.Lock()

    def post_message(self, message: object) -> bool:
        with self.lock:
            self.messages.append(message)
        return True

    def of(self, kind: type) -> list:
        with self.lock:
            return [m for m in self.messages if isinstance(m, kind)]


def _wait(condition, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the engine thread"
        time.sleep(0.01)


class WarmingSession(FakeSession):
    """A scripted session whose idle warm-up has SIZES sizes; the third one's compile lasts
    until the test opens `release` (so a turn is certain to arrive while it is in flight)."""

    started = threading.Event()
    release = threading.Event()

    def __init__(self, script: Script, target: str, draft: str | None) -> None:
        super().__init__(script, target, draft)
        self.done = 0

    def warm_idle(self, settings: Settings) -> IdleProgress | None:
        if self.done >= SIZES:
            return None
        self.done += 1
        self.script.calls.append(f"warm {self.done}")
        if self.done == 3:
            self.started.set()
            hold(self.release)
        else:
            time.sleep(0.005)  # a fake compile
        return IdleProgress(self.done, SIZES, f"size {self.done}", 0.005)


def _bridge(factory) -> tuple[EngineBridge, _Target]:  # noqa: ANN001
    target = _Target()
    bridge = EngineBridge(target, factory, lambda: Settings())  # type: ignore[arg-type]
    bridge.start()
    return bridge, target


def _cost_aware_turn(factory) -> _Target:  # noqa: ANN001
    """One cost-aware turn on a pair loaded through `factory`, to its end: what was posted."""
    bridge, target = _bridge(factory)
    try:
        bridge.load("default", "self:bits=4")
        bridge.generate([{"role": "user", "content": "hi"}], Settings(policy="cost-aware"))
        _wait(lambda: bool(target.of(RunFinished)))
    finally:
        bridge.close()
    return target


def test_the_idle_warmer_yields_to_a_turn_between_sizes():
    script = Script(rounds=2)
    WarmingSession.started.clear()
    WarmingSession.release.clear()
    bridge, target = _bridge(lambda t, d: WarmingSession(script, t, d))
    try:
        bridge.load("default", "self:bits=4")
        assert WarmingSession.started.wait(60)  # the third size is compiling
        bridge.generate([{"role": "user", "content": "hi"}], Settings())
        WarmingSession.release.set()  # the size in flight ends; nothing else may run first
        _wait(lambda: bool(target.of(RunFinished)) and f"warm {SIZES}" in script.calls)
    finally:
        bridge.close()
    calls = script.calls
    assert calls.index("generate") == calls.index("warm 3") + 1
    # then the rest, while idle again, and nothing once all are warm
    assert calls[calls.index("generate") + 1:] == [f"warm {i}" for i in range(4, SIZES + 1)]
    progress = [m.progress for m in target.of(IdleWarmup)]
    assert [p.done for p in progress] == list(range(1, SIZES + 1)) and progress[-1].finished


def test_a_failing_idle_warm_up_is_said_once_and_stops():
    from tui.messages import EngineNotice

    script = Script(rounds=1)

    class Failing(FakeSession):
        def warm_idle(self, settings: Settings) -> IdleProgress | None:
            self.script.calls.append("warm")
            raise RuntimeError("no memory for the kernel")

    bridge, target = _bridge(lambda t, d: Failing(script, t, d))
    try:
        bridge.load("default", None)
        _wait(lambda: bool(target.of(EngineNotice)))
        bridge.generate([{"role": "user", "content": "hi"}], Settings())
        _wait(lambda: bool(target.of(RunFinished)))
    finally:
        bridge.close()
    (notice,) = target.of(EngineNotice)
    assert notice.text.startswith("Warming GPU kernels in the background stopped: RuntimeError")
    assert script.calls.count("warm") == 1 and "generate" in script.calls


def test_a_kept_curve_starts_a_cost_aware_turn_without_calibrating():
    script = Script(rounds=2, needs_curve=True)
    kept = CurveInfo(t_verify={1: 0.01, 2: 0.011}, draft_step_s=0.001, kept_at="2026-11-30 18:02")

    class Keeping(FakeSession):
        def kept_curve(self, settings: Settings) -> tuple[CurveInfo | None, tuple[str, ...]]:
            self.script.calls.append("kept_curve")
            return kept, ()

    target = _cost_aware_turn(lambda t, d: Keeping(script, t, d))
    assert "calibrate" not in script.calls
    assert script.calls == ["kept_curve", "generate"]
    (cal,) = target.of(Calibrated)
    assert cal.curve is kept and cal.curve.kept_at == "2026-11-30 18:02"


def test_without_a_kept_curve_the_turn_calibrates_first():
    script = Script(rounds=1, needs_curve=True)

    class Missing(FakeSession):
        def kept_curve(self, settings: Settings) -> tuple[CurveInfo | None, tuple[str, ...]]:
            return None, ("The kept curve /x/curve.json is damaged (bad); it is ignored and "
                          "will be measured again.",)

    from tui.messages import EngineNotice

    target = _cost_aware_turn(lambda t, d: Missing(script, t, d))
    assert script.calls == ["calibrate", "generate"]
    assert "is damaged" in target.of(EngineNotice)[0].text


async def test_a_warning_while_loading_reaches_the_user(profiles) -> None:  # noqa: ANN001
    """Core warns through logging where it has no terminal of its own (a damaged cached
    default model fetched again): the app shows it, brackets and all, and stops listening
    once the load is over."""
    said = "The cached default model /x/[m].gguf is damaged (its sha256 is not the pinned one)"

    def factory(target: str, draft: str | None) -> FakeSession:
        logging.getLogger("core.models.fetch").warning(said)
        return FakeSession(Script(), target, draft)

    app = app_on(factory, profiles)
    async with app.run_test(size=(160, 45)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: any(n.message == said for n in app._notifications))
        assert [n.severity for n in app._notifications if n.message == said] == ["warning"]
        logging.getLogger("core.models.fetch").warning("after the load")
        await pilot.pause()
        assert not any(n.message == "after the load" for n in app._notifications)
        assert not any(type(h).__name__ == "_Forward" for h in logging.getLogger("core").handlers)


def test_the_status_says_which_idle_size_runs_while_it_runs_and_typing_pauses_it():
    """The app used a core for 90 s while the status said "ready": each size is announced
    before it runs, and a keystroke (pause_idle) starts no size for its seconds."""
    script = Script(rounds=1)

    class Announcing(FakeSession):
        done = 0

        def warm_idle_next(self, settings: Settings) -> IdleProgress | None:
            return None if self.done >= 3 else IdleProgress(self.done, 3, "next", 0.0, True)

        def warm_idle(self, settings: Settings) -> IdleProgress | None:
            if self.done >= 3:
                return None
            self.done += 1
            self.script.calls.append(f"warm {self.done}")
            return IdleProgress(self.done, 3, "size", 0.001)

    target = _Target()
    bridge = EngineBridge(target, lambda t, d: Announcing(script, t, d),  # type: ignore[arg-type]
                          lambda: Settings())
    bridge.pause_idle(0.5)  # typing as the models load
    bridge.start()
    try:
        bridge.load("default", None)
        began = time.monotonic()
        _wait(lambda: "warm 3" in script.calls)
        assert time.monotonic() - began >= 0.3  # nothing ran while paused
    finally:
        bridge.close()
    texts = [m.progress.text() for m in target.of(IdleWarmup)]
    assert texts[0] == "warming kernels while idle: 1/3 · stops when you type", texts
    assert texts[1] == "kernels warmed while idle: 1/3" and texts[-1].startswith("kernels warmed")
    assert len(texts) == 6
