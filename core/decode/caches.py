"""The pair's caches, kept to the conversation: the target's and the draft's (each model with
its prompt cache and the tokens it holds) and every drafter's state.

Between runs each holds a prefix of the conversation (the rule of core/decode/engine.py): a
run brings its own model to seq[:-1] (`prefill`) and rewinds every other one (a trim, no
forward), because a mid-run switch feeds a model only the tokens past its list; it ends with
each at most seq[:-1] (`settle`), since a pipelined step may have run ahead. Which forward
the models run (eager or compiled) is set on them here, and reported from here.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import mlx.nn as nn

from core.dispatch.patches import draft_attention
from core.drafting.base import Drafter
from core.primitives.cached_model import CachedModel
from core.settings import MAX_K, Settings


def _renewed(m: CachedModel) -> CachedModel:
    """`m`'s model with an empty cache; its compiled graphs stay valid for any cache."""
    fresh = CachedModel.fresh(m.model, m.multi_row)
    fresh.compiled = m.compiled
    return fresh


class PairCaches:
    """The target and the draft with their caches, and the drafters that follow them."""

    def __init__(self, target: nn.Module, draft: nn.Module | None) -> None:
        self.target = CachedModel.fresh(target)
        # The draft model with its cache: shared by the model drafters and draft-only mode.
        self.draft = None if draft is None else CachedModel.fresh(draft, draft_attention(draft))
        self.drafters: dict[str, Drafter] = {}  # by source name (core/decode/sources.py)
        self.models = self._loaded()

    def _loaded(self) -> tuple[CachedModel, ...]:
        """The models every cache operation goes over: the target, then the draft if loaded."""
        return (self.target,) if self.draft is None else (self.target, self.draft)

    def reset(self) -> None:
        """Every cache emptied and every drafter dropped (rebuilt on its next use)."""
        self.target = _renewed(self.target)
        self.draft = None if self.draft is None else _renewed(self.draft)
        self.models = self._loaded()
        self.drafters = {}

    def prefill(self, seq: list[int], s: Settings, draft_only: bool,
                cancel: threading.Event) -> int:
        """Bring the run's model to seq[:-1], keeping what its cache already shares with it
        (or its chunks before a cancel: the run then ends "cancelled" before its first round);
        every other cache and drafter rewound to what agrees with `seq`. Tokens fed."""
        self.rewind(seq, 0)
        want = seq[:-1]
        used = self.draft if draft_only else self.target
        assert used is not None, "a draft-only run is refused without a draft model"
        return used.prefill(want[len(used.seq) :], s.prefill_chunk, cancel)

    def settle(self, seq: list[int]) -> None:
        """End of run: every cache holds at most seq[:-1] (the pipelined step may be ahead)."""
        self.rewind(seq, max(len(seq) - MAX_K - 3, 0))

    def rewind(self, committed: Sequence[int], start: int) -> None:
        """Every cache to at most committed[:-1], every drafter to what agrees with it; the
        lists are compared from `start` on (what before it is known to agree)."""
        for m in self.models:
            m.rewind(committed[:-1], start)
        for d in self.drafters.values():
            d.rewind(committed, start)

    def state(self) -> dict[str, Any]:
        """Token lists and offsets of every cache (tests check they never disagree)."""
        out: dict[str, Any] = {}
        for role, m in zip(("target", "draft"), self.models, strict=False):
            out |= {f"{role}_seq": list(m.seq), f"{role}_offset": m.offset()}
        for name, d in self.drafters.items():
            out[f"drafter:{name}"] = d.state()
        return out

    def use_step(self, step: str) -> None:
        """Each model runs `step` (eager or compiled) from its next forward."""
        for m in self.models:
            m.step = step

    def step_report(self) -> dict[str, Any]:
        """Which step the models ran, the graphs their compiled forwards traced, and why a
        model runs eager under a compiled step (its layout: compiled.supports)."""
        from core.primitives.compiled import supports

        why = {role: supports(m.model) for role, m in zip(("target", "draft"), self.models,
                                                          strict=False)}
        step = self.target.step
        return {
            "step": step,
            "graphs": sum(m.graphs() for m in self.models),
            "eager_because": {r: w for r, w in why.items() if w} if step == "compiled" else {},
        }
