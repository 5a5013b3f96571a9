"""What a benchmark run measured: the rows it ran, their raw timings, and the derived numbers.

`BenchResult.to_dict` is the JSON contract row (docs/CONTRACTS.md): extend it, never rename a
key.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from core.bench.fmt import pct, ratio, secs
from core.bench.texts import TimedTexts, dumps
from core.events import RoundEvent, RunSummary
from core.identity import identities_to_dict
from core.primitives.acceptance import PositionTally
from core.settings import Settings


def describe(s: Settings) -> str:
    """A seed-table label: 'Target-only', 'Fixed-8, TV=0.75', 'Fixed-4, lossless, no bonus'."""
    if s.mode == "target-only":
        label = "Target-only"
    elif s.mode == "draft-only":
        label = "Draft-only"
    else:
        policy = f"Fixed-{s.k}" if s.policy == "fixed" else f"{s.policy} {s.k_min}..{s.k_max}"
        rule = s.effective_rule
        rule_text = f"TV={s.tv_budget:g}" if rule == "mentored" else rule
        label = f"{policy}, {rule_text}"
        if not s.bonus:
            label += ", no bonus"
        if s.dispatch != "auto":
            label += f", {s.dispatch}"
        if s.verify_attention != "auto":
            label += f", {s.verify_attention} attention"
        if s.step != "eager":
            label += f", {s.step} step"
        if s.draft_source != Settings.draft_source:
            label += f", {s.draft_source} drafts"
            if s.lookup_min_match != Settings.lookup_min_match:
                label += f" (match {s.lookup_min_match}+)"
    if s.greedy and s.mode != "speculative":
        label += ", greedy"
    return label


@dataclass(frozen=True)
class BenchSetting:
    """One row of the table: a name scripts can key on, and the settings it runs."""

    name: str
    settings: Settings


SettingLike = Settings | BenchSetting | tuple[str, Settings]


def as_bench_settings(items: Iterable[SettingLike]) -> list[BenchSetting]:
    """Named rows from whatever the caller gave; a repeated name gets -2, -3, ... (unique keys)."""
    out: list[BenchSetting] = []
    taken: set[str] = set()
    for item in items:
        if isinstance(item, BenchSetting):
            bs = item
        elif isinstance(item, Settings):
            bs = BenchSetting(describe(item), item)
        else:
            name, s = item
            bs = BenchSetting(str(name), s)
        name, n = bs.name, 2
        while name in taken:
            name, n = f"{bs.name}-{n}", n + 1
        taken.add(name)
        out.append(BenchSetting(name, bs.settings))
    return out


def sampling_key(s: Settings) -> tuple[float, float, float, int]:
    """What decides target-only's output distribution: the matched baseline shares it."""
    if s.greedy:
        return (0.0, 1.0, s.repetition_penalty, s.repetition_context)
    return (s.temperature, s.top_p, s.repetition_penalty, s.repetition_context)


