"""The decode loop: target-only, draft-only and speculative rounds, one RoundEvent per round.

One loop feeds the TUI, the benchmark and the profile writer. Its discipline:
- every MLX call on the caller's thread (MLX streams are per thread);
- untraced rounds sync the host once (speculative: after acceptance; single-model modes are
  pipelined like mlx-lm's generate_step, the next token launched before the last is read);
- acceptance maths on the device (core.primitives.sampling), no Python loop over the vocabulary;
- each cache holds a known token list; after every round both are rewound (trimmed) to the
  longest prefix they share with the committed sequence minus its last token, the token the
  next round feeds. That one rule covers rejection, the bonus switch, EOS, cancellation and
  multi-turn reuse (a new turn keeps the common prefix and prefills only the rest).
Drafts come through one seam (core.drafting): a drafter proposes up to k tokens with their
draft distribution q (or none: deterministic), and the target verifies all of them plus one
bonus row in one forward pass. The round never asks who drafted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from core.cost.guard import Prior, RateGuard
from core.cost.guard_memory import GuardMemory, source_prior
from core.cost.policy import Policy, make_policy
from core.decode.run_state import NULL_GUARD, Guard, RoundKit, RunState
from core.decode.run_totals import RunTotals
from core.decode.single import PipelinedSteps
from core.decode.speculative import drafting_rounds, speculative_round
from core.dispatch.curve import run_step
from core.dispatch.curve_cache import curve_missing, curve_wanted
from core.dispatch.patches import draft_attention
from core.drafting import registry
from core.drafting.base import Drafter, DraftUnavailable
from core.drafting.plan import Plan, plan_round
from core.errors import UserError
from core.events import RoundEvent, RunSummary
from core.primitives.cached_model import CachedModel
from core.settings import MAX_K, Settings

Item = RoundEvent | RunSummary


def _untrimmable(model: nn.Module, role: str) -> str | None:
    """Why `model`'s cache cannot be rewound after rejected drafts, as a clause, or None."""
    from core.models import untrimmable_reason

    why = untrimmable_reason(model)
    return f"the {role} {why}" if why else None


