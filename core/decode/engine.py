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

What the engine keeps across runs sits in its own modules: the pair's caches and drafters
(core/decode/caches.py), the draft sources (core/decode/sources.py), the k policies and the
measured guards (core/cost/policy_memory.py, guard_memory.py). `generate` reads as the loop;
the rounds run in core/decode/speculative.py and single.py on the RunState it builds.
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

from core.cost.guard import Guard, Prior, RateGuard
from core.cost.guard_memory import GuardMemory, source_prior
from core.cost.policy import Policy, make_policy
from core.cost.policy_memory import PolicyMemory
from core.decode.caches import PairCaches
from core.decode.run_state import RoundKit, RunState
from core.decode.run_totals import RunTotals
from core.decode.single import PipelinedSteps
from core.decode.sources import DraftSources
from core.decode.speculative import drafting_rounds, speculative_round
from core.dispatch.curve import run_step
from core.dispatch.curve_cache import curve_missing, curve_wanted
from core.dispatch.kernels import KernelNames
from core.drafting.base import Drafter
from core.drafting.plan import Plan, plan_round
from core.errors import UserError
from core.events import RoundEvent, RunSummary
from core.primitives.cached_model import CachedModel
from core.settings import MAX_K, Settings

Item = RoundEvent | RunSummary


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
        self._kernel = KernelNames(predictor)  # rows -> predicted kernel family
        self.cost_curve: Any | None = None
        self.caches = PairCaches(target, draft)
        self.sources = DraftSources(self.caches, vocab_size, speculation_ok=speculation_ok,
                                    speculation_reason=speculation_reason)
        # The model source's verdict, which the app shows for the pair as loaded.
        self.speculation_reason = self.sources.target_reason or self.sources.draft_reason
        self.speculation_ok = self.speculation_reason is None
        self._policies = PolicyMemory()  # per draft source
        # The measured guard per settings (guard_key), kept across requests and turns: a
        # second request starts from what the first measured (core/cost/guard.py).
        self._guards = GuardMemory()
        # core.runtime.distributed.Spmd when the target is sharded over ranks that each run
        # this loop: they then follow rank 0's drafts and decisions, and nothing is decided
        # from a clock.
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
        run = self._start(prompt_ids, settings, cancel, settings_source)
        seq, totals, key = run.seq, run.totals, mx.random.key(settings.seed)
        while True:
            s = run.take()
            self._use_step(s)
            if run.cancel.is_set():
                run.stop = "cancelled"
                break
            remaining = s.max_tokens - len(totals.tokens)
            if remaining <= 0:
                break
            mode = self._mode(s, run)
            run.drop_handoff(s if mode == "speculative" else None)  # its round will not come
            # A greedy round draws nothing: no key split (nor in mlx-lm's loop).
            key, round_key = (key, key) if s.greedy else mx.random.split(key)
            if mode == "speculative":
                events = drafting_rounds(run, seq, s, round_key, remaining)
            else:
                events = self._single_model_rounds(
                    seq, s, mode, round_key, totals.rounds, remaining, run.source, run.cancel
                )
            for ev in events:
                totals.add(ev, time.perf_counter(), speculative=mode == "speculative")
                yield ev
            if not s.ignore_eos and totals.tokens and totals.tokens[-1] in self.eos_ids:
                run.stop = "eos"
                break
        self._settle(seq)
        yield self._summary(run, s)

    def _start(self, prompt_ids: Sequence[int], settings: Settings,
               cancel: threading.Event | None,
               settings_source: Callable[[], Settings] | None) -> RunState:
        """The run set up before its first round: what it cannot do refused in a sentence
        (not a half run), its model prefilled, and the RunState its rounds work on, with the
        engine's services bound now (a test that replaces one sees every round use it)."""
        if not prompt_ids:
            raise UserError("The prompt is empty: there is nothing to continue.")
        t_start = time.perf_counter()
        # Asked before any work, so an unknown source is a sentence, not a half run.
        s = settings
        fallback = self.unavailable_reason(s.draft_source) if s.mode == "speculative" else None
        if s.mode == "draft-only" and self._draft is None:
            raise UserError("Draft-only mode needs a draft model; load one with --draft.")
        cancel = threading.Event() if cancel is None else cancel  # one nobody sets
        seq = list(prompt_ids)
        # A speculative drafter catches up in its first round that drafts: the cost-aware
        # policy may never draft here (on the CPU it does not), and then the draft's prefill
        # would only double the time to the first token.
        prefilled = self._prefill(seq, s, s.mode == "draft-only", cancel)
        source = settings_source or (lambda: s)
        # A source may ask to hear which settings the loop takes for its next rounds (the app
        # records a run's settings per round: tui.settings_watch.SettingsWatch); other reads
        # (a stretch's, between its steps) only peek.
        taken = getattr(settings_source, "taken", None)

        def take() -> Settings:
            now = source()
            if taken is not None:
                taken(now)
            return now

        return RunState(
            kit=self._kit, seq=seq, n_prompt=len(seq), totals=RunTotals(), source=source,
            take=take, cancel=cancel, t_start=t_start, prefilled=prefilled, fallback=fallback,
            prepare=self._prepare, plan=self._plan, measured_guard=self._measured_guard,
            observed_s=self._observed_s, speculative_round=self._speculative_round,
            single_model_rounds=self._single_model_rounds,
        )

    def _mode(self, s: Settings, run: RunState) -> str:
        """The mode the next rounds run: a speculative one whose source cannot run here is
        target-only (why: the run's `fallback`), a draft-only one without a draft model too."""
        if s.mode == "speculative" and (why := self.unavailable_reason(s.draft_source)):
            run.fallback = why
            return "target-only"
        if s.mode == "draft-only" and self._draft is None:
            return "target-only"
        return s.mode

    def _summary(self, run: RunState, s: Settings) -> RunSummary:
        """The run's RunSummary: its totals, each source's policy and the last measured guard
        as they ended, and the step the models ran (`s`: the settings of its last round)."""
        totals = run.totals
        e2e = time.perf_counter() - run.t_start
        prefilled = max(run.prefilled, totals.draft_catch_up)  # the larger of the two catch-ups
        totals.policies = self._policies.all()
        summary = totals.summary(s, run.n_prompt, prefilled, e2e, run.t_start, run.stop,
                                 run.fallback, self.models, guard=run.guard)
        return dataclasses.replace(summary, **self.step_report())

    # -- what the rounds are handed (tests replace these on an engine) ----------------------

    def _kit(self) -> RoundKit:
        """One round's tools as they are now (core/decode/run_state.py)."""
        return RoundKit(self._target, self._draft, self.vocab_size, self.eos_ids, self._clock,
                        self._kernel, self._agreed, self.cost_curve)

    def _speculative_round(
        self, seq: list[int], s: Settings, k: int, key: mx.array, index: int, drafter: Drafter,
        row0: mx.array | None = None,
    ) -> RoundEvent:
        """One speculative round (core/decode/speculative.py); `row0`: a stretch's handoff."""
        return speculative_round(self._kit(), seq, s, k, key, index, drafter, row0)

    def _single_model_rounds(
        self, seq: list[int], s: Settings, mode: str, key: mx.array, index: int, budget: int,
        source: Callable[[], Settings], cancel: threading.Event,
        stop_after: Callable[[mx.array], bool] | None = None,
    ) -> Iterator[RoundEvent]:
        """One token per round from one model, pipelined (core/decode/single.py)."""
        loop = PipelinedSteps(self._kit(), s, mode, budget, source, cancel)
        return loop.rounds(seq, key, index, stop_after)

    def _plan(self, seq: Sequence[int], s: Settings, remaining: int, guard: Guard) -> Plan:
        """Who drafts after `seq`, how many (core.drafting.plan); host work only. A measured
        guard asks no source measured slower than target steps, and measures the target arm
        first when it has no evidence yet."""
        if guard.target_probe_due():
            return Plan()
        cap = max(min(MAX_K, remaining - 1 if s.bonus else remaining), 0)  # drafts usable
        return plan_round(self.drafter(s.draft_source), self.drafter,
                          lambda d: self._policy_for(s, len(seq), d), seq, cap,
                          guard.asks, guard.rank)

    def _policy_for(self, s: Settings, context: int, drafter: Drafter) -> Policy:
        """The policy these settings name for this source, kept across rounds and chat turns
        until a setting it depends on changes (core/cost/policy_memory.py)."""

        def make() -> Policy:
            price, view = None, self.cost_curve
            if s.policy == "cost-aware":
                self._ensure_curve(s, context)
                # priced as this run drafts and accepts: sampled steps cost more than greedy
                view = self.cost_curve.for_sampling(s.greedy)
                price = drafter.price(view)
            return make_policy(s, view, price, copies=drafter.copies)

        return self._policies.get(s, drafter.name, make)

    def _prepare(self, s: Settings, context: int) -> None:
        """Before a stretch of speculative rounds: the source built and every drafter
        configured (core/decode/sources.py), and a first calibration (no round's cost)."""
        self.sources.configure(s)
        if self.needs_curve(s):
            self._ensure_curve(s, context)
        self._use_step(s)  # step auto decides by the curve just measured

    def _measured_guard(self, s: Settings) -> RateGuard | None:
        """The kept guard of these settings (`guard_for`) for the cost-aware policy, the one
        that promises speed; None where no clock of this machine judges rounds: another
        machine's curve, or a sharded target (every rank takes rank 0's decisions)."""
        if s.policy != "cost-aware" or not self._clock_judges():
            return None
        return self.guard_for(s)

    def _observed_s(self, ev: RoundEvent) -> float | None:
        """A round's seconds for its policy; none under another machine's curve, or on a sharded
        target, where each rank's clock differs and k must not (priced from the curve alone)."""
        return ev.timings.total if self._clock_judges() else None

    def _clock_judges(self) -> bool:
        """Whether this machine's clock judges rounds: its own curve, an unsharded target."""
        return self.spmd is None and self._observe_times

    def _agreed(self, x: mx.array) -> mx.array:
        """`x` as rank 0 has it, on every rank of a sharded target (lazy: no sync); else `x`."""
        return x if self.spmd is None else self.spmd.agree(x)

    def _use_step(self, s: Settings) -> None:
        """Each model runs the step `s` names (core/dispatch/curve.py `run_step`: auto by the
        curve); a sharded target runs eager (its collectives are not traced)."""
        self.caches.use_step("eager" if self.spmd is not None
                             else run_step(s.step, self.cost_curve))

    def _ensure_curve(self, s: Settings, context: int) -> None:
        """Calibrate on first need (seconds on a GPU, ~30 s on a CPU; the round waits)."""
        if curve_missing(self.cost_curve, s):
            from core.dispatch.curve_cache import quick_curve

            self.set_cost_curve(quick_curve(self.target_model, self.draft_model, s, context))

    def _prefill(self, seq: list[int], s: Settings, draft_only: bool,
                 cancel: threading.Event | None = None) -> int:
        """The run's model brought to seq[:-1], every other cache rewound (caches.py)."""
        return self.caches.prefill(seq, s, draft_only, cancel or threading.Event())

    def _settle(self, seq: list[int]) -> None:
        """End of run: every cache holds at most seq[:-1] (the pipelined step may be ahead)."""
        self.caches.settle(seq)

    # -- what a caller asks between runs ----------------------------------------------------

    @property
    def _target(self) -> CachedModel:
        """The target with its cache (a round's kit hands it on)."""
        return self.caches.target

    @property
    def _draft(self) -> CachedModel | None:
        """The draft model with its cache, if one is loaded."""
        return self.caches.draft

    @property
    def target_model(self) -> nn.Module:
        """The target's mlx-lm module (for scoring text with the same weights)."""
        return self._target.model

    @property
    def draft_model(self) -> nn.Module | None:
        """The draft's mlx-lm module, if one is loaded (the bench calibrates its step)."""
        return self._draft.model if self._draft is not None else None

    def reset(self) -> None:
        """Forget every cache, every drafter's state and the policy's learning; not the
        measured guards (the pair's speed, not a request's state: `forget_guards`)."""
        self._policies.clear()
        self.caches.reset()

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
        return self.caches.state()

    def step_report(self) -> dict[str, Any]:
        """Which step the models ran, the graphs their compiled forwards traced, and why a
        model runs eager under a compiled step (core/decode/caches.py)."""
        return self.caches.step_report()

    def set_cost_curve(self, curve: Any, *, observed: bool = True) -> None:
        """A VerifyCostCurve for the cost-aware policy (core.dispatch.calibrate); observed=False
        for another machine's (bench --curve): priced from it alone, not by this one's rounds."""
        if curve is not None and self.spmd is not None:
            curve = self.spmd.agree_curve(curve)  # every rank prices with rank 0's numbers
        self.cost_curve = curve
        self._observe_times = observed

    def needs_curve(self, s: Settings) -> bool:
        """Whether a speculative run with `s` will stop to calibrate first (curve_cache
        `curve_wanted`). A caller with a progress display (the TUI) calibrates itself first;
        otherwise the round waits."""
        if s.mode != "speculative" or self.unavailable_reason(s.draft_source):
            return False
        return curve_wanted(self.cost_curve, s)

    def drafter(self, name: str) -> Drafter:
        """The draft source registered as `name`, built once per engine (it keeps its state).

        Raises DraftUnavailable when the source cannot run here; see `unavailable_reason`."""
        return self.sources.get(name)

    def unavailable_reason(self, source: str) -> str | None:
        """Why speculation with `source` falls back to target-only here, or None if it can run."""
        return self.sources.unavailable_reason(source)

    def policy_of(self, source: str) -> Policy:
        """The k policy this engine keeps for a draft source (the null policy, which drafts
        nothing, before its first round)."""
        return self._policies.of(source)