@dataclass(frozen=True)
class Divergence:
    """Where a greedy speculative output first left target-only's, and by how much."""

    seed: int
    position: int  # index into the generated tokens
    target_only_token: int
    speculative_token: int
    logit_margin: float | None  # target logit(target-only token) - logit(speculative token)
    target_only_text: str = ""
    speculative_text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BenchResult:
    """One row: the raw timings of its timed requests and everything derived from them."""

    name: str
    label: str
    settings: dict[str, Any]
    engine: str = "specdec-tui"  # or "mlx-lm" for peer rows
    e2e_s: list[float] = field(default_factory=list)
    # Per timed request (as e2e_s): the median plain target step in ms, None below
    # core.bench.requests.MIN_STEPS steps; the request's host speed, to divide slow spells out.
    step_ms: list[float | None] = field(default_factory=list)
    # Per timed request (as e2e_s): `output_sha` of its tokens, so a report tells a request
    # that wrote another text (greedy on the GPU is not bit-stable) from one that drafted the
    # same text otherwise.
    output_sha: list[str] = field(default_factory=list)
    ttft_all_s: list[float] = field(default_factory=list)
    decode_all_tok_s: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    positions: PositionTally = field(default_factory=PositionTally)  # every timed request's rounds
    # The same rounds per draft source ("model", "lookup"), and the speculative-mode rounds
    # that proposed nothing (plain target steps), from the timed requests.
    sources: dict[str, PositionTally] = field(default_factory=dict)
    plain_steps: int = 0
    kernels: Counter[str] = field(default_factory=Counter)
    mean_tvs: list[float] = field(default_factory=list)  # per request: TV per judged draft
    tv_per_tokens: list[float] = field(default_factory=list)  # per request: TV per token
    outputs: dict[int, list[int]] = field(default_factory=dict)  # seed -> ids, 1st invocation
    last_outputs: dict[int, list[int]] = field(default_factory=dict)  # the last invocation's
    # Every timed text: per seed (and invocation where it differs) its ids, each token's
    # origin and text (core/bench/texts.py), for the reading page; JSON "texts".
    texts: TimedTexts = field(default_factory=TimedTexts)
    phase_ms: dict[str, float] | None = None
    traced_e2e_s: float | None = None
    # traced E2E / untraced E2E of the same seed, run back to back: pairs cancel slow spells
    traced_ratios: list[float] = field(default_factory=list)
    outside_rounds_ms: float | None = None  # traced E2E minus its rounds: prefill, mostly
    trace: list[dict[str, Any]] = field(default_factory=list)
    # The same traced request whole, for `bench --trace` (core.profile.chrome_trace); not JSON.
    traced_rounds: list[RoundEvent] = field(default_factory=list)
    traced_summary: RunSummary | None = None
    target_nll: float | None = None
    target_nll_baseline: float | None = None
    # The share of the answers (first invocation, up to EOS) copied from the prompt and of their
    # repeated 4-grams (core/bench/copying.py), where the caller measured them (the CLI does).
    copied: float | None = None
    repetition: float | None = None
    # A checkable prompt's verdict on each seed's output (first invocation), in seed order.
    task_passed: list[bool] = field(default_factory=list)
    greedy_match: bool | None = None
    divergence: Divergence | None = None
    fallback_reason: str | None = None
    # The forward the row ran (RunSummary.step), the graphs compiled by its last request's end,
    # and why a model ran eager under the compiled step.
    step: str = "eager"
    graphs: int = 0
    eager_because: dict[str, str] = field(default_factory=dict)
    speedup_vs_target: float | None = None
    peer_of: str | None = None  # for mlx-lm rows: the row of ours it is compared with
    ours_vs_peer: float | None = None  # peer median E2E / ours median E2E
    # Peer rows: requests of ours and the peer's run back to back (ABAB per seed); each pair's
    # ours/peer speed ratio (peer E2E / our E2E), so the host's drift hits both sides alike.
    pairs: list[dict[str, Any]] = field(default_factory=list)
    sample_text: str = ""
    # source ("none": plain target steps) -> k proposed -> rounds, from the timed requests
    proposals: dict[str, Counter[int]] = field(default_factory=dict)
    # What core.cost.prediction expected of this row (speculative rows with a calibration) and its
    # measured decode speedup over that: core.bench.predicted fills them.
    predicted_speedup: float | None = None
    efficiency: float | None = None
    prediction: dict[str, Any] | None = None
    # The models this row ran (core.models.identify.ModelIdentity per role; no draft for a
    # target-only row); None when the engine did not know them (core.bench.provenance).
    models: dict[str, Any] | None = None
    # The measured guard (core.cost.guard) per source, one entry per timed request:
    # {"measured_tok_s": [...], "vs_target": [...], "guard": [...], "earlier_rounds": [...]}
    # ("none": target steps; earlier_rounds: rounds the engine's guard carried in).
    guard: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    # -- derived numbers ---------------------------------------------------------------

    @property
    def speculative(self) -> bool:
        return self.settings.get("mode") == "speculative"

    @property
    def nll_delta(self) -> float | None:
        """What the text gave up: target NLL per token minus target-only's (None if unscored)."""
        if self.target_nll is None or self.target_nll_baseline is None:
            return None
        return self.target_nll - self.target_nll_baseline

    @property
    def task_success(self) -> float | None:
        """Share of this row's outputs the prompt's check passed (None: not a checked prompt)."""
        return sum(self.task_passed) / len(self.task_passed) if self.task_passed else None

    @property
    def timed_requests(self) -> int:
        return len(self.e2e_s)

    @property
    def median_e2e_s(self) -> float | None:
        return statistics.median(self.e2e_s) if self.e2e_s else None

    @property
    def acceptance(self) -> float | None:
        """Accepted over proposed drafts; None for rows that do not speculate."""
        return self.positions.acceptance if self.speculative else None

    @property
    def mean_accepted_length(self) -> float | None:
        return self.positions.mean_accepted_length

    @property
    def per_position_acceptance(self) -> list[float]:
        return list(self.positions.reached_rates())

    @property
    def per_source(self) -> dict[str, dict[str, Any]]:
        """Per draft source: its rounds and their share of the speculative rounds (its hit
        rate), acceptance, accepted length; "none" counts the plain target steps. Empty for
        rows that do not speculate."""
        if not self.speculative:
            return {}
        total = sum(t.rounds for t in self.sources.values()) + self.plain_steps
        out: dict[str, dict[str, Any]] = {
            name: {**t.summary(), "share": t.rounds / total if total else None}
            for name, t in self.sources.items()
        }
        if self.plain_steps:
            out["none"] = {"rounds": self.plain_steps,
                           "share": self.plain_steps / total if total else None}
        return out

    @property
    def rounds_per_request(self) -> float | None:
        return statistics.fmean(self.rounds) if self.rounds else None

    @property
    def tracing_overhead(self) -> float | None:
        """Median over seeds of traced / untraced E2E of the same seed, minus 1."""
        return statistics.median(self.traced_ratios) - 1.0 if self.traced_ratios else None

    @property
    def kernel(self) -> str | None:
        return self.kernels.most_common(1)[0][0] if self.kernels else None

    @property
    def paired_ratio(self) -> dict[str, Any] | None:
        """Peer rows: the per-pair ours/peer speed ratios with their median, quartiles and
        range (None without pairs). A sign that holds from min to max is not the host's noise."""
        ratios = sorted(p["ratio"] for p in self.pairs)
        if not ratios:
            return None
        q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else None
        return {
            "median": statistics.median(ratios),
            "q1": q[0] if q else ratios[0],
            "q3": q[2] if q else ratios[0],
            "min": ratios[0],
            "max": ratios[-1],
            "n": len(ratios),
            "pairs": list(self.pairs),
        }

    @property
    def mean_tv(self) -> float | None:
        """TV per judged draft: the mean TV(pi, p) between the mixed distribution and the
        target's over the positions where a draft was judged (the accepted drafts and the one
        rejected), per request, then over requests; target steps and bonus tokens not counted,
        None for greedy rows (no distribution moved)."""
        return statistics.fmean(self.mean_tvs) if self.mean_tvs else None

    @property
    def tv_per_token(self) -> float | None:
        """The realised TV per generated token: that sum over every token of the request (a
        token the target drew itself moved 0), over requests: how far, on average, the
        distribution each output token came from was from the target's. 0 for target-only,
        lossless and greedy rows; None for draft-only (not measured)."""
        return statistics.fmean(self.tv_per_tokens) if self.tv_per_tokens else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract row (docs/CONTRACTS.md): extend, never rename."""
        med = self.median_e2e_s
        return {
            "name": self.name,
            "label": self.label,
            "engine": self.engine,
            "settings": self.settings,
            "acceptance": self.acceptance,
            "rounds_per_request": self.rounds_per_request,
            "median_e2e_s": med,
            "min_e2e_s": min(self.e2e_s) if self.e2e_s else None,
            "max_e2e_s": max(self.e2e_s) if self.e2e_s else None,
            "e2e_s": list(self.e2e_s),
            "step_ms": list(self.step_ms),
            "output_sha": list(self.output_sha),
            "timed_requests": self.timed_requests,
            "ttft_s": statistics.median(self.ttft_all_s) if self.ttft_all_s else None,
            "decode_tok_s": (
                statistics.median(self.decode_all_tok_s) if self.decode_all_tok_s else None
            ),
            "tokens_per_request": statistics.median(self.tokens) if self.tokens else None,
            "speedup_vs_target": self.speedup_vs_target,
            "mean_accepted_length": self.mean_accepted_length,
            "per_position_acceptance": self.per_position_acceptance,
            "per_source": self.per_source,
            "phase_ms": self.phase_ms,
            "traced_e2e_s": self.traced_e2e_s,
            "traced_ratios": list(self.traced_ratios),
            "outside_rounds_ms": self.outside_rounds_ms,
            "tracing_overhead": self.tracing_overhead,
            "kernel": self.kernel,
            "quality": {
                "target_nll": self.target_nll,
                "target_nll_baseline": self.target_nll_baseline,
                "mean_tv": self.mean_tv,
                "tv_per_token": self.tv_per_token,
                "copied": self.copied,
                "repetition": self.repetition,
                "task_success": self.task_success,
                "task_passed": list(self.task_passed),
            },
            "greedy_match": self.greedy_match,
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "fallback_reason": self.fallback_reason,
            "step": self.step,
            "graphs": self.graphs,
            "eager_because": dict(self.eager_because),
            "peer_of": self.peer_of,
            "ours_vs_peer": self.ours_vs_peer,
            "paired_ratio": self.paired_ratio,
            "predicted_speedup": self.predicted_speedup,
            "efficiency": self.efficiency,
            "prediction": self.prediction,
            "sample_output": {
                "seed": next(iter(self.outputs), None),
                "token_ids": next(iter(self.outputs.values()), []),
                "text": self.sample_text,
            },
            "texts": self.texts.to_dicts(),
            "trace": self.trace,
            "models": identities_to_dict(self.models),
            "guard": self.guard,
        }


def output_sha(token_ids: Iterable[int]) -> str:
    """A request's text named by its tokens: the first 16 hex digits of the sha256 of its ids
    written as decimals joined by commas (reproducible from any JSON that keeps the ids)."""
    return hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()[:16]


def finite(value: Any) -> Any:
    """`value` with NaN and infinities (anywhere in dicts, lists, tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


@dataclass
class BenchReport:
    """Everything one benchmark run measured, with the renderings people and scripts read."""

    environment: dict[str, Any]
    protocol: dict[str, Any]
    results: list[BenchResult]

    def result(self, name: str) -> BenchResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "protocol": self.protocol,
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self) -> str:
        """JSON with every non-finite number as null: a NaN or inf from a bad input (a curve)
        must not fail the dump after the whole run (JSON has no NaN; readers choke on it)."""
        return dumps(finite(self.to_dict()), indent=1)  # timed texts' lists on one line

    def summary_text(self) -> str:
        """A few lines for a small panel (the TUI): name, acceptance, median E2E, ratio."""
        lines = []
        for r in self.results:
            lines.append(
                f"{r.name}: acc {pct(r.acceptance)}, median {secs(r.median_e2e_s)}, "
                f"{ratio(r.speedup_vs_target)} vs target-only"
            )
        return "\n".join(lines)
