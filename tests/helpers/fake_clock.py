"""A fake clock for the guard's law and a drafter whose cost is what the test says.

Shared by tests/core/cost/test_guard.py and tests/core/cost/test_guard_memory.py: the clock
moves only when a timed forward or the oracle says so, never with the machine's load.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from core.drafting.base import DraftRequest, Offer, Proposal


class FakeClock:
    """The engine's clock: time moves only when a forward or a drafter says it costs."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def timed(model: Any, clock: FakeClock, step_s: float) -> Any:
    """`model` whose every forward advances the clock by one target step (a flat curve: a
    host-bound GPU verifies 1-16 rows at about one step's cost)."""
    base = type(model)

    class Timed(base):  # type: ignore[misc, valid-type]
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            clock.t += step_s
            return super().__call__(*args, **kwargs)

    model.__class__ = Timed
    return model


class OracleDrafter:
    """Proposes the target's own greedy continuation (every draft accepted, so the policy
    keeps wanting long proposals), at `cost_s` of host time per proposal: a source whose
    rounds the curve cannot price."""

    copies = False

    def __init__(self, name: str, text: Sequence[int], clock: FakeClock, cost_s: float) -> None:
        self.name, self.text, self.clock, self.cost_s = name, list(text), clock, cost_s
        self.proposals = 0

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        return [Offer(self.name)]

    def catch_up(self, seq: Sequence[int], chunk: int, cancel: object = None) -> int:
        return 0

    def propose(self, request: DraftRequest) -> Proposal:
        self.clock.t += self.cost_s
        self.proposals += 1
        n = len(request.seq)
        ids = self.text[n : n + request.k]
        return Proposal(mx.array(ids, dtype=mx.uint32), None, self.name)

    def learn(self, proposed: Sequence[int], accepted: int) -> None:
        pass

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        pass

    def price(self, curve: Any) -> Callable[[int], float]:
        return lambda k: 0.0

    def state(self) -> dict[str, Any]:
        return {}
