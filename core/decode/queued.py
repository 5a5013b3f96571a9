"""The step after a round, queued before the round is read (issue 28, `overlap_round`, off by
default: on the H200 greedy copies ran at 0.58-0.80x with it in run 11, part of that its build
charged to the round that queued it; with that fixed it moved within the noise in run 12, where
the queued step alone cost 1.22x a plain step; never-slower.md).

A speculative round ends in one host sync: the host reads how many drafts the target kept
and the token that follows them. Until that read, the host did not know where the next token
goes in the KV cache, so the step after a round was built only after it: the device idled
through the read, the commit and the whole build of that step, and on the H200 the token
after a round cost about two pipelined steps (run 10, docs/benchmarks/never-slower.md).

Where that token goes is known on the device, though: at position base + n, where base is
the round's first draft position and n the kept drafts (an array the acceptance already
computed). So the step is built before the read, with that position as an array:
- RoPE takes it as an array offset (mx.fast.rope accepts one);
- its key and value are written at that slot of each layer's KV buffer (mx.slice_update with
  an array start), over the first rejected draft, or past the last draft when all were kept;
- it attends over the whole buffer, with a mask that hides the slots past its own (the
  rejected drafts' keys, still in the buffer, and what was never written).
The cache's own bookkeeping (its host offset, the token list the engine keeps) is set after
the read (`adopt`), as the engine's one cache rule says: rewound to what the committed
sequence shares, then advanced by the one token the step fed.

The step's logits are then the first row of whatever follows: the next round's first
verified row (as a stretch's handoff, core/decode/speculative.py), or the first of the
plain steps (core/decode/single.py). Where the round is cut (EOS, other settings, the end of
the budget) the step is dropped and the cache rewound; its device time is the only loss.

The step attends over the whole KV buffer with an additive mask, not over the round's
slots: on CUDA MLX's one-row kernel takes no array mask, so (by MLX's source) a masked
one-row attention goes to cuDNN, whose plan is built per exact shape
(core/dispatch/bucketed.py). The buffer's length
changes only every 256 positions, so the plan repeats. Which attention it runs is
`queued_attention`: MLX's fused call unless `verify_attention` names "plain"
(core/dispatch/patches.py `plain_attention`). On the H200 the queued step read 4.74 ms
pipelined with the fused call and 5.39 ms with the plain one, against 3.88 ms for the plain
step it replaces (docs/benchmarks/never-slower.md, run 12's forward-split table).

When another round follows, the step costs a forward the round would not have needed (its
pass would have fed the token with the drafts): on a host-bound GPU about one step. On the
H200 greedy copies that ran round after round ran at 0.58-0.80x with it (run 11). So a source's
round queues the step only while its rounds were followed more often by plain steps than by
another round (`FollowRate`, an average over its last rounds; the first rounds queue).

Only where the layout is one this was checked on: mlx-lm's plain KVCache on every layer and
a model type in SUPPORTED, whose attention reads the cache through `offset` (RoPE),
`update_and_fetch` and `make_mask` only (tests/core/decode/test_queued.py compares its logits
with a plain step at the same position for each). Not traced (a traced round's phases end in
barriers, so nothing would overlap), not on a sharded target (every rank must verify rank 0's
tokens: their agreement is host work), and not without the bonus token (a round that keeps
every draft then commits no token after them).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from core.dispatch.patches import one_row_plain
from core.settings import Settings

# Model types whose attention was checked to read the cache only through offset (RoPE),
# update_and_fetch and make_mask (tests/core/decode/test_queued.py).
SUPPORTED = frozenset({"llama", "qwen2"})


@dataclass
class QueuedStep:
    """A step queued before its round was read: it fed the round's next token, and its
    logits (`row0`, before any penalty) are the next round's or step's first row. `settings`
    are those of the round that queued it (any others drop it). Its build is the next
    token's cost, not the round's: the guard and the k policy observe the round without it
    and whatever takes the step (a round or a plain step) with it."""

    row0: mx.array
    settings: Settings
    build_s: float = 0.0  # the host time its build took inside the round that queued it


class _SlotView:
    """One layer's KV cache as the queued step sees it: its position is an array."""

    __slots__ = ("_cache", "offset", "_mask")

    def __init__(self, cache: KVCache, pos: mx.array, mask: mx.array) -> None:
        self._cache, self.offset, self._mask = cache, pos, mask

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        """Write the step's key and value at its slot; the whole buffer (the mask hides the
        slots past it)."""
        c, at = self._cache, self.offset[None]
        c.keys = mx.slice_update(c.keys, keys, at, axes=(2,))
        c.values = mx.slice_update(c.values, values, at, axes=(2,))
        return c.keys, c.values  # no slice: every node is host time on a host-bound GPU

    def make_mask(self, n: int, return_array: bool = False, window_size: int | None = None) -> mx.array:
        """The slots the step may see: those up to its own (mlx-lm's create_attention_mask)."""
        return self._mask


