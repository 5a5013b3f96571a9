"""A trivial draft source written the way a new one would be: one module and one register().

It always proposes the same tokens (deterministic: no q), costs nothing, and holds no state
beyond what it was told. The engine's round is not edited to use it: the seam's test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from core.drafting import registry
from core.drafting.base import DraftRequest, Offer, Proposal

NAME = "fixed-tokens"


class FixedTokensDrafter:
    """Proposes tokens[:k] every round, whatever came before."""

    name = NAME
    copies = False

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens = list(tokens)
        self.seen: list[int] = []  # what catch_up absorbed (for the invariant tests)
        self.learnt: list[tuple[int, int]] = []

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        return [Offer(self.name)]  # always something to propose, any k

    def catch_up(self, seq: Sequence[int], chunk: int, cancel: object = None) -> int:
        todo = list(seq[len(self.seen) :])
        self.seen.extend(todo)
        return len(todo)

    def propose(self, request: DraftRequest) -> Proposal:
        ids = self.tokens[: request.k]
        return Proposal(mx.array(ids, dtype=mx.uint32), None, self.name)

    def learn(self, proposed: Sequence[int], accepted: int) -> None:
        self.learnt.append((len(proposed), accepted))

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        n = 0
        while n < min(len(self.seen), len(committed)) and self.seen[n] == committed[n]:
            n += 1
        del self.seen[n:]

    def price(self, curve: Any) -> Callable[[int], float]:
        return lambda k: 0.0

    def state(self) -> dict[str, Any]:
        return {"seen": list(self.seen)}


def register(tokens: Sequence[int]) -> None:
    """Make `draft_source = "fixed-tokens"` propose `tokens`."""
    registry.register(NAME, lambda res: FixedTokensDrafter(tokens))
