"""Draft-free drafting: copy what followed the longest earlier repeat of the conversation's end.

Code edits, rewrites, answers about a pasted text and second turns that revise the first all
repeat long runs of earlier tokens. The lookup finds the longest suffix of everything the
models have seen in this conversation (every turn's prompt and answer) that occurred before,
through a suffix automaton (core.drafting.suffix_index: amortised O(1) per token, no scan),
and proposes the tokens that followed it. It costs no device time; its drafts are
deterministic (q one-hot), which every acceptance rule handles exactly. When nothing repeats,
it proposes nothing and the round is a plain, pipelined target step.

The hybrid source offers the lookup's copy first and the draft model after it: each offer
goes to its own source's policy (and the measured guard), so the model drafts where the
lookup has no copy or its copy is not worth a round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from core.drafting.base import DraftRequest, Offer, Proposal, empty_proposal
from core.drafting.registry import DraftResources
from core.drafting.suffix_index import SuffixIndex

DEFAULT_MIN_MATCH = 2  # a repeat of one token (", the") predicts too little to pay a verify


def match_kind(length: int) -> int:
    """The kind of a copy, for its run-length statistics: the match length's octave (2-3, 4-7,
    8-15, 16-31, 32+). A copy that already agrees on 16 tokens runs on more often than one
    that agrees on 2, so their acceptance is learnt apart."""
    return min(max(length, 1).bit_length(), 6)


class LookupDrafter:
    """Proposes the continuation of the longest earlier repeat of the committed tokens."""

    name = "lookup"
    copies = True  # deterministic copies: the cost-aware policy models their run lengths

    def __init__(self, min_match: int = DEFAULT_MIN_MATCH) -> None:
        self.min_match = min_match
        self.index = SuffixIndex()

    @classmethod
    def from_resources(cls, res: DraftResources) -> LookupDrafter:
        return cls()

    def configure(self, settings: Any) -> None:
        """Its own settings, read before each drafting round: the shortest repeat it copies
        from (Settings.lookup_min_match). The index does not depend on it."""
        self.min_match = settings.lookup_min_match

    def catch_up(self, seq: Sequence[int], chunk: int = 0, cancel: Any = None) -> int:
        """Index every committed token (host work only, microseconds per token). `seq` must
        extend what is indexed, which the engine's rewind after every round guarantees; no
        comparison of the whole conversation, so a round's host cost stays flat."""
        return self.index.sync(seq, len(self.index))

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        """The copy after `seq`, if its match is long enough: how many tokens truly follow the
        earlier occurrence (no cap where the text's end is already periodic: the match spans
        a whole period, so the loop's copy goes on), and the match's kind."""
        self.catch_up(seq)
        match = self.index.longest_repeat()
        if match is None or match.length < self.min_match:
            return []
        period = len(self.index) - (match.end + 1)
        available = None if match.length >= period else period
        return [Offer(self.name, available, match_kind(match.length))]

    def propose(self, request: DraftRequest) -> Proposal:
        self.catch_up(request.seq)
        match = self.index.longest_repeat()
        if match is None or match.length < self.min_match or request.k <= 0:
            return empty_proposal(self.name)
        ids = self.index.continuation(match, request.k)
        return Proposal(
            mx.array(ids, dtype=mx.uint32), None, self.name, origin="copied", copied_from=match.end + 1,
        )

    def learn(self, proposed: Sequence[int], accepted: int) -> None:
        """Nothing: the committed tokens are indexed at the next catch-up."""

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        """Keep the index a prefix of the committed tokens (rebuilt only where they part)."""
        n = min(len(self.index), len(committed))
        i = min(start, n)
        toks = self.index.tokens
        while i < n and toks[i] == committed[i]:
            i += 1
        self.index.truncate(i)

    def price(self, curve: Any) -> Callable[[int], float]:
        """Host time only (under 0.2 ms a round): the round costs its verification."""
        return lambda k: 0.0

    def state(self) -> dict[str, Any]:
        return {"seen": list(self.index.tokens)}


class HybridDrafter:
    """The lookup when the conversation repeats itself, the draft model otherwise.

    A router, not a drafter of its own: its offers name the lookup and the model, and
    core.drafting.plan.plan_round hands each offer to the source it names, so those two
    catch up, propose and learn; the hybrid never drafts. What the engine still asks of it:
    its offers, a rewind (a no-op: its parts are rewound as the engine's own), its state, and
    its price (the bench's best-k prediction for a hybrid row prices the model's drafts)."""

    name = "hybrid"
    copies = False  # each round is its sub-source's, whose own `copies` its policy reads

    def __init__(self, lookup: Any, model: Any) -> None:
        self.lookup, self.model = lookup, model

    @classmethod
    def from_resources(cls, res: DraftResources) -> HybridDrafter:
        """Built from the engine's own lookup and model sources, so their state is shared."""
        assert res.source is not None
        return cls(res.source("lookup"), res.source("model"))

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        """The lookup's copy first, then the model: the engine takes the first whose own
        policy wants to draft, so each source is asked on its own evidence."""
        return [*self.lookup.offers(seq), *self.model.offers(seq)]

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        pass  # the sub-sources are the engine's own and are rewound with it

    def price(self, curve: Any) -> Callable[[int], float]:
        return self.model.price(curve)

    def state(self) -> dict[str, Any]:
        return {}