class FollowRate:
    """Per draft source, how often its round was followed by another round (an exponential
    average over about its last 4 rounds): the step is queued while that is below 1/2, where
    what it saves (a step's restart) outweighs what it costs (a forward more)."""

    ALPHA = 0.25

    def __init__(self) -> None:
        self.rate: dict[str, float] = {}

    def queues(self, source: str) -> bool:
        return self.rate.get(source, 0.0) < 0.5

    def observe(self, source: str, followed: bool) -> None:
        r = self.rate.get(source, 0.0)
        self.rate[source] = r + self.ALPHA * (float(followed) - r)


def why_not(model: Any, cache: list[Any], s: Settings, spmd: Any) -> str | None:
    """Why the step after a round cannot be queued before its read here, or None."""
    if not s.overlap_round:
        return "overlap_round is off"
    if s.traced:
        return "a traced round ends in barriers"
    if not s.bonus:
        return "without the bonus token a round that keeps every draft feeds no token"
    if spmd is not None:
        return "a sharded target agrees its tokens on the host"
    kind = getattr(model, "model_type", None)
    if kind not in SUPPORTED:
        return f"model type {kind!r} was not checked for an array position"
    if not cache or any(type(c) is not KVCache for c in cache):
        return "the cache is not mlx-lm's plain KVCache"
    return None


def queued_attention(s: Settings) -> str:
    """The queued step's attention: "fused" or "plain" where `verify_attention` names one;
    under "auto" fused on every backend. On CUDA its one-row kernel takes no mask, so the call
    goes to cuDNN, and that measured cheaper than the plain one on the H200 (run 12); Metal's
    one-row kernel takes the mask; the CPU's fused call is the same maths."""
    return "fused" if s.verify_attention == "auto" else s.verify_attention


def queue_step(model: Any, cache: list[Any], token: mx.array, n: mx.array, base: int,
               vocab: int, attention: str = "fused") -> mx.array | None:  # fmt: skip
    """The logits [1, vocab] of `token` fed at position base + n (lazy), or None where the
    buffer has no slot past the round's last (it grows only by a host-sized write).

    The caches' host offsets stay where the round left them (base + k, its last draft's slot
    + 1); `adopt` sets them after the read."""
    need = cache[0].offset + 1  # the round's slots and one more (all drafts kept)
    if any(c.keys is None or c.keys.shape[2] < need for c in cache):
        return None
    width = cache[0].keys.shape[2]  # the whole buffer: a shape that repeats
    pos = (n + base).astype(mx.int32)
    dtype = cache[0].keys.dtype
    seen = (mx.arange(width) <= pos).reshape(1, 1, 1, width)
    mask = mx.where(seen, mx.array(0.0, dtype), mx.array(mx.finfo(dtype).min, dtype))
    views = [_SlotView(c, pos, mask) for c in cache]
    with one_row_plain(model) if attention == "plain" else contextlib.nullcontext():
        out = model(token.reshape(1, 1).astype(mx.uint32), cache=views)
    return out[0, -1:, :vocab] if out.shape[-1] != vocab else out[0, -1:]


def adopt(held: list[int], cache: list[Any], seq: list[int]) -> None:
    """After the read: the target's cache, rewound to seq[:-1] (`held` its token list), now
    holds seq[-1] too, which the queued step fed at the slot after."""
    if len(held) == len(seq):  # the round kept that token's slot already (the same token)
        return
    assert len(held) == len(seq) - 1 and cache[0].offset == len(held), "cache and list disagree"
    for c in cache:
        c.offset += 1
    held.append(seq[-1])
