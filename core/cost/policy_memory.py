"""The k policies an engine keeps: one per draft source, across rounds and chat turns.

An adaptive or cost-aware policy learns from every round (acceptance, cost scales), so a new
message keeps what the earlier ones taught it; a setting it depends on (`signature`) changing
starts a new one. Each source has its own, since a lookup's acceptance is not the model's.
Beside guard_memory.py, which keeps the measured guards the same way per settings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.cost.policy import NULL_POLICY, Policy
from core.settings import Settings


def signature(s: Settings) -> tuple[Any, ...]:
    """The settings a policy is built from: the same ones keep the policy as it is."""
    return (s.policy, s.k, s.k_min, s.k_max, s.accept_lo, s.accept_hi, s.ema_alpha, s.bonus,
            s.dispatch, s.step, s.draft_source, s.greedy)


class PolicyMemory:
    """Each source's policy with the signature it was built for and the last Settings seen."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[tuple[Any, ...], Policy, Settings]] = {}

    def get(self, s: Settings, source: str, make: Callable[[], Policy]) -> Policy:
        """The policy `s` names for `source`: the kept one while its signature holds, else
        `make()`. Asked per plan, so the same frozen Settings builds no signature."""
        kept = self._kept.get(source)
        if kept is not None and kept[2] is s:
            return kept[1]
        sig = signature(s)
        policy = kept[1] if kept is not None and kept[0] == sig else make()
        self._kept[source] = (sig, policy, s)
        return policy

    def of(self, source: str) -> Policy:
        """The policy kept for `source`; the null policy (drafts nothing) before its first."""
        kept = self._kept.get(source)
        return kept[1] if kept is not None else NULL_POLICY

    def all(self) -> dict[str, Policy]:
        """Every source's policy as it stands (a run's summary reports their cost scales)."""
        return {name: kept[1] for name, kept in self._kept.items()}

    def clear(self) -> None:
        """Forget every policy (`Engine.reset`): the next rounds learn from the start."""
        self._kept.clear()
