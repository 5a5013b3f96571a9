"""The k policies an engine keeps (core/cost/policy_memory.py) and the null policy a source
gets before its first round (core/cost/policy.py): a policy lives while the settings it is
built from hold, one per source, and the null one drafts nothing and hears nothing."""

from __future__ import annotations

from core.cost.policy import NULL_POLICY, FixedPolicy, NullPolicy, PolicyBase, make_policy
from core.cost.policy_memory import PolicyMemory
from core.settings import Settings


def test_a_policy_is_kept_while_the_settings_it_depends_on_hold() -> None:
    memory = PolicyMemory()
    made: list[int] = []

    def make(s: Settings):  # noqa: ANN202
        made.append(1)
        return lambda: make_policy(s)

    s = Settings(policy="fixed", k=4)
    first = memory.get(s, "model", make(s))
    assert memory.get(s, "model", make(s)) is first  # the same frozen Settings
    assert memory.get(s.replace(seed=7), "model", make(s)) is first  # a seed is no signature
    assert memory.get(s.replace(max_tokens=9), "model", make(s)) is first
    other = memory.get(s.replace(k=6), "model", make(s))  # k is: a new policy
    assert other is not first
    assert memory.get(s, "lookup", make(s)) is not other  # each source its own
    assert memory.all() == {"model": other, "lookup": memory.of("lookup")}
    memory.clear()
    assert memory.all() == {}


def test_a_source_with_no_round_yet_has_the_null_policy() -> None:
    memory = PolicyMemory()
    assert memory.of("model") is NULL_POLICY
    memory.get(Settings(policy="fixed", k=3), "model", lambda: FixedPolicy(3))
    assert isinstance(memory.of("model"), FixedPolicy)  # the control: a kept one is returned


def test_the_null_policy_drafts_nothing_and_hears_nothing() -> None:
    """k = 0 (a plain target step) whatever it is told, and every hook the loop calls."""
    p = NullPolicy()
    for limit in (None, 0, 5):
        assert p.next_k(limit) == 0
    p.observe(4, 4, 0.01)
    p.consider(object())
    p.charge(4, 1.0)
    assert p.next_k(8) == 0 and vars(p) == {}


def test_every_policy_has_the_hooks_the_loop_calls() -> None:
    """The loop calls `consider` and `charge` on any policy, unasked: the house's policies
    have them, the ones that read neither as PolicyBase's no-ops."""
    for name in ("fixed", "acceptance-rate", "accepted-length", "heuristic"):
        policy = make_policy(Settings(policy=name))
        assert isinstance(policy, PolicyBase), name
        before = dict(vars(policy))
        policy.consider(object())
        policy.charge(4, 1.0)
        assert vars(policy) == before, name  # no-ops: nothing it decides moved
