"""A run as the engine makes it, in host arithmetic only, for the measured guard's tests
(tests/core/cost/test_guard.py, test_arm.py): each arm's rounds cost what the regime says."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from core.cost.guard import TARGET, RateGuard


def simulate(
    guard: RateGuard | None,
    n_tokens: int,
    step_s: float,
    break_s: float,
    arms: dict[str, tuple[float, Callable[[random.Random], int]]],
    offers: Callable[[int], Sequence[str]],
    seed: int = 0,
    stall: Callable[[int], float] | None = None,
) -> tuple[float, dict[str, int]]:
    """A run as the engine makes it: each round the first offered source the guard asks
    drafts (the policy always wants to: the worst case for the guard), else a plain target
    step; a target step right after a drafting round pays `break_s` more (no step was queued
    behind it). `arms[name] = (round seconds, tokens committed(rng))`. Returns the time and
    the rounds per arm. `stall(i)`: seconds the i-th round or step (from 0) pays on top, a
    kernel compiled at first use or a pause of the host (none by default)."""
    rng = random.Random(seed)
    produced, t, prev = 0, 0.0, None
    rounds: dict[str, int] = {}
    i = -1
    while produced < n_tokens:
        i += 1
        extra = stall(i) if stall is not None else 0.0
        name = None
        if guard is None or not guard.target_probe_due():
            offered = list(offers(produced))
            if guard is not None:  # as core.drafting.plan.plan_round orders them
                offered.sort(key=guard.rank)
            name = next((o for o in offered if guard is None or guard.asks(o)), None)
        if name is None:
            secs = step_s + (break_s if prev else 0.0) + extra
            if guard is not None:
                guard.observe_step(secs, after=prev)
            produced, prev, name = produced + 1, None, TARGET
        else:
            secs, tokens = arms[name][0] + extra, arms[name][1](rng)
            if guard is not None:
                guard.observe_round(name, tokens, secs)
            produced, prev = produced + tokens, name
        t += secs
        rounds[name] = rounds.get(name, 0) + 1
    return t, rounds
