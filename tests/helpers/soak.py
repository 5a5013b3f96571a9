"""The soak driver: many chat turns with random keys between them, checked after every turn.

Shared by tests/tui/test_soak.py (the scripted engine, 200 turns in CI) and
docs/benchmarks/soak.py (the real default model, for minutes). Between turns it presses what
a user would (TV, k, mode, rule, policy, rejected on/off, a profile switch through the picker)
and sometimes cancels a turn mid-round; after every turn it checks that the app answered,
that the settings it shows are the ones the engine ran with, that nothing failed unseen, and
it samples memory so a leak shows as growth that does not stop.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import random
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from textual.widgets import DataTable, Static

from core.settings import Settings
from tui.app import KEYS
from tui.screens.profile_picker import ProfilePickerScreen
from tui.widgets.assistant_message import AssistantMessage
from tui.widgets.composer import Composer

# Actions a user presses between turns (their bare keys are looked up in tui.app.KEYS).
SOAK_ACTIONS = ("tv_step(-0.05)", "tv_step(0.05)", "tv_step(-0.25)", "tv_step(0.25)",
                "tv_set(0.0)", "tv_set(1.0)", "k_step(-1)", "k_step(1)", "cycle_mode",
                "cycle_rule", "cycle_policy", "toggle_rejected")
BARE = {k.action: k.bare.split(",")[0] for k in KEYS if k.action in SOAK_ACTIONS}
TYPING = {k.action: k.typing for k in KEYS if k.action in SOAK_ACTIONS and k.typing}
PROMPTS = ("Write a scene.", "And then?", "Say it in one line.", "Why?", "List three things.",
           "Go on.", "Shorter, please.", "What happened next?")


@dataclass
class Sample:
    """Memory after a turn: Python's allocated blocks, live objects, MLX's active bytes, and
    how many entries Textual's and Rich's memo caches held (emptied before counting)."""

    turn: int
    blocks: int
    objects: int
    widgets: int
    mlx_active: int | None
    memo_entries: int = 0


@dataclass
class SoakReport:
    turns: int = 0
    seconds: float = 0.0
    keys: int = 0
    cancels: int = 0
    switches: int = 0
    trims: int = 0
    samples: list[Sample] = field(default_factory=list)
    thread_errors: list[str] = field(default_factory=list)
    turn_seconds: list[float] = field(default_factory=list)

    def growth(self, first: int, last: int) -> tuple[float, float]:
        """(allocated blocks, live objects) gained per turn between two sampled turns."""
        a = next(s for s in self.samples if s.turn >= first)
        b = next(s for s in reversed(self.samples) if s.turn <= last)
        turns = max(b.turn - a.turn, 1)
        return (b.blocks - a.blocks) / turns, (b.objects - a.objects) / turns


def shown_settings(app: Any) -> dict[str, str]:
    """What the status line says about the settings (label -> value)."""
    text = str(app.query_one("#status", Static).render())
    return {k: v for k, v in re.findall(r"\b(mode|TV|k|policy|rule|max) (\S+)", text)}


def check_shown(app: Any, engine_settings: Settings | None) -> None:
    """The status line and the Profile panel show app.settings, which the engine ran with."""
    s = app.settings
    shown = shown_settings(app)
    assert shown.get("mode") == s.mode, (shown, s.mode)
    assert shown.get("TV") == f"{s.tv_budget:.2f}", (shown, s.tv_budget)
    assert shown.get("k") == str(s.k), (shown, s.k)
    assert shown.get("policy") == s.policy, (shown, s.policy)
    assert shown.get("max") == str(s.max_tokens), (shown, s.max_tokens)
    table = app.query_one("#settings-table", DataTable)
    cells = [str(c) for r in range(table.row_count) for c in table.get_row_at(r)]
    pairs = dict(zip(cells[0::2], cells[1::2], strict=False))
    for key, value in pairs.items():
        if key:
            assert value == str(getattr(s, key)), (key, value, getattr(s, key))
    if engine_settings is not None:
        assert engine_settings == s, (engine_settings, s)


def clear_memo_caches() -> int:
    """Empty Textual's and Rich's functools.lru_cache memos; returns the entries they held.

    They are module-level tables (Region.intersection, shrink, union, grow at 4096 entries
    each, rich's cached_cell_len at 4096, ...) bounded by their maxsize, keyed by values such
    as every Region the chat's scrolling layout ever produced. Over 200 turns they filled from
    12.5 thousand entries (turn 60) to 17.5 thousand (turn 200), about four live objects an
    entry, still short of their bounds: counted, that filling read as a leak after turn 100.
    Emptied before counting, the count is of what the app and its widgets hold; they refill
    from the next frame, which only costs the time of the misses."""
    entries = 0
    for obj in gc.get_objects():
        if isinstance(obj, functools._lru_cache_wrapper) and str(
            getattr(obj, "__module__", "")
        ).startswith(("textual.", "rich.")):
            entries += obj.cache_info().currsize
            obj.cache_clear()
    return entries


def sample(turn: int, app: Any, mlx: bool) -> Sample:
    memo = clear_memo_caches()
    gc.collect()
    active = None
    if mlx:
        import mlx.core as mx

        active = int(mx.get_active_memory())
    return Sample(turn, sys.getallocatedblocks(), len(gc.get_objects()),
                  len(list(app.query("*"))), active, memo)


async def _wait(pilot: Any, condition: Callable[[], bool], timeout: float) -> None:
    """Poll without pilot.pause: each of its calls forces a full screen refresh, which over
    200 turns of a growing chat cost more than the turns themselves."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"the app did not answer within {timeout:.0f} s")
        await asyncio.sleep(0.005)


def _last_answer(app: Any) -> AssistantMessage | None:
    answers = app.query(AssistantMessage)
    return answers.last() if answers else None


REFUSED = ("The engine is busy", "The models are not loaded", "No models are loaded")


async def _started(pilot: Any, before: Any, turn: int, timeout: float = 10.0) -> None:
    """Wait until the Enter just pressed started a turn (a new answer in the chat); fail at
    once when the app refused it (its warning says why), or after `timeout` seconds."""
    app = pilot.app

    def refused() -> list[str]:
        return [n.message for n in app._notifications if n.message.startswith(REFUSED)]

    deadline = time.monotonic() + timeout
    while _last_answer(app) is before:
        if refused() or time.monotonic() > deadline:
            raise AssertionError(
                f"enter did not start turn {turn}: busy={app.busy}, run_id={app.run_id}, "
                f"loaded={app.info is not None}, refused={refused()}, "
                f"notes={[n.message for n in app._notifications][-3:]}"
            )
        await asyncio.sleep(0.005)


async def _focus_input(pilot: Any) -> None:
    app = pilot.app
    if not app.query_one("#prompt", Composer).has_focus:
        await pilot.press("i")
    assert app.query_one("#prompt", Composer).has_focus


async def soak(
    pilot: Any,
    *,
    turns: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    profiles: tuple[str, ...] = (),
    engine_settings: Callable[[], Settings | None] = lambda: None,
    engine_rounds: Callable[[], int] = lambda: 0,
    cancel_every: int = 7,
    bare_share: float = 0.08,
    sample_every: int = 10,
    turn_timeout: float = 30.0,
    mlx: bool = False,
    on_turn: Callable[[int, SoakReport], None] | None = None,
    before_turn: Callable[[bool], None] | None = None,
) -> SoakReport:
    """Run turns until `turns` or `seconds` is reached; every check raises AssertionError.

    `engine_settings()` returns the settings the engine read in its last round (None when
    unknown); `engine_rounds()` how many rounds it has run in all, so a turn cancelled before
    its first round is not compared; `before_turn(cancel)` runs before each turn is sent.
    """
    app = pilot.app
    rng = random.Random(seed)
    report = SoakReport()
    errors: list[str] = []
    old_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:  # an engine thread that died silently
        errors.append(f"{args.exc_type.__name__}: {args.exc_value}")
        old_hook(args)

    threading.excepthook = hook
    start = time.monotonic()
    await _wait(pilot, lambda: app.info is not None, turn_timeout)
    threads = threading.active_count()
    try:
        turn = 0
        while (turns is None or turn < turns) and (
            seconds is None or time.monotonic() - start < seconds
        ):
            # keys a user presses between turns: mostly their while-typing forms, sometimes
            # the bare keys with the input box left (esc) and entered again (i)
            bare = rng.random() < bare_share
            if bare:
                await pilot.press("escape")
            for _ in range(rng.randrange(0, 3)):
                action = rng.choice(SOAK_ACTIONS)
                await pilot.press(BARE[action] if bare or action not in TYPING else TYPING[action])
                report.keys += 1
            if profiles and rng.random() < 0.1:
                await pilot.press("p" if bare else "alt+p")
                await _wait(pilot, lambda: isinstance(app.screen, ProfilePickerScreen), 5)
                for _ in range(rng.randrange(1, len(profiles) + 1)):
                    await pilot.press("down")
                await pilot.press("enter")
                await _wait(pilot, lambda: not isinstance(app.screen, ProfilePickerScreen), 5)
                report.switches += 1
            await _wait(pilot, lambda: app.info is not None, turn_timeout)  # a switch may reload
            await _focus_input(pilot)
            check_shown(app, None)

            # one chat turn, sometimes cancelled after its first round
            cancel = bool(cancel_every) and turn % cancel_every == cancel_every - 1
            if before_turn is not None:
                before_turn(cancel)
            rounds_before = engine_rounds()
            dropped_before = app.runs_state.dropped_messages
            t0 = time.monotonic()
            before = _last_answer(app)
            app.query_one("#prompt", Composer).value = rng.choice(PROMPTS)
            await pilot.press("enter")
            # press() returns once the queues it saw are drained, which Textual judges by the
            # process's CPU time against the clock: on a starved machine it returned while the
            # Input's Submitted was still bubbling up to the app (one hop a queue), and the turn
            # then started after this check, or was refused as busy by the next one.
            await _started(pilot, before, turn)
            if cancel:
                await _wait(pilot, lambda: app.runs_state.stats.rounds or app.run_id is None, turn_timeout)
                await pilot.press("escape")
                report.cancels += 1
            await _wait(pilot, lambda: app.run_id is None, turn_timeout)
            report.turn_seconds.append(time.monotonic() - t0)
            report.trims += app.runs_state.dropped_messages > dropped_before
            await _focus_input(pilot)

            # checks: answered, shows what ran, nothing failed unseen
            failed = [n.message for n in app._notifications if n.severity == "error"]
            assert not failed, failed
            assert not errors, errors
            assert app.bridge.alive, "the engine thread ended"
            assert threading.active_count() <= threads, "a thread was left behind"
            ran = engine_rounds() > rounds_before
            check_shown(app, engine_settings() if ran else None)
            turn += 1
            report.turns = turn
            if turn % sample_every == 0 or turn == 1:
                report.samples.append(sample(turn, app, mlx))
            if on_turn is not None:
                on_turn(turn, report)
    finally:
        threading.excepthook = old_hook
        report.seconds = time.monotonic() - start
        report.thread_errors = errors
    return report
