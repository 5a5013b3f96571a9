"""What a round works on, handed to the round modules instead of the engine.

core/decode/speculative.py and core/decode/single.py run the rounds; the engine
(core/decode/engine.py) owns the models, the drafters, the policies and the measured guards.
A round reads them through two objects the engine builds, so it never reaches into the
engine:
- `RoundKit`, one round's tools: the models with their caches, the vocabulary, the EOS ids,
  the clock, and the engine's kernel names, agreement across ranks and cost curve;
- `RunState`, one generate() call: the committed sequence, the totals, where settings and
  cancel come from, how the run ends (`stop`, `fallback`), the engine's planning services
  (bound when the run starts, so a test that replaces one on the engine sees every round use
  it), and the loop control that lives from one stretch of rounds to the next (a handed-off
  plan, the round whose pipeline break the next step pays, the sources past their first
  catch-up, the measured guard of each settings).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx

from core.cost.guard import NULL_GUARD, Guard
from core.cost.policy import Policy
from core.decode.run_totals import RunTotals
from core.dispatch.patches import verification_patches
from core.drafting.plan import Plan
from core.events import RoundEvent
from core.primitives.cached_model import CachedModel
from core.primitives.compiled import bucket
from core.primitives.sampling import LogitsConfig
from core.settings import Settings


def logits_config(s: Settings) -> LogitsConfig:
    """The logits processing these settings ask for (greedy: temperature 0 for both models)."""
    return LogitsConfig(
        temperature=0.0 if s.greedy else s.temperature,
        top_p=s.top_p,
        repetition_penalty=s.repetition_penalty,
        repetition_context=s.repetition_context,
    )


@dataclass(slots=True)
class RoundKit:
    """One round's tools, read off the engine when the round or stretch starts."""

    target: CachedModel
    draft: CachedModel | None
    vocab_size: int
    eos_ids: frozenset[int]
    clock: Callable[[], float]
    kernel: Callable[[int], str]  # the predicted kernel family of a forward of that many rows
    agreed: Callable[[mx.array], mx.array]  # as rank 0 has it on a sharded target, else itself
    cost_curve: Any  # the VerifyCostCurve the dispatch reads (None before a calibration)

    def hit_eos(self, token: int, s: Settings) -> bool:
        return not s.ignore_eos and token in self.eos_ids

    def verify_context(self, s: Settings, rows: int) -> contextlib.AbstractContextManager[Any]:
        """What a target forward of `rows` rows enters: a verification's dispatch and attention
        overrides (on CUDA the fused attention at bucketed shapes, not a cuDNN plan built at
        each new KV length), or nothing where the compiled step runs it (its graph has its own
        kernels, traced outside any patch). A plain step that feeds several pending tokens
        enters it too."""
        t = self.target
        if t.step == "compiled" and bucket(rows) and t.compiled_forward():
            return contextlib.nullcontext()
        return verification_patches(t.model, s.dispatch, s.verify_attention, rows,
                                    curve=self.cost_curve)


@dataclass
class Handoff:
    """A plan that drafts, made after a stretch's last token while the next target step was
    queued: that step fed the last token, and its logits (`row0`, before any penalty) are
    the round's first verified row. `settings` are those it was planned with; `t_plan` when
    the plan began (the guard charges a round from there)."""

    plan: Plan
    row0: mx.array
    settings: Settings
    t_plan: float


@dataclass
class BrokeAfter:
    """The drafting round the next plain step follows: that step, read with no step queued
    behind it, is the round's pipeline break, charged to its source in the guard the round
    ran under and to its policy (`charge`)."""

    guard: Guard
    source: str
    policy: Policy
    proposed: int


@dataclass
class RunState:
    """One generate() call (built by `Engine._start`)."""

    kit: Callable[[], RoundKit]  # the tools as they are now (a first calibration sets a curve)
    seq: list[int]  # the conversation: the prompt, then each committed token
    n_prompt: int
    totals: RunTotals
    source: Callable[[], Settings]  # peeked at by a stretch: a key pressed mid-run applies next
    take: Callable[[], Settings]  # the loop's read per round (a source may hear what it took)
    cancel: threading.Event  # an Event nobody sets where the caller gave none
    t_start: float
    prefilled: int  # prompt tokens the run's model fed before its first round
    fallback: str | None  # why a speculative run runs target-only (the summary says it)
    # The engine's services, bound at the start of the run.
    # Before a stretch: the settings' drafters built and configured, and a first calibration
    # (a round's context long), none of it a round's cost.
    prepare: Callable[[Settings, int], None]
    plan: Callable[[Sequence[int], Settings, int, Guard], Plan]  # who drafts next, how many
    measured_guard: Callable[[Settings], Guard | None]  # the settings' kept guard, if judged
    observed_s: Callable[[RoundEvent], float | None]  # a round's seconds for its policy
    speculative_round: Callable[..., RoundEvent]
    single_model_rounds: Callable[..., Iterator[RoundEvent]]
    stop: str = "length"  # why the run ended: "length", "eos" or "cancelled"
    # Loop control, from one stretch of rounds to the next.
    handoff: Handoff | None = None  # a stretch's last plan that drafts, its step queued
    broke_after: BrokeAfter | None = None
    caught_up: set[str] = field(default_factory=set)  # sources past their first catch-up
    guard: Guard = NULL_GUARD  # the last measured guard: the one the summary reports
    begun: list[Guard] = field(default_factory=list)

    def guard_for(self, s: Settings) -> Guard:
        """The measured guard of the settings this round runs with (their key, so rates
        measured after a mid-run change go under the new settings), begun once per run;
        the null guard where rounds are not judged by this machine's clock."""
        guard = self.measured_guard(s)
        if guard is None:
            return NULL_GUARD
        if not any(g is guard for g in self.begun):
            guard.begin_run()
            self.begun.append(guard)
        self.guard = guard
        return guard

    def drop_handoff(self, round_s: Settings | None) -> None:
        """Forget a handed-off step no round will take: the next round's settings
        (`round_s`; None when it is not speculative) are not those it was planned with.
        The target's cache goes back to seq[:-1], so the last token is fed again."""
        h, seq = self.handoff, self.seq
        if h is not None and (round_s is None or h.settings != round_s):
            self.handoff = None
            self.kit().target.rewind(seq[:-1], max(len(seq) - 2, 0))
