"""The measured guards an engine keeps across requests: one per settings, bounded.

A fresh guard per request would spend each request's first rounds "measuring" a source
already measured slower in the request before, so a bench's every seed and a chat's every
turn would pay the same expensive rounds again (docs/decisions/0006-measured-guard.md). A
guard's rates are decayed sums (about the last 10 rounds of an arm, core/cost/guard.py) and
its probe schedule goes on across requests, so what it carries is bounded, and a changed
workload is still found by the probes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from core.cost.guard import Prior, RateGuard, prior_of
from core.settings import Settings, field_names

GUARD_MEMORY = 8  # settings whose guards an engine keeps (least recently used dropped)
# Fields that do not change what a round costs or commits: requests differing only in them
# share one guard (a bench's seeds, a chat's turns).
_GUARD_FREE = frozenset({"seed", "max_tokens", "ignore_eos", "target", "draft"})

Key = tuple[tuple[str, Any], ...]


def guard_key(s: Settings) -> Key:
    """The settings a measured guard's rates hold for: every field but the seed, the length
    and the model specs (an engine is one pair)."""
    return tuple((n, getattr(s, n)) for n in field_names() if n not in _GUARD_FREE)


class GuardMemory:
    """Guards by settings, at most `size`, the least recently used dropped first."""

    def __init__(self, size: int = GUARD_MEMORY) -> None:
        self.size = size
        self._guards: OrderedDict[Key, RateGuard] = OrderedDict()

    def __len__(self) -> int:
        return len(self._guards)

    def get(self, s: Settings, prior: Callable[[str], Prior | None] | None = None) -> RateGuard:
        """The guard of `s`'s settings (built with `prior` when there is none yet)."""
        key = guard_key(s)
        guard = self._guards.pop(key, None)
        if guard is None:
            guard = RateGuard(prior=prior)
        self._guards[key] = guard
        while len(self._guards) > self.size:
            self._guards.popitem(last=False)
        return guard

    def clear(self) -> None:
        self._guards.clear()


def source_prior(policy: Callable[[], Any]) -> Prior | None:
    """The calibrated best round of a source (core.cost.guard.prior_of), from `policy()`, the
    policy that prices its rounds; None where the source cannot draft here."""
    from core.drafting.base import DraftUnavailable
    from core.errors import UserError

    try:
        return prior_of(policy())
    except (DraftUnavailable, UserError):
        return None
