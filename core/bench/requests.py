"""One benchmark request from an empty cache, and what a row records from it.

Every request resets the engine first so it prefills the prompt like every other (the seed's
protocol); timed and traced requests of a setting add to the same `BenchResult`.
"""

from __future__ import annotations

import statistics
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.bench.errors import BenchCancelled
from core.bench.results import BenchResult, output_sha
from core.bench.texts import encode_origins
from core.events import PHASES, RoundEvent, RunSummary
from core.primitives.acceptance import PositionTally
from core.settings import Settings

MIN_STEPS = 16  # plain steps a request needs before its median step speaks for its host


@dataclass
class Request:
    """One request's summary and the per-round tallies the summary does not keep."""

    summary: RunSummary | None = None
    kernels: Counter[str] = field(default_factory=Counter)
    positions: PositionTally = field(default_factory=PositionTally)
    sources: dict[str, PositionTally] = field(default_factory=dict)  # per draft source
    rounds: list[RoundEvent] = field(default_factory=list)
    # source ("none": a plain target step) -> k proposed -> rounds: what the prediction prices
    proposals: dict[str, Counter[int]] = field(default_factory=dict)
    steps_s: list[float] = field(default_factory=list)  # each plain single-row step's seconds
    origins: list[str] = field(default_factory=list)  # each committed token's origin, in order
    # Sum over the positions where a draft was judged of TV(pi, p): how far the distributions
    # the tokens were drawn from moved from the target's (a target step moves nothing).
    tv_moved: float = 0.0

    def add(self, ev: RoundEvent, keep: bool) -> None:
        """Count one round (kernels of speculative rounds only); `keep` holds it for a trace."""
        if keep:
            self.rounds.append(ev)
        self.origins.extend(t.origin for t in ev.tokens)
        if ev.proposed and ev.kernel:
            self.kernels[ev.kernel] += 1
        self.positions.observe(ev.proposed, ev.accepted)
        if ev.source:
            self.sources.setdefault(ev.source, PositionTally()).observe(ev.proposed, ev.accepted)
        self.proposals.setdefault(ev.source or "none", Counter())[ev.proposed] += 1
        if not ev.proposed and ev.rows == 1:
            self.steps_s.append(ev.timings.total)
        if ev.proposed and ev.tv is not None:
            self.tv_moved += ev.tv * min(ev.accepted + 1, ev.proposed)


def run_request(
    engine: Any,
    prompt_ids: Sequence[int],
    s: Settings,
    cancel: threading.Event | None,
    keep_rounds: bool = False,
) -> Request:
    """One request from an empty cache, so it prefills the prompt like every other."""
    engine.reset()
    req = Request()
    for item in engine.generate(list(prompt_ids), s, cancel=cancel):
        if isinstance(item, RunSummary):
            req.summary = item
        else:
            req.add(item, keep_rounds)
    if req.summary is None or req.summary.stop_reason == "cancelled":
        raise BenchCancelled("The benchmark was cancelled before it finished.")
    return req


