"""The running totals of one generate() call and the RunSummary they become.

Per-position acceptance is counted once here (core.primitives.acceptance.PositionTally), overall and per
draft source, so the summary, the bench and the app read the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.cost.guard import NULL_GUARD, TARGET, Guard
from core.events import PHASES, RoundEvent, RunSummary
from core.primitives.acceptance import PositionTally
from core.settings import Settings


@dataclass
class RunTotals:
    """Running totals of one generate() call, which become its RunSummary."""

    rounds: int = 0
    tokens: list[int] = field(default_factory=list)
    positions: PositionTally = field(default_factory=PositionTally)
    by_source: dict[str, PositionTally] = field(default_factory=dict)
    speculative_steps: int = 0  # speculative-mode rounds that proposed nothing
    tv_sum: float = 0.0
    tv_count: int = 0
    draft_catch_up: int = 0  # tokens a drafter absorbed in its first drafting round
    phase: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    first_token_at: float | None = None
    first_round_tokens: int = 0  # committed by the round that brought the first token
    # Each source's k policy as the run ended (the engine's): a cost-aware one's cost scales
    # are reported, so a request whose copies stopped for a stalled round's scale (the lock-in
    # of docs/benchmarks/lookup/stall_replay.py) shows it without a trace.
    policies: dict[str, Any] = field(default_factory=dict)

    def per_source(self, guard: Guard = NULL_GUARD) -> dict[str, dict[str, Any]]:
        """The summary's per-source view; "none" counts speculative rounds with no proposal.
        Under a measured guard (core.cost.guard) each also carries its measured rate
        (`measured_tok_s`), a source its ratio to plain target steps (`vs_target`) and the
        decision (`guard`)."""
        out: dict[str, dict[str, Any]] = {n: t.summary() for n, t in self.by_source.items()}
        if out or self.speculative_steps:
            out["none"] = {"rounds": self.speculative_steps}
        for name, row in guard.report().items():  # the null guard's is empty
            out.setdefault("none" if name == TARGET else name, {"rounds": 0}).update(row)
        for name, policy in self.policies.items():
            scale = getattr(policy, "scale", None)  # [plain steps, drafted rounds]: observed
            if name in out and scale is not None:  # over calibrated seconds, an EMA
                out[name]["cost_scale"] = [float(x) for x in scale]
        return out

    def add(self, ev: RoundEvent, now: float, speculative: bool = False) -> None:
        self.rounds += 1
        if speculative and not ev.source:
            self.speculative_steps += 1
        self.tokens.extend(t.id for t in ev.tokens)
        if self.first_token_at is None and ev.tokens:
            self.first_token_at = now
            self.first_round_tokens = len(ev.tokens)
        for p in PHASES:
            self.phase[p] += getattr(ev.timings, p)
        if ev.source:
            self.by_source.setdefault(ev.source, PositionTally()).observe(ev.proposed, ev.accepted)
        if ev.proposed:
            self.positions.observe(ev.proposed, ev.accepted)
            if ev.tv is not None:
                decided = min(ev.accepted + 1, ev.proposed)
                self.tv_sum += ev.tv * decided
                self.tv_count += decided

    def summary(
        self,
        s: Settings,
        n_prompt: int,
        prefilled: int,
        e2e: float,
        t_start: float,
        stop: str,
        fallback: str | None,
        models: dict[str, Any] | None = None,
        guard: Guard = NULL_GUARD,
    ) -> RunSummary:
        """The RunSummary of a finished run (`fallback`: why it ran target-only; `models`:
        the loaded pair's identities, of which a target-only run names the target alone;
        `guard`: the last measured guard, whose decisions it reports)."""
        ttft = (self.first_token_at - t_start) if self.first_token_at else e2e
        n = len(self.tokens)
        # Decoding is timed from the end of the first token's round, so only the tokens of
        # later rounds count: counting that round's four tokens over the ~1 ms after it once
        # showed 3,000 tok/s. With no later round there is nothing to time: 0 (shown "-").
        decode_time = e2e - ttft
        later = n - self.first_round_tokens
        decode_tok_s = later / decode_time if later > 0 and decode_time > 0 else 0.0
        pos = self.positions
        mode = s.mode if fallback is None else "target-only"
        if models is not None and mode == "target-only":
            models = {**models, "draft": None}
        return RunSummary(
            mode=mode,
            tokens=n,
            rounds=self.rounds,
            prompt_tokens=n_prompt,
            prefill_tokens=prefilled,
            proposed=pos.proposed,
            accepted=pos.accepted,
            acceptance=pos.acceptance,
            per_position_acceptance=pos.reached_rates(),
            mean_accepted_length=pos.mean_accepted_length,
            e2e_s=e2e,
            ttft_s=ttft,
            decode_tok_s=decode_tok_s,
            phase_s=dict(self.phase),
            mean_tv=(self.tv_sum / self.tv_count) if self.tv_count else None,
            traced=s.traced,
            stop_reason=stop,
            token_ids=tuple(self.tokens),
            fallback_reason=fallback,
            per_source=self.per_source(guard),
            models=models,
        )
