"""The drafter seam: where a round's draft tokens come from.

A drafter brings its state up to the committed tokens, proposes up to k tokens with their
draft distribution (or none: a deterministic proposal, one-hot), and is rewound to what the
target kept. Verification, the acceptance rules, the bonus token and the target's cache do
not know who drafted; the policy keeps choosing k, and reads the drafter's price of k.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mlx.core as mx

from core.errors import UserError
from core.primitives.sampling import LogitsConfig


class DraftUnavailable(UserError):
    """This source cannot draft with what is loaded (no draft model, say): the engine falls
    back to target-only and reports this sentence as the reason."""


@dataclass(frozen=True)
class DraftRequest:
    """What a drafter may use to propose: the committed tokens and how to sample.

    `seq` is the committed sequence (its last token is not yet in any cache: the round feeds
    it); `history` is the repetition-penalty window on the device (None without a penalty).
    `keys` holds one PRNG key per draft position, so a sampled draft is reproducible; None
    for a greedy request (it draws nothing, so the round splits no key).
    """

    seq: Sequence[int]
    k: int
    vocab: int
    logits: LogitsConfig
    keys: mx.array | None
    history: mx.array | None = None
    compiled: bool | None = None  # None: the model's own step (CachedModel.step); a bool forces it


@dataclass(frozen=True)
class Proposal:
    """Up to k draft tokens on the device, with their draft distribution or none.

    `q` is [k, V] for a sampled draft; None means deterministic (each token has q = 1), which
    every acceptance rule handles exactly (core.primitives.sampling.one_hot). `tokens` stays lazy until
    the round's one host sync.
    """

    tokens: mx.array
    q: mx.array | None
    source: str
    origin: str = "accepted"  # the origin its accepted tokens carry ("copied" for a lookup)
    copied_from: int | None = None  # where in the conversation a copied run starts
    # A token tree (core.primitives.token_tree.TokenTree) whose heaviest chain is `tokens`:
    # the round verifies the whole tree in one forward where it can, else the chain.
    tree: Any = None

    @property
    def k(self) -> int:
        return int(self.tokens.shape[0])


@dataclass(frozen=True)
class Offer:
    """What a source could propose after the committed tokens, known on the host before any
    device work: the policy reads it to choose k before the round (and after every pipelined
    target step, to decide whether the next round drafts at all).

    `available` caps k (a copy has only so many tokens after its match; None: any k);
    `kind` groups proposals whose acceptance behaves alike (a copy's match length), so a
    policy can keep statistics per kind."""

    source: str
    available: int | None = None
    kind: int = 0


def offers_of(drafter: Any, seq: Sequence[int]) -> list[Offer]:
    """The offers of `drafter` after `seq`, best first, as a list plan_round may reorder."""
    return list(drafter.offers(seq))


def empty_proposal(source: str) -> Proposal:
    """Nothing to propose: the round becomes a plain target step."""
    return Proposal(mx.array([], dtype=mx.uint32), None, source)


class Drafter(Protocol):
    """What the engine needs from a draft source (see docs/ARCHITECTURE.md)."""

    name: str
    # Whether its drafts are copies of the conversation (the lookup): the cost-aware policy
    # then models how far copies run (core.cost.policy.CopyRunPolicy) instead of per-position
    # acceptance.
    copies: bool

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        """What could be proposed after `seq`, best first, each naming the registered source
        that would draft it: this one (a model: `[Offer(name)]`, any k), or others (the
        hybrid offers the lookup's copy, then the model); none: a plain target step. Host
        work only: the engine asks after every pipelined target step."""
        ...

    def catch_up(self, seq: Sequence[int], chunk: int, cancel: Any = None) -> int:
        """Before a drafting round, outside its timer: absorb the committed tokens `seq` (a
        model prefills its lag up to seq[:-1], a lookup indexes all of seq). Returns how many
        tokens were absorbed. `cancel` (a threading.Event): a long prefill stops between its
        chunks once it is set, and the engine then runs no round."""
        ...

    def propose(self, request: DraftRequest) -> Proposal:
        """Up to request.k tokens continuing request.seq; may return fewer, or none."""
        ...

    def learn(self, proposed: Sequence[int], accepted: int) -> None:
        """After the round's host sync: the ids it proposed and how many the target kept
        (a model records what its cache was fed; a lookup may keep statistics)."""
        ...

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        """After a round, a run, or a new turn: keep only what is consistent with the committed
        sequence (its first `start` tokens are known to agree). A model keeps its cache at
        committed[:-1] at most, since the next round feeds the last token."""
        ...

    def price(self, curve: Any) -> Callable[[int], float]:
        """Seconds to propose k tokens, priced from a calibration (core.dispatch)."""
        ...

    def state(self) -> dict[str, Any]:
        """What the drafter holds, for tests of the cache invariants and for the app."""
        ...

    # Optional: `configure(settings)`, called before each drafting round so a source reads
    # its own settings (the lookup its Settings.lookup_min_match); the engine knows none.
    # A router (the hybrid) that only names other sources in its offers is never asked to
    # catch up, propose or learn: plan_round hands each offer to the source it names.
