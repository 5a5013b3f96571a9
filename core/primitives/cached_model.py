"""A model with its prompt cache and the token list that cache holds.

The one cache rule of the engine lives here: a cache is only ever rewound to the longest
prefix it shares with the sequence wanted (a trim, no forward), and only extended by feeding
tokens. Rejected drafts, the bonus switch, EOS, cancellation and multi-turn reuse are all
that one rule. Calibration, the bench's scorer and the step-cost probe prefill through
`prefill` too, so every prefill is chunked and evaluated the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

PREFILL_CHUNK = 512
# A catch-up this short joins the round's graph (no sync of its own): up to one prefill
# chunk, so a model source after a long stretch of target steps or copies pays no sync and no
# idle device before its round (it was 32: a hybrid's model after 100 target steps synced
# twice a round). Its forward's logits are never evaluated, so only its cache is computed.
LAZY_CATCH_UP = PREFILL_CHUNK
_NULL = nullcontext()  # reusable: a decode step enters it per draft token, builds none


def common_prefix(
    a: Sequence[int], b: Sequence[int], start: int = 0, upto: int | None = None
) -> int:
    """Length of the common prefix of a and b[:upto], trusting that the first `start` agree
    (`upto` spares a round copying the conversation to drop its last token)."""
    n = min(len(a), len(b) if upto is None else min(upto, len(b)))
    i = min(start, n)
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PacedCancel(threading.Event):
    """A cancel that must be honoured within about `within_s`: a prefill given one feeds
    chunks of about that long, sized by the time its chunks took on this backend (the first
    is FIRST_PACED_CHUNK tokens), never past its `chunk`. A 512-token chunk took ~30 s on a
    busy 2-core CPU, and Esc or ctrl+q waited for it; a GPU soon reaches `chunk` again."""

    def __init__(self, within_s: float = 1.0) -> None:
        super().__init__()
        self.within_s = within_s


FIRST_PACED_CHUNK = 16


def prefill(model: nn.Module, cache: list[Any], tokens: Sequence[int] | mx.array,
            chunk: int = PREFILL_CHUNK, cancel: threading.Event | None = None) -> int:
    """Feed tokens in chunks, evaluating the cache after each so memory stays bounded; the
    tokens fed. `cancel`, once set, stops it between chunks: a pasted file's prefill took
    30 s on this CPU, and Esc waited for all of it (a PacedCancel also sizes the chunks)."""
    ids = tokens if isinstance(tokens, mx.array) else mx.array(list(tokens), dtype=mx.uint32)
    n = ids.shape[0]
    pace = getattr(cancel, "within_s", None)
    size = min(chunk, FIRST_PACED_CHUNK) if pace else chunk
    i = 0
    while i < n:
        if cancel is not None and cancel.is_set():
            return i
        began = time.perf_counter()
        model(ids[None, i : i + size], cache=cache)
        mx.eval([c.state for c in cache])
        i += size
        if pace:  # the next chunk takes about `pace` at this chunk's rate, growing 4x at most
            took = max(time.perf_counter() - began, 1e-4)
            size = max(1, min(chunk, 4 * size, int(size * pace / took)))
    return n


def cache_offset(cache: list[Any]) -> int:
    """Positions a prompt cache holds (0 for an empty or cache-less model)."""
    return int(getattr(cache[0], "offset", 0)) if cache else 0


@dataclass
class CachedModel:
    """A model, its prompt cache, and the token list that cache holds (same length)."""

    model: nn.Module
    cache: list[Any]
    seq: list[int] = field(default_factory=list)
    # "compiled": forwards of up to MAX_ROWS rows over a prefilled cache run the compiled
    # forward (core.primitives.compiled); "eager": the model's own call. The engine sets it
    # per run from the `step` setting.
    step: str = "eager"
    compiled: Any = None  # CompiledForward once built; False when the model cannot use one
    # rows -> the context a multi-row forward outside a verification enters (its multi-token
    # step, a lazy catch-up). The engine gives the draft the backend's default attention
    # (core.dispatch.patches.draft_attention: plain on CUDA); None: the model's own.
    multi_row: Callable[[int], AbstractContextManager[Any]] | None = None

    @classmethod
    def fresh(
        cls, model: nn.Module, multi_row: Callable[[int], AbstractContextManager[Any]] | None = None
    ) -> CachedModel:
        """The model with an empty cache."""
        return cls(model, make_prompt_cache(model), multi_row=multi_row)

    def _rows(self, rows: int) -> AbstractContextManager[Any]:
        """What a forward of `rows` rows outside a verification enters."""
        if self.multi_row is None or rows <= 1:
            return _NULL
        return self.multi_row(rows)

    def rewind(self, want: Sequence[int], start: int = 0, upto: int | None = None) -> None:
        """Keep only what the cache shares with `want[:upto]` (the first `start` are
        trusted)."""
        keep = common_prefix(self.seq, want, start, upto)
        if keep < len(self.seq):
            trim_prompt_cache(self.cache, len(self.seq) - keep)
            del self.seq[keep:]

    def keep_tree_path(self, fed: Sequence[int], nodes: int, path: Sequence[int],
                       tokens: Sequence[int]) -> None:
        """The cache rule after a tree verification (core.primitives.tree_forward), which fed
        the pending tokens `fed` and then `nodes` node rows: keep the accepted path's leading
        nodes that are the tree's first rows (the heaviest chain's: a node is rotated at its
        depth, so their K/V are already in place), trim the rest. The path's nodes past them
        are committed tokens the cache does not hold: the next forward feeds them as its
        pending rows, which a host-bound verification prices flat, instead of gathering
        their K/V into place, 4 indexing ops a layer that cost about 0.7 of a plain step
        (docs/decisions/0009-tree-keep-refeed.md)."""
        kept = next((i for i, node in enumerate(path) if node != i), len(path))
        trim_prompt_cache(self.cache, nodes - kept)
        self.seq.extend([*fed, *tokens[:kept]])

    def compiled_forward(self) -> Any:
        """The model's CompiledForward, built on first use; None when its layout has none."""
        if self.compiled is None:
            from core.primitives.compiled import CompiledForward, supports

            self.compiled = CompiledForward(self.model) if supports(self.model) is None else False
        return self.compiled or None

    def graphs(self) -> int:
        """Graphs the compiled forward has traced so far (0 when none was built)."""
        return self.compiled.graphs if self.compiled else 0

    def _compiled_for(self, rows: int, compiled: bool | None) -> Any:
        """The CompiledForward a forward of `rows` rows runs through, or None (eager): the
        step this model runs (`compiled` None) or the one asked for (a calibration's or a
        warm-up's timing), where a bucket holds the rows and the cache was prefilled."""
        if not (self.step == "compiled" if compiled is None else compiled):
            return None
        fwd = self.compiled_forward()
        return fwd if fwd is not None and fwd.runs(rows, self.cache) else None

    def forward(self, tokens: mx.array, vocab: int, last: int | None = None,
                compiled: bool | None = None) -> mx.array:
        """Logits [rows, vocab] for a 1-D token array, or of its `last` rows; the cache
        advances by its length. One slice of the output (none where it is already that):
        every slice is a graph node a host-bound GPU pays for."""
        rows = tokens.shape[0]
        keep = rows if last is None or last >= rows else last
        fwd = self._compiled_for(rows, compiled)
        if fwd is not None:
            out = fwd.forward(tokens, self.cache, last=keep)
            return out if out.shape[-1] == vocab else out[:, :vocab]
        out = self.model(tokens[None], cache=self.cache)
        if keep == rows and out.shape[-1] == vocab:
            return out[0]
        return out[0, rows - keep :, :vocab]

    def decode(self, tokens: mx.array, vocab: int, compiled: bool | None = None) -> mx.array:
        """Logits of the last row, through the step this model runs (`step`; `compiled`
        True or False: that step instead)."""
        with self._rows(tokens.shape[0]):
            return self.forward(tokens, vocab, last=1, compiled=compiled)

    def prefill(self, tokens: Sequence[int], chunk: int = PREFILL_CHUNK,
                cancel: threading.Event | None = None) -> int:
        """Feed tokens (chunked, evaluated) and record those fed as held: all of them, or
        the chunks before `cancel` was set."""
        if not tokens:
            return 0
        fed = prefill(self.model, self.cache, tokens, chunk, cancel)
        self.seq.extend(tokens[:fed])
        return fed

    def catch_up(self, seq: Sequence[int], chunk: int = PREFILL_CHUNK,
                 cancel: threading.Event | None = None) -> int:
        """Bring the cache to seq[:-1] (it must already hold a prefix of it); tokens fed
        (a long one stops between its chunks once `cancel` is set).

        A short lag behind a cache that already holds the conversation (a hybrid's model
        after copies or target steps) is fed lazily: its forward joins the round's graph and
        is evaluated by the round's one host sync, instead of a sync of its own before the
        round (prefill evaluates every chunk). A first catch-up, or a long one, is a prefill."""
        todo = list(seq[len(self.seq) : -1])
        if self.seq and 0 < len(todo) <= LAZY_CATCH_UP:
            # in forwards of at most `chunk` rows, as a prefill: a narrow start
            # (core/runtime/warm_start.py) keeps every forward below the GEMM kernels
            for i in range(0, len(todo), max(1, chunk)):
                piece = todo[i : i + max(1, chunk)]
                with self._rows(len(piece)):
                    self.model(mx.array(piece, dtype=mx.uint32)[None], cache=self.cache)
            self.seq.extend(todo)
            return len(todo)
        return self.prefill(todo, chunk, cancel)

    def offset(self) -> int:
        return cache_offset(self.cache)
