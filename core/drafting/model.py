"""A draft model run k times: the classic draft source, sampled or greedy, optionally compiled.

Each step feeds the previous draft token back (chained lazily, queued with async_eval so the
device never waits for the host), applies the same logits processing as the target, and
samples from the processed distribution q, which the acceptance rule needs. The model's cache
is a `CachedModel` the engine shares with draft-only mode, so switching modes never refills it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from core.drafting.base import DraftRequest, DraftUnavailable, Offer, Proposal
from core.drafting.registry import DraftResources
from core.primitives.cached_model import PREFILL_CHUNK, CachedModel
from core.primitives.sampling import penalize, sample, to_probs


class ModelDrafter:
    """Proposes by running the draft model autoregressively for k steps."""

    name = "model"
    copies = False  # its drafts are sampled, not copied

    def __init__(self, state: CachedModel) -> None:
        self.state_ = state
        self._fed: list[int] = []  # tokens the last proposal fed the cache (not yet recorded)
        self._offer = Offer(self.name)

    @classmethod
    def from_resources(cls, res: DraftResources) -> ModelDrafter:
        """Needs the engine's draft model, able to speculate; otherwise the reason why not."""
        if res.draft_reason is not None:
            raise DraftUnavailable(res.draft_reason)
        if res.draft is None:
            raise DraftUnavailable("no draft model is loaded")
        return cls(res.draft)

    def offers(self, seq: Sequence[int]) -> list[Offer]:
        """One offer, any k: a model always has something to propose (one frozen Offer,
        kept: the engine asks after every plain step)."""
        return [self._offer]

    def catch_up(self, seq: Sequence[int], chunk: int = PREFILL_CHUNK, cancel: Any = None) -> int:
        """A lag that fits one forward of at most `chunk` rows with the pending token (after
        a round that accepted every draft, the last draft; a stretch of copies or target
        steps) is left to `propose`, whose first step feeds it with the pending token in one
        forward, as mlx-lm's loop does: a forward of its own would cost a host-bound GPU
        about a draft step more (docs/benchmarks/round-overhead.md). A longer
        lag, or the first (the prompt), is the cache's own catch-up."""
        d = self.state_
        lag = len(seq) - 1 - len(d.seq)
        if d.seq and 0 < lag < max(1, chunk):
            return lag
        return d.catch_up(seq, chunk, cancel)

    def propose(self, request: DraftRequest) -> Proposal:
        """k chained draft steps; q is returned unless the rule is greedy (argmax needs none)."""
        r, d = request, self.state_
        cfg = r.logits
        greedy, history, vocab, compiled = cfg.greedy, r.history, r.vocab, r.compiled
        pending = list(r.seq[len(d.seq) :])
        x = mx.array(pending)
        drafts: list[mx.array] = []
        qs: list[mx.array] = []
        for i in range(r.k):
            logits = d.decode(x, vocab, compiled)
            if history is not None:
                ctx = mx.concatenate([history, *drafts]) if drafts else history
                logits = penalize(logits, ctx, cfg)
            if greedy:
                x = mx.argmax(logits, axis=-1)
            else:
                assert r.keys is not None  # a sampled request carries one key per draft
                q = to_probs(logits, cfg)
                qs.append(q)
                x = sample(q, r.keys[i])
            drafts.append(x)
            # Queued in traced mode too: the draft phase still ends at one barrier, and
            # without this the host builds all k steps before the device starts any.
            mx.async_eval(x)
        self._fed = pending  # with the first k - 1 drafts: what the cache now holds beyond seq
        tokens = mx.concatenate(drafts) if drafts else mx.array([], dtype=mx.uint32)
        q_all = mx.concatenate(qs) if qs else None
        return Proposal(tokens, None if greedy else q_all, self.name)

    def learn(self, proposed: Sequence[int], accepted: int) -> None:
        """Record what the cache was fed this round, so rewind can keep the accepted part."""
        if proposed:  # a round that proposed nothing fed nothing
            self.state_.seq.extend(self._fed + list(proposed[:-1]))
        self._fed = []

    def rewind(self, committed: Sequence[int], start: int = 0) -> None:
        self.state_.rewind(committed, start, upto=len(committed) - 1)

    def price(self, curve: Any) -> Callable[[int], float]:
        return model_draft_price(curve)

    def state(self) -> dict[str, Any]:
        return {"draft_seq": list(self.state_.seq), "draft_offset": self.state_.offset()}


def model_draft_price(curve: Any) -> Callable[[int], float]:
    """k draft steps at the calibrated step cost; a target step's when the calibration ran
    without a draft (an assumption that errs towards not drafting)."""
    step = curve.draft_step_s if curve.draft_step_s is not None else curve.t_verify(1)
    return lambda k: k * step
