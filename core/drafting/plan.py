"""Who drafts the next round, and how many: the offers of the routing source, each asked of
its own source's policy. Host work only (no device call, no sync), so the engine asks it after
every pipelined target step while the next step runs, and a round that would propose nothing
never stops the pipeline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.drafting.base import offers_of


@dataclass
class Plan:
    """The source that drafts (None: a plain target step), its policy and k, and the
    policies that said 0 before it (a target step is theirs to observe)."""

    drafter: Any | None = None
    policy: Any | None = None
    k: int = 0
    declined: list[Any] = field(default_factory=list)

    @property
    def drafts(self) -> bool:
        """Whether a source drafts this round (else a plain target step)."""
        return self.drafter is not None


def plan_round(
    router: Any,
    source: Callable[[str], Any],
    policy_for: Callable[[Any], Any],
    seq: Sequence[int],
    cap: int,
    asks: Callable[[str], bool],
    rank: Callable[[str], float],
) -> Plan:
    """Each offer of `router` after `seq`, best first, goes to its source's policy (with the
    offer, where the policy takes one: a copy's length and kind); the first that wants
    k > 0 drafts, at most `cap` (the drafts the request can still use).

    `asks(name)`: the measured guard (core.cost.guard.RateGuard.asks); a source it answers
    False for measured slower than plain target steps in this run and is skipped, so a
    hybrid whose model cannot pay is the lookup alone. `rank(name)`: its order among the
    offers (stable: equal keys keep the router's order), the faster measured source first.
    Where no clock judges the rounds, the null guard's (core.cost.guard.NULL_GUARD) ask every
    source in the router's order."""
    plan = Plan()
    offers = offers_of(router, seq)
    if len(offers) > 1:
        offers.sort(key=lambda o: rank(o.source))
    for offer in offers:
        if not asks(offer.source):
            continue
        drafter = source(offer.source)
        policy = policy_for(drafter)
        policy.consider(offer)  # core.cost.policy.Policy: a no-op but for a copy's policy
        k = max(min(policy.next_k(cap), cap), 0)
        if k > 0:
            plan.drafter, plan.policy, plan.k = drafter, policy, k
            return plan
        plan.declined.append(policy)
    return plan