def record_timed(
    r: BenchResult, req: Request, seed: int, keep_output: bool, invocation: int = 0
) -> None:
    """Add a timed request to its row; `keep_output` keeps its tokens for quality checks.
    Every timed text is kept with its tokens' origins (`r.texts`), for the reading page."""
    s = req.summary
    assert s is not None
    r.e2e_s.append(s.e2e_s)
    # The request's own host speed: its median plain step (None with too few to say), so a
    # report can divide out a slow spell that shifted the whole request (render.py's
    # never-slower-normalized).
    r.step_ms.append(statistics.median(req.steps_s) * 1e3 if len(req.steps_s) >= MIN_STEPS else None)
    r.output_sha.append(output_sha(s.token_ids))
    r.ttft_all_s.append(s.ttft_s)
    r.decode_all_tok_s.append(s.decode_tok_s)
    r.rounds.append(s.rounds)
    r.tokens.append(s.tokens)
    r.positions.merge(req.positions)
    for name, tally in req.sources.items():
        r.sources.setdefault(name, PositionTally()).merge(tally)
    # The engine alone knows which source-less rounds ran in speculative mode.
    r.plain_steps += int(s.per_source.get("none", {}).get("rounds", 0))
    for name, v in s.per_source.items():  # the measured guard's decisions, per request
        if "measured_tok_s" in v:
            # earlier_rounds: what the engine's guard carried in from the row's requests before
            # plan_rounds: its rounds left out for building an attention plan (core/cost/guard.py)
            # measured_rounds: its rounds in the request; stops, refused: its stops in the
            # request, and the offers it made while stopped; cost_scale: its policy's
            # observed/calibrated cost of a plain step and of a drafted round at the end
            g = r.guard.setdefault(name, {"measured_tok_s": [], "vs_target": [], "guard": [],
                                          "earlier_rounds": [], "plan_rounds": [],
                                          "measured_rounds": [], "stops": [],
                                          "refused": [], "cost_scale": []})
            for key in g:
                g[key].append(v.get(key))
    r.kernels.update(req.kernels)
    for name, ks in req.proposals.items():
        r.proposals.setdefault(name, Counter()).update(ks)
    if s.mean_tv is not None:
        r.mean_tvs.append(s.mean_tv)
    if r.settings.get("mode") != "draft-only" and s.tokens:  # draft-only's is not measured
        r.tv_per_tokens.append(req.tv_moved / s.tokens)
    if s.fallback_reason:
        r.fallback_reason = s.fallback_reason
    # the step that ran (a stand-in summary without one: the eager default)
    r.step, r.graphs = getattr(s, "step", r.step), getattr(s, "graphs", r.graphs)
    r.eager_because = dict(getattr(s, "eager_because", r.eager_because))
    if keep_output:
        r.outputs[seed] = list(s.token_ids)
    r.last_outputs[seed] = list(s.token_ids)
    # The origins line up with the ids (the summary's ids are the rounds' tokens in order);
    # a request whose rounds were not all seen keeps its ids without origins.
    origins = encode_origins(req.origins) if len(req.origins) == len(s.token_ids) else ""
    r.texts.keep(seed, invocation, s.token_ids, origins)


def record_traced(
    r: BenchResult,
    engine: Any,
    prompt_ids: Sequence[int],
    s: Settings,
    untraced_e2e_s: float,
    cancel: threading.Event | None,
) -> None:
    """Run `s` traced; its E2E against the untraced run of the same seed just before is one
    overhead sample. The first traced request of a setting gives its phase split and trace."""
    req = run_request(engine, prompt_ids, s.replace(traced=True), cancel, True)
    assert req.summary is not None
    r.traced_ratios.append(req.summary.e2e_s / untraced_e2e_s)
    if r.phase_ms is not None:
        return
    r.traced_e2e_s = req.summary.e2e_s
    r.phase_ms = {p: req.summary.phase_s.get(p, 0.0) * 1e3 for p in PHASES}
    r.trace = [round_trace(ev) for ev in req.rounds]
    r.traced_rounds, r.traced_summary = list(req.rounds), req.summary
    in_rounds = sum(ev.timings.total for ev in req.rounds)
    r.outside_rounds_ms = max(req.summary.e2e_s - in_rounds, 0.0) * 1e3
    if not r.kernels:  # no speculative round: the kernel of its single-row forwards
        r.kernels.update(ev.kernel for ev in req.rounds if ev.kernel)


def round_trace(ev: RoundEvent) -> dict[str, Any]:
    """One round of the JSON trace: its shape and its phase times in ms."""
    ms = ev.timings.as_ms()
    return {
        "rows": ev.rows,
        "proposed": ev.proposed,
        "accepted": ev.accepted,
        "tokens": len(ev.tokens),
        "context": ev.context,
        "kernel": ev.kernel,
        "source": ev.source,
        **{f"{p}_ms": round(ms[p], 4) for p in (*PHASES, "total")},
    }