class Engine:
    """Owns the target's cache, the draft sources, and runs the decode loop over them."""

    models: dict[str, Any] | None = None  # the pair's ModelIdentity per role (from_pair)

    def __init__(
        self,
        target: nn.Module,
        draft: nn.Module | None = None,
        *,
        vocab_size: int,
        eos_ids: Sequence[int] = (),
        predictor: Any | None = None,
        speculation_ok: bool = True,
        speculation_reason: str | None = None,
    ) -> None:
        self.vocab_size = vocab_size
        self.eos_ids = frozenset(eos_ids)
        self.predictor = predictor
        self._kernels: dict[int, str] = {}  # rows -> predicted kernel family (`_kernel`)
        self.cost_curve: Any | None = None
        self._target = CachedModel.fresh(target)
        # The draft model with its cache: shared by the model drafters and draft-only mode.
        self._draft = None if draft is None else CachedModel.fresh(draft, draft_attention(draft))
        self._drafters: dict[str, Drafter] = {}
        self._unavailable: dict[str, str] = {}  # source -> why it cannot draft here
        # Why nothing can speculate (the target's cache cannot be rewound), and why the draft
        # model cannot (sources that need no model still can).
        self._target_reason = _untrimmable(target, "target")
        if draft is None:
            self._draft_reason = speculation_reason or "no draft model is loaded"
        else:
            self._draft_reason = _untrimmable(draft, "draft") or (
                None if speculation_ok else speculation_reason or "the pair cannot speculate"
            )
        # The model source's verdict, which the app shows for the pair as loaded.
        self.speculation_reason = self._target_reason or self._draft_reason
        self.speculation_ok = self.speculation_reason is None
        self._policies: dict[str, tuple[tuple[Any, ...], Policy, Any]] = {}  # per draft source
        # The measured guard per settings (guard_key), kept across requests and turns: a
        # second request starts from what the first measured (core/cost/guard.py).
        self._guards = GuardMemory()
        # core.runtime.distributed.Spmd when the target is sharded over ranks that each run this loop:
        # they then follow rank 0's drafts and decisions, and nothing is decided from a clock.
        self.spmd: Any | None = None
        self._observe_times = True  # False: the curve is another machine's (set_cost_curve)
        self._clock = time.perf_counter  # what catch-ups are timed with (tests count with theirs)

    @classmethod
    def from_pair(cls, pair: Any) -> Engine:
        """Build from a core.models.ModelPair, with the kernel predictor for the target."""
        from core.dispatch import KernelPredictor
        from core.models.identify import pair_identities

        predictor = None
        with contextlib.suppress(Exception):  # prediction is informative, never required
            predictor = KernelPredictor(pair.target.model)
        engine = cls(
            pair.target.model,
            pair.draft.model if pair.draft is not None else None,
            vocab_size=pair.vocab_size,
            eos_ids=sorted(pair.eos_ids),
            predictor=predictor,
            speculation_ok=pair.speculation_ok,
            speculation_reason=pair.speculation_reason,
        )
        engine.models = pair_identities(pair)  # every RunSummary names them
        return engine

    @property
    def target_model(self) -> nn.Module:
        """The target's mlx-lm module (for scoring text with the same weights)."""
        return self._target.model

    @property
    def draft_model(self) -> nn.Module | None:
        """The draft's mlx-lm module, if one is loaded (the bench calibrates its step)."""
        return self._draft.model if self._draft is not None else None

    # -- state -----------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every cache, every drafter's state and the policy's learning; not the
        measured guards (the pair's speed, not a request's state: `forget_guards`)."""
        self._policies = {}
        old_target, old_draft = self._target, self._draft
        self._target = CachedModel.fresh(self._target.model)
        self._target.compiled = old_target.compiled  # its graphs stay valid for any cache
        if old_draft is not None:
            self._draft = CachedModel.fresh(old_draft.model, old_draft.multi_row)
            self._draft.compiled = old_draft.compiled
        self._drafters = {}

    def forget_guards(self) -> None:
        """Drop every measured guard: the next cost-aware request measures from the prior."""
        self._guards.clear()

    def guard_for(self, s: Settings) -> RateGuard:
        """The measured guard for these settings, kept across requests (core/cost/
        guard_memory.py), built with the calibration's prior: a source whose best round
        cannot beat a target step is not asked until a probe."""

        def prior(name: str) -> Prior | None:
            if self.cost_curve is None:
                return None
            return source_prior(lambda: self._policy_for(s, 16, self.drafter(name)))

        return self._guards.get(s, prior)

    def cache_state(self) -> dict[str, Any]:
        """Token lists and offsets of every cache (tests check they never disagree)."""
        out: dict[str, Any] = {
            "target_seq": list(self._target.seq), "target_offset": self._target.offset()
        }
        if self._draft is not None:
            out |= {"draft_seq": list(self._draft.seq), "draft_offset": self._draft.offset()}
        for name, d in self._drafters.items():
            out[f"drafter:{name}"] = d.state()
        return out

    def set_cost_curve(self, curve: Any, *, observed: bool = True) -> None:
        """A VerifyCostCurve for the cost-aware policy (core.dispatch.calibrate); observed=False
        for another machine's (bench --curve): priced from it alone, not by this one's rounds."""
        if curve is not None and self.spmd is not None:
            curve = self.spmd.agree_curve(curve)  # every rank prices with rank 0's numbers
        self.cost_curve = curve
        self._observe_times = observed

    def drafter(self, name: str) -> Drafter:
        """The draft source registered as `name`, built once per engine (it keeps its state).

        Raises DraftUnavailable when the source cannot run here; see `unavailable_reason`."""
        if name not in self._drafters:
            try:
                make = registry.factory(name)
            except KeyError:
                known = ", ".join(registry.names())
                raise UserError(f"Unknown draft source {name!r}; known: {known}.") from None
            res = registry.DraftResources(
                self._draft, self.vocab_size, self._draft_reason, source=self.drafter
            )
            self._drafters[name] = make(res)
        return self._drafters[name]

    def policy_of(self, source: str) -> Policy | None:
        """The k policy this engine keeps for a draft source (None before its first round)."""
        kept = self._policies.get(source)
        return kept[1] if kept is not None else None

    def unavailable_reason(self, source: str) -> str | None:
        """Why speculation with `source` falls back to target-only here, or None if it can run."""
        if self._target_reason is not None:
            return self._target_reason
        if source not in self._unavailable:
            try:
                self.drafter(source)
            except DraftUnavailable as exc:
                self._unavailable[source] = str(exc)
        return self._unavailable.get(source)

    # -- the loop ----------------------------------------------------------------------------

    def generate(
        self,
        prompt_ids: Sequence[int],
        settings: Settings,
        cancel: threading.Event | None = None,
        settings_source: Callable[[], Settings] | None = None,
    ) -> Iterator[Item]:
        """Yield one RoundEvent per round, then a RunSummary.

        `settings_source` is read once per round, so a key pressed mid-run applies from the
        next round; `cancel` is checked once per round and between prefill chunks, and leaves
        the caches consistent.
        """
        if not prompt_ids:
            raise UserError("The prompt is empty: there is nothing to continue.")
        t_start = time.perf_counter()
        s = settings
        source = settings_source or (lambda: settings)
        fallback = self._fallback_reason(s)
        if s.mode == "draft-only" and self._draft is None:
            raise UserError("Draft-only mode needs a draft model; load one with --draft.")
        seq = list(prompt_ids)
        n_prompt = len(seq)
        # A speculative drafter catches up in its first round that drafts (below): the
        # cost-aware policy may never draft here (on the CPU it does not), and then the
        # draft's prefill would only double the time to the first token.
        prefilled = self._prefill(seq, s, s.mode == "draft-only", cancel)  # Esc: between chunks
        totals = RunTotals()
        run = self._run_state(totals, source, cancel)
        key = mx.random.key(s.seed)
        stop = "length"

        # A source may ask to hear which settings the loop takes for its next rounds (the app
        # records a run's settings per round: tui.settings_watch.SettingsWatch); other reads only peek.
        taken = getattr(settings_source, "taken", None)
        while True:
            s = source()
            if taken is not None:
                taken(s)
            self._use_step(s)
            if cancel is not None and cancel.is_set():
                stop = "cancelled"
                break
            remaining = s.max_tokens - len(totals.tokens)
            if remaining <= 0:
                break
            mode = s.mode
            if mode == "speculative" and (why := self.unavailable_reason(s.draft_source)):
                mode, fallback = "target-only", why
            if mode == "draft-only" and self._draft is None:
                mode = "target-only"
            # A step handed to a round that will not come (another mode, other settings).
            run.drop_handoff(seq, s if mode == "speculative" else None)
            if s.greedy:  # a greedy round draws nothing: no key split (nor in mlx-lm's loop)
                round_key = key
            else:
                key, round_key = mx.random.split(key)
            if mode == "speculative":
                events = drafting_rounds(run, seq, s, round_key, remaining)
            else:
                events = self._single_model_rounds(
                    seq, s, mode, round_key, totals.rounds, remaining, source, cancel
                )
            for ev in events:
                totals.add(ev, time.perf_counter(), speculative=mode == "speculative")
                yield ev
            if self._hit_eos(totals.tokens, s):
                stop = "eos"
                break

        self._settle(seq)
        e2e = time.perf_counter() - t_start
        prefilled = max(prefilled, totals.draft_catch_up)  # the larger of the two catch-ups
        totals.policies = {name: kept[1] for name, kept in self._policies.items()}
        summary = totals.summary(s, n_prompt, prefilled, e2e, t_start, stop, fallback,
                                 self.models, guard=run.guard)
        yield dataclasses.replace(summary, **self.step_report())

    def _run_state(self, totals: RunTotals, source: Callable[[], Settings],
                   cancel: threading.Event | None) -> RunState:
        """What this run's rounds work on (core/decode/run_state.py): the engine's services
        bound now, so a test that replaces one on the engine sees every round use it."""
        return RunState(
            kit=self._kit, totals=totals, source=source, cancel=cancel,
            prepare=self._prepare, plan=self._plan, measured_guard=self._measured_guard,
            observed_s=self._observed_s, speculative_round=self._speculative_round,
            single_model_rounds=self._single_model_rounds,
        )

    def _kit(self) -> RoundKit:
        """One round's tools as they are now (core/decode/run_state.py)."""
        return RoundKit(self._target, self._draft, self.vocab_size, self.eos_ids, self._clock,
                        self._kernel, self._agreed, self.cost_curve)

    def _prepare(self, s: Settings, context: int) -> None:
        """Before a stretch of speculative rounds: the source built (a hybrid builds its
        parts), every drafter configured by its own settings, and a first calibration (no
        round's cost)."""
        self.drafter(s.draft_source)
        for d in list(self._drafters.values()):
            configure = getattr(d, "configure", None)
            if configure is not None:
                configure(s)
        if self.needs_curve(s):
            self._ensure_curve(s, context)
        self._use_step(s)  # step auto decides by the curve just measured

    def _use_step(self, s: Settings) -> None:
        """Each model runs the step `s` names (core/dispatch/curve.py `run_step`: auto by the
        curve); a sharded target runs eager (its collectives are not traced)."""
        step = "eager" if self.spmd is not None else run_step(s.step, self.cost_curve)
        for model in (self._target, self._draft):
            if model is not None:
                model.step = step

    def step_report(self) -> dict[str, Any]:
        """Which step the models ran, the graphs their compiled forwards traced, and why a
        model runs eager under a compiled step (its layout: compiled.supports)."""
        from core.primitives.compiled import supports

        models = {"target": self._target, "draft": self._draft}
        why = {role: supports(m.model) for role, m in models.items() if m is not None}
        step = self._target.step
        return {
            "step": step,
            "graphs": sum(m.graphs() for m in models.values() if m is not None),
            "eager_because": {r: w for r, w in why.items() if w} if step == "compiled" else {},
        }

    def _measured_guard(self, s: Settings) -> RateGuard | None:
        """The kept guard of these settings (`guard_for`) for the cost-aware policy, the one
        that promises speed; None where no clock of this machine judges rounds: another
        machine's curve, or a sharded target (every rank takes rank 0's decisions)."""
        if s.policy != "cost-aware" or self.spmd is not None or not self._observe_times:
            return None
        return self.guard_for(s)

    def _plan(self, seq: Sequence[int], s: Settings, remaining: int,
              guard: Guard = NULL_GUARD) -> Plan:
        """Who drafts after `seq`, how many (core.drafting.plan); host work only. A measured
        guard asks no source measured slower than target steps, and measures the target arm
        first when it has no evidence yet."""
        if guard.target_probe_due():
            return Plan()
        cap = max(min(MAX_K, remaining - 1 if s.bonus else remaining), 0)  # drafts usable
        return plan_round(self.drafter(s.draft_source), self.drafter,
                          lambda d: self._policy_for(s, len(seq), d), seq, cap,
                          guard.asks, guard.rank)

    def _observed_s(self, ev: RoundEvent) -> float | None:
        """A round's seconds for its policy; none under another machine's curve, or on a sharded
        target, where each rank's clock differs and k must not (priced from the curve alone)."""
        return ev.timings.total if self.spmd is None and self._observe_times else None

    def _agreed(self, x: mx.array) -> mx.array:
        """`x` as rank 0 has it, on every rank of a sharded target (lazy: no sync); else `x`."""
        return x if self.spmd is None else self.spmd.agree(x)

    def _policy_for(self, s: Settings, context: int, drafter: Drafter) -> Policy:
        """The policy these settings name for this source, kept across rounds and chat turns
        until a setting it depends on changes (an adaptive k keeps what it learnt from earlier
        messages). Each source has its own: a lookup's acceptance is not the model's."""
        kept = self._policies.get(drafter.name)
        if kept is not None and kept[2] is s:  # the same frozen Settings: no signature to build
            return kept[1]
        sig = (s.policy, s.k, s.k_min, s.k_max, s.accept_lo, s.accept_hi, s.ema_alpha, s.bonus,
               s.dispatch, s.step, s.draft_source, s.greedy)
        policy = kept[1] if kept is not None and kept[0] == sig else None
        if policy is None:
            price, view = None, self.cost_curve
            if s.policy == "cost-aware":
                self._ensure_curve(s, context)
                # priced as this run drafts and accepts: sampled steps cost more than greedy
                view = self.cost_curve.for_sampling(s.greedy)
                price = drafter.price(view)
            policy = make_policy(s, view, price, copies=drafter.copies)
        self._policies[drafter.name] = (sig, policy, s)
        return policy

    def needs_curve(self, s: Settings) -> bool:
        """Whether a speculative run with `s` will stop to calibrate first (curve_cache
        `curve_wanted`). A caller with a progress display (the TUI) calibrates itself first;
        otherwise the round waits."""
        if s.mode != "speculative" or self.unavailable_reason(s.draft_source):
            return False
        return curve_wanted(self.cost_curve, s)

    def _ensure_curve(self, s: Settings, context: int) -> None:
        """Calibrate on first need (seconds on a GPU, ~30 s on a CPU; the round waits)."""
        if curve_missing(self.cost_curve, s):
            from core.dispatch.curve_cache import quick_curve

            draft = self._draft.model if self._draft is not None else None
            self.set_cost_curve(quick_curve(self._target.model, draft, s, context))

    def _fallback_reason(self, s: Settings) -> str | None:
        """Checked before any work, so an unknown source is a sentence, not a half run."""
        return self.unavailable_reason(s.draft_source) if s.mode == "speculative" else None

    def _hit_eos(self, tokens: list[int], s: Settings) -> bool:
        return not s.ignore_eos and bool(tokens) and tokens[-1] in self.eos_ids

    def _prefill(self, seq: list[int], s: Settings, draft_only: bool,
                 cancel: threading.Event | None = None) -> int:
        """Bring the run's model to seq[:-1], keeping what its cache already shares with it
        (or its chunks before a cancel: the run then ends "cancelled" before its first round).

        Every other cache and drafter is still rewound (a trim, no forward): its token list
        must stay a prefix of this conversation, because a mid-run switch feeds it only the
        tokens past its list.
        """
        self._rewind_all(seq, 0)
        want = seq[:-1]
        used = self._draft if draft_only else self._target
        assert used is not None
        return used.prefill(want[len(used.seq) :], s.prefill_chunk, cancel)

    def _settle(self, seq: list[int]) -> None:
        """End of run: every cache holds at most seq[:-1] (the pipelined step may be ahead)."""
        self._rewind_all(seq, max(len(seq) - MAX_K - 3, 0))

    def _rewind_all(self, committed: Sequence[int], start: int) -> None:
        """Every cache to at most committed[:-1], every drafter to what agrees with it."""
        self._target.rewind(committed[:-1], start)
        if self._draft is not None:
            self._draft.rewind(committed[:-1], start)
        for d in self._drafters.values():
            d.rewind(committed, start)

    # -- rounds ------------------------------------------------------------------------------

    def _kernel(self, rows: int) -> str:
        """The predicted kernel family for `rows`, asked of the predictor once per row count
        (the dispatch rules are fixed for the loaded model: a round reads a dict)."""
        known = self._kernels.get(rows)
        if known is not None:
            return known
        family = ""
        if self.predictor is not None:
            try:
                family = str(self.predictor.family(rows))
            except Exception:  # prediction must never break decoding
                family = ""
        self._kernels[rows] = family
        return family

    def _speculative_round(
        self, seq: list[int], s: Settings, k: int, key: mx.array, index: int, drafter: Drafter,
        row0: mx.array | None = None,
    ) -> RoundEvent:
        """One speculative round (core/decode/speculative.py); `row0`: a stretch's handoff."""
        return speculative_round(self._kit(), seq, s, k, key, index, drafter, row0)

    def _single_model_rounds(
        self, seq: list[int], s: Settings, mode: str, key: mx.array, index: int, budget: int,
        source: Callable[[], Settings], cancel: threading.Event | None,
        stop_after: Callable[[mx.array], bool] | None = None,
    ) -> Iterator[RoundEvent]:
        """One token per round from one model, pipelined (core/decode/single.py)."""
        loop = PipelinedSteps(self._kit(), s, mode, budget, source, cancel)
        return loop.rounds(seq, key, index, stop_after)
