"""One token per round from one model, pipelined: target-only, draft-only, and the plain
target steps of a speculative run where no source drafts.

Its own module, so the engine reads as its rounds and this loop as one thing: the next
token's forward is queued (async_eval) before the current one is read, as mlx-lm's
generate_step does, so the host's read overlaps device work. A barrier between forward and
sampling would cost that overlap (about 30% of a 7B step on the H200), so a traced round
charges its whole time, read to read, to the forward's phase: sampling is part of the same
device graph. The loop hands control back when the settings change, so a key applies from
the next round, and when `stop_after()` (asked after each token is committed) says the next
round would draft. That question is asked after each token is read, on the exact committed
sequence, while the next step is already queued; a yes hands that queued step to the round
as its first verified row (its logits, `stop_after(row0)`), so the round is queued behind it,
nothing is thrown away, and a plan is never made on a token not yet read (one made a token
early would offer copies the token read then refutes, and restart the pipeline for nothing).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import mlx.core as mx

from core.decode.run_state import RoundKit, logits_config
from core.decode.trace import RoundTimer
from core.events import CommittedToken, RoundEvent
from core.primitives.sampling import penalize, sample, to_probs
from core.settings import Settings


class PipelinedSteps:
    """The loop's state for one stretch of single-model rounds (built per stretch)."""

    def __init__(
        self, kit: RoundKit, s: Settings, mode: str, budget: int,
        source: Callable[[], Settings], cancel: threading.Event,
    ) -> None:
        self.kit, self.s, self.budget, self.source, self.cancel = kit, s, budget, source, cancel
        self.model = kit.target if mode == "target-only" else kit.draft
        assert self.model is not None
        self.origin = "target" if mode == "target-only" else "draft"
        self.phase = "verify" if mode == "target-only" else "draft"
        self.cfg = logits_config(s)
        self.kernel = kit.kernel(1) if mode == "target-only" else ""
        self.raw: mx.array | None = None  # the last step's logits [1, V], before any penalty

    def step(self, tokens: mx.array, hist: mx.array | None, key: mx.array) -> mx.array:
        """The next token after `tokens`, lazily (the caller queues it); its logits stay in
        `raw` (no extra work: the graph computes them anyway) for a round that takes it over."""
        with self._context(tokens.shape[0]):
            logits = self.model.decode(tokens, self.kit.vocab_size)
        return self.pick(logits, hist, key)

    def _context(self, rows: int) -> contextlib.AbstractContextManager[Any]:
        """The target's step that feeds several pending tokens (a tree round's path left to
        feed) is a verification's forward in all but name: it enters the same patches. The
        draft's multi-row steps go through its own (CachedModel.multi_row)."""
        if rows > 1 and self.origin == "target":
            return self.kit.verify_context(self.s, rows)
        return contextlib.nullcontext()

    def _kernel(self, rows: int) -> str:
        """The kernel family a step of `rows` rows reports (the draft's: none named)."""
        return self.kit.kernel(rows) if rows > 1 and self.origin == "target" else self.kernel

    def pick(self, logits: mx.array, hist: mx.array | None, key: mx.array) -> mx.array:
        """The token a step's logits give (lazily), the logits kept in `raw`."""
        self.raw = logits
        if hist is not None:
            logits = penalize(logits, hist, self.cfg)
        if self.cfg.greedy:
            return self.kit.agreed(mx.argmax(logits, axis=-1))
        return self.kit.agreed(sample(to_probs(logits, self.cfg), key))

    def window(self, hist: mx.array | None, y: mx.array) -> mx.array | None:
        """The repetition-penalty window after token `y` (None without a penalty)."""
        return None if hist is None else mx.concatenate([hist, y])[-self.cfg.repetition_context :]

    def wants_more(self, produced: int) -> bool:
        """Whether to queue another step: budget left, not cancelled, settings unchanged."""
        if produced + 1 >= self.budget or self.stopped():
            return False
        return self.unchanged()  # a changed setting hands control back to generate()

    def unchanged(self) -> bool:
        """Whether the settings source still gives this stretch's settings. Identity first:
        a source that returns the same frozen Settings is the common case (the bench, a
        turn with no key pressed), and a dataclass's `==` builds two tuples of its ~35
        fields, twice a step, in the host work a host-bound GPU waits on."""
        now = self.source()
        return now is self.s or now == self.s

    def stopped(self) -> bool:
        """Whether the run was cancelled (Esc): checked between steps, never mid-step."""
        return self.cancel.is_set()

    def rounds(
        self, seq: list[int], key: mx.array, index: int,
        stop_after: Callable[[mx.array], bool] | None = None,
    ) -> Iterator[RoundEvent]:
        """Yield one RoundEvent per token, committing each to `seq`. `stop_after(row0)`,
        asked after each token while the next step is queued (`row0`: its logits): True ends
        the stretch there, that step unread and fed the last token (the round verifies its
        row first; whoever drops it instead rewinds the target to seq[:-1])."""
        st, s, clock = self.model, self.s, self.kit.clock
        pending = seq[len(st.seq) :]
        ctx_n = self.cfg.repetition_context
        hist = mx.array(seq[-ctx_n:]) if self.cfg.repetition_penalty != 1.0 else None
        greedy = self.cfg.greedy  # a greedy step draws nothing: no key split in its path
        key, k0 = (key, key) if greedy else mx.random.split(key)
        timer = RoundTimer(s.traced, clock)
        y = self.step(mx.array(pending), hist, k0)
        st.seq.extend(pending)
        mx.async_eval(y)
        produced = 0
        rows = len(pending)  # the first step feeds what the cache lacks: a tree path's rest
        while True:
            more = self.wants_more(produced)
            nxt = None
            if more:
                key, kn = (key, key) if greedy else mx.random.split(key)
                nxt = self.step(y, self.window(hist, y), kn)
                mx.async_eval(nxt)
            tok = int(y.item())
            timer.mark(self.phase)  # no barrier: the clock at the read that ends this round
            seq.append(tok)
            produced += 1
            if nxt is not None:
                st.seq.append(tok)
            yield RoundEvent(
                index=index + produced - 1,
                tokens=(CommittedToken(tok, self.origin),),
                rows=rows,
                timings=timer.finish(),
                kernel=self._kernel(rows),
                context=len(seq),
                traced=s.traced,
            )
            rows = 1
            if not more or self.kit.hit_eos(tok, s):
                return
            if self.stopped() or not self.unchanged():
                # Set by the consumer while it held this round: stop now, not one token
                # later. A pipelined step already fed `tok`; take it back (seq[:-1] again).
                st.rewind(seq[:-1], max(len(seq) - 2, 0))
                return
            assert nxt is not None and self.raw is not None  # `more` held: a step is queued
            if stop_after is not None and stop_after(self.raw):
                return  # the queued step is the round's first row
            timer = RoundTimer(s.traced, clock)
            hist = self.window(hist, y)
            y = nxt
