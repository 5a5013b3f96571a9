"""The benchmark protocol: the seed's timing runs, what each setting gave up, and the reports.

The seed's question was "which setting is faster here, and what does it cost the text?", so
one run answers both from the same requests: untraced, exactly N tokens with EOS ignored,
every request from an empty cache (it prefills the prompt, as the seed's did), the median
end-to-end latency over I invocations x S seeds, a target-only baseline measured in the same
run for the ratio, traced runs paired with untraced ones for the phase split and the tracing
overhead, and, per setting, the
target's negative log-likelihood of the text against target-only's, the realised per-step TV,
a greedy-equivalence check, and the same seed's outputs side by side.

`run_protocol` is a pure function of an Engine (the TUI calls it from its engine thread);
`add_bench_arguments` / `run_bench_cli` are `specdec-tui bench`. Peer rows time mlx-lm's own
`generate_step` / `speculative_generate_step` on the same models for the ours-vs-theirs ratio.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx

from core.errors import UserError
from core.events import PHASES, RoundEvent, RunSummary
from core.settings import DISPATCH, MODES, POLICIES, RULES, VERIFY_ATTENTION, Settings

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
PROMPT_KINDS = ("code", "creative")
DEFAULT_PROMPT = "creative-seed-vault"
PEERS = ("mlx-lm",)
NLL_BASIS = (
    "raw target logits at temperature 1 (no top-p, no repetition penalty), teacher-forced over "
    "prompt + generated text from an empty cache; mean over the generated tokens"
)
# Progress callback: (done, total, label). The TUI posts it as a message; the CLI draws a bar.
Progress = Callable[[int, int, str], None]


class BenchError(UserError):
    """A benchmark request a user can fix (bad flag, missing prompt, unwritable output)."""


class BenchCancelled(UserError):
    """The benchmark was stopped before it finished; nothing was reported."""


# --------------------------------------------------------------------------- prompts


def prompt_names() -> list[str]:
    """The shipped prompts (core/prompts/*.txt), by name; the kind is the name's prefix."""
    if not PROMPTS_DIR.is_dir():
        return []
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))


def prompt_kind(name: str) -> str:
    """'code' or 'creative' (a shipped prompt's kind is the first word of its name)."""
    head = name.split("-", 1)[0]
    return head if head in PROMPT_KINDS else "other"


def load_prompt(name: str) -> str:
    """The text of a shipped prompt; an unknown name is refused with the known ones."""
    return _read_prompt(name)[0]


def prompt_token_budget(name: str) -> int | None:
    """The context a shipped prompt is meant to fill (its `# prompt-tokens: N` line), if any.

    Why: `creative-800` is ~800 tokens under a real BPE tokenizer but ~3,600 under the
    byte-level tokenizer of the `shape:` models; the bench cuts it to N by default so the
    GPU run's context is what its name says whatever the tokenizer.
    """
    return _read_prompt(name)[1]


def _read_prompt(name: str) -> tuple[str, int | None]:
    path = PROMPTS_DIR / f"{name}.txt"
    if "/" in name or "\\" in name or not path.is_file():
        raise BenchError(
            f"There is no shipped prompt named {name!r}; known: {', '.join(prompt_names())}."
        )
    text = path.read_text(encoding="utf-8")
    budget = None
    first, _, rest = text.partition("\n")
    if first.startswith("# prompt-tokens:"):
        budget, text = int(first.split(":", 1)[1]), rest
    return text.strip(), budget


def fit_prompt_ids(tokenizer: Any, text: str, n_tokens: int | None) -> tuple[list[int], str]:
    """Chat-template ids of `text`, cut at a word boundary so they are at most `n_tokens` long.

    Why: a prompt's length in tokens depends on the tokenizer (the byte-level tokenizer of the
    random `shape:` models spends one token per byte), and issue 7 asks for a fixed context.
    Returns the ids and the text actually used; a text already short enough is kept whole.
    """
    from core.models import chat_prompt_ids

    def ids_of(t: str) -> list[int]:
        return chat_prompt_ids(tokenizer, [{"role": "user", "content": t}])

    ids = ids_of(text)
    if n_tokens is None or len(ids) <= n_tokens:
        return ids, text
    cuts = [i for i, ch in enumerate(text) if ch.isspace()] + [len(text)]
    lo, hi = 0, len(cuts) - 1  # the largest cut whose ids fit
    if len(ids_of(text[: cuts[0]])) > n_tokens:
        raise BenchError(
            f"--prompt-tokens {n_tokens} is shorter than the chat template and the first word."
        )
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(ids_of(text[: cuts[mid]])) <= n_tokens:
            lo = mid
        else:
            hi = mid - 1
    used = text[: cuts[lo]].rstrip()
    return ids_of(used), used


# --------------------------------------------------------------------------- naming settings


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
        if s.fused_draft:
            label += ", fused draft"
    if s.greedy and s.mode != "speculative":
        label += ", greedy"
    return label


@dataclass(frozen=True)
class BenchSetting:
    """One row of the table: a name scripts can key on, and the settings it runs."""

    name: str
    settings: Settings


SettingLike = Settings | BenchSetting | tuple[str, Settings]


def _as_bench_settings(items: Iterable[SettingLike]) -> list[BenchSetting]:
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


def _sampling_key(s: Settings) -> tuple[float, float, float, int]:
    """What decides target-only's output distribution: the matched baseline shares it."""
    if s.greedy:
        return (0.0, 1.0, s.repetition_penalty, s.repetition_context)
    return (s.temperature, s.top_p, s.repetition_penalty, s.repetition_context)


# --------------------------------------------------------------------------- results


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
    ttft_all_s: list[float] = field(default_factory=list)
    decode_all_tok_s: list[float] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    proposed: int = 0
    accepted: int = 0
    spec_rounds: int = 0
    pos_tries: list[int] = field(default_factory=list)
    pos_hits: list[int] = field(default_factory=list)
    kernels: Counter[str] = field(default_factory=Counter)
    mean_tvs: list[float] = field(default_factory=list)
    outputs: dict[int, list[int]] = field(default_factory=dict)  # seed -> ids, 1st invocation
    last_outputs: dict[int, list[int]] = field(default_factory=dict)  # the last invocation's
    phase_ms: dict[str, float] | None = None
    traced_e2e_s: float | None = None
    # traced E2E / untraced E2E of the same seed, run back to back: pairs cancel slow spells
    traced_ratios: list[float] = field(default_factory=list)
    outside_rounds_ms: float | None = None  # traced E2E minus its rounds: prefill, mostly
    trace: list[dict[str, Any]] = field(default_factory=list)
    target_nll: float | None = None
    target_nll_baseline: float | None = None
    greedy_match: bool | None = None
    divergence: Divergence | None = None
    fallback_reason: str | None = None
    speedup_vs_target: float | None = None
    peer_of: str | None = None  # for mlx-lm rows: the row of ours it is compared with
    ours_vs_peer: float | None = None  # peer median E2E / ours median E2E
    sample_text: str = ""

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
    def timed_requests(self) -> int:
        return len(self.e2e_s)

    @property
    def median_e2e_s(self) -> float | None:
        return statistics.median(self.e2e_s) if self.e2e_s else None

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.proposed if self.speculative and self.proposed else None

    @property
    def mean_accepted_length(self) -> float | None:
        return self.accepted / self.spec_rounds if self.spec_rounds else None

    @property
    def per_position_acceptance(self) -> list[float]:
        return [h / t for h, t in zip(self.pos_hits, self.pos_tries, strict=True) if t]

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
    def mean_tv(self) -> float | None:
        return statistics.fmean(self.mean_tvs) if self.mean_tvs else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract row (issue 5): extend, never rename."""
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
            "timed_requests": self.timed_requests,
            "ttft_s": statistics.median(self.ttft_all_s) if self.ttft_all_s else None,
            "decode_tok_s": (
                statistics.median(self.decode_all_tok_s) if self.decode_all_tok_s else None
            ),
            "tokens_per_request": statistics.median(self.tokens) if self.tokens else None,
            "speedup_vs_target": self.speedup_vs_target,
            "mean_accepted_length": self.mean_accepted_length,
            "per_position_acceptance": self.per_position_acceptance,
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
            },
            "greedy_match": self.greedy_match,
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "fallback_reason": self.fallback_reason,
            "peer_of": self.peer_of,
            "ours_vs_peer": self.ours_vs_peer,
            "sample_output": {
                "seed": next(iter(self.outputs), None),
                "token_ids": next(iter(self.outputs.values()), []),
                "text": self.sample_text,
            },
            "trace": self.trace,
        }


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
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)

    def to_csv(self) -> str:
        return _report_csv(self)

    def to_markdown(self) -> str:
        return _report_markdown(self)

    def summary_text(self) -> str:
        """A few lines for a small panel (the TUI): name, acceptance, median E2E, ratio."""
        lines = []
        for r in self.results:
            lines.append(
                f"{r.name}: acc {_pct(r.acceptance)}, median {_secs(r.median_e2e_s)}, "
                f"{_ratio(r.speedup_vs_target)} vs target-only"
            )
        return "\n".join(lines)


# --------------------------------------------------------------------------- the protocol


@dataclass(frozen=True)
class Peer:
    """The models mlx-lm's own loops run on (the same ones the engine holds) and their k."""

    target: Any
    draft: Any | None
    k: int
    vocab_size: int
    name: str = "mlx-lm"


@dataclass
class _Request:
    """One request's summary and the per-round tallies the summary does not keep."""

    summary: RunSummary | None = None
    kernels: Counter[str] = field(default_factory=Counter)
    spec_rounds: int = 0
    pos_tries: list[int] = field(default_factory=list)
    pos_hits: list[int] = field(default_factory=list)
    rounds: list[RoundEvent] = field(default_factory=list)

    def add(self, ev: RoundEvent, keep: bool) -> None:
        if keep:
            self.rounds.append(ev)
        if ev.proposed:
            self.spec_rounds += 1
            if ev.kernel:
                self.kernels[ev.kernel] += 1
            while len(self.pos_tries) < ev.proposed:
                self.pos_tries.append(0)
                self.pos_hits.append(0)
            for i in range(min(ev.accepted + 1, ev.proposed)):  # as the engine: conditional
                self.pos_tries[i] += 1
                self.pos_hits[i] += i < ev.accepted


def _run_request(
    engine: Any,
    prompt_ids: Sequence[int],
    s: Settings,
    cancel: threading.Event | None,
    keep_rounds: bool = False,
) -> _Request:
    """One request from an empty cache, so it prefills the prompt like every other."""
    engine.reset()
    req = _Request()
    for item in engine.generate(list(prompt_ids), s, cancel=cancel):
        if isinstance(item, RunSummary):
            req.summary = item
        else:
            req.add(item, keep_rounds)
    if req.summary is None or req.summary.stop_reason == "cancelled":
        raise BenchCancelled("The benchmark was cancelled before it finished.")
    return req


def _record_timed(r: BenchResult, req: _Request, seed: int, keep_output: bool) -> None:
    s = req.summary
    assert s is not None
    r.e2e_s.append(s.e2e_s)
    r.ttft_all_s.append(s.ttft_s)
    r.decode_all_tok_s.append(s.decode_tok_s)
    r.rounds.append(s.rounds)
    r.tokens.append(s.tokens)
    r.proposed += s.proposed
    r.accepted += s.accepted
    r.spec_rounds += req.spec_rounds
    for i, (t, h) in enumerate(zip(req.pos_tries, req.pos_hits, strict=True)):
        if i >= len(r.pos_tries):
            r.pos_tries.append(0)
            r.pos_hits.append(0)
        r.pos_tries[i] += t
        r.pos_hits[i] += h
    r.kernels.update(req.kernels)
    if s.mean_tv is not None:
        r.mean_tvs.append(s.mean_tv)
    if s.fallback_reason:
        r.fallback_reason = s.fallback_reason
    if keep_output:
        r.outputs[seed] = list(s.token_ids)
    r.last_outputs[seed] = list(s.token_ids)


def _record_traced(
    r: BenchResult,
    engine: Any,
    prompt_ids: list[int],
    s: Settings,
    untraced_e2e_s: float,
    cancel: threading.Event | None,
) -> None:
    """Run `s` traced; its E2E against the untraced run of the same seed just before is one
    overhead sample. The first traced request of a setting gives its phase split and trace."""
    req = _run_request(engine, prompt_ids, s.replace(traced=True), cancel, True)
    assert req.summary is not None
    r.traced_ratios.append(req.summary.e2e_s / untraced_e2e_s)
    if r.phase_ms is not None:
        return
    r.traced_e2e_s = req.summary.e2e_s
    r.phase_ms = {p: req.summary.phase_s.get(p, 0.0) * 1e3 for p in PHASES}
    r.trace = [_round_trace(ev) for ev in req.rounds]
    in_rounds = sum(ev.timings.total for ev in req.rounds)
    r.outside_rounds_ms = max(req.summary.e2e_s - in_rounds, 0.0) * 1e3
    if not r.kernels:  # no speculative round: the kernel of its single-row forwards
        r.kernels.update(ev.kernel for ev in req.rounds if ev.kernel)


def _round_trace(ev: RoundEvent) -> dict[str, Any]:
    ms = ev.timings.as_ms()
    return {
        "rows": ev.rows,
        "proposed": ev.proposed,
        "accepted": ev.accepted,
        "tokens": len(ev.tokens),
        "context": ev.context,
        "kernel": ev.kernel,
        **{f"{p}_ms": round(ms[p], 4) for p in (*PHASES, "total")},
    }


def _target_model(engine: Any) -> Any:
    """The engine's target module (for scoring the text with the target's own weights)."""
    return engine.target_model


def _vocab(engine: Any) -> int:
    return int(engine.vocab_size)


class _Scorer:
    """Teacher-forced target forwards over prompt + text, the prompt prefilled once.

    Why not the engine's cache: the score must not depend on what the engine did; a fresh
    cache with the prompt prefilled, trimmed back after each text, is the same as a fresh
    forward over prompt + text each time, at one prefill's cost.
    """

    def __init__(self, model: Any, prompt_ids: Sequence[int], vocab: int, chunk: int = 512):
        from mlx_lm.models.cache import make_prompt_cache

        self.model = model
        self.vocab = vocab
        self.last = int(prompt_ids[-1])
        self.cache = make_prompt_cache(model)
        head = list(prompt_ids[:-1])
        for i in range(0, len(head), chunk):
            model(mx.array(head[i : i + chunk])[None], cache=self.cache)
            mx.eval([c.state for c in self.cache])

    def logits(self, ids: Sequence[int]) -> mx.array:
        """Raw float32 logits [len(ids), V]: row i predicts ids[i] from prompt + ids[:i]."""
        from mlx_lm.models.cache import trim_prompt_cache

        inp = mx.array([self.last, *ids[:-1]]) if ids else mx.array([self.last])
        out = self.model(inp[None], cache=self.cache)[0, :, : self.vocab].astype(mx.float32)
        mx.eval(out)
        trim_prompt_cache(self.cache, inp.shape[0])
        return out

    def nll(self, ids: Sequence[int]) -> tuple[float, int]:
        """Summed negative log-likelihood of ids and their count (see NLL_BASIS)."""
        if not ids:
            return 0.0, 0
        logits = self.logits(ids)
        logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        picked = mx.take_along_axis(logprobs, mx.array(list(ids))[:, None], axis=-1)
        return float(-picked.sum().item()), len(ids)


def score_nll(model: Any, prompt_ids: Sequence[int], ids: Sequence[int], vocab: int) -> float:
    """The target's mean NLL per token of `ids` after the prompt (NLL_BASIS), fresh cache."""
    total, n = _Scorer(model, prompt_ids, vocab).nll(ids)
    return total / n if n else float("nan")


def first_divergence(expected: Sequence[int], got: Sequence[int]) -> tuple[int, int, int] | None:
    """(position, expected token, got token) where two outputs first differ, else None."""
    for i, (a, b) in enumerate(zip(expected, got, strict=False)):
        if a != b:
            return i, int(a), int(b)
    if len(expected) != len(got):  # one stopped early: -1 stands for "no token"
        i = min(len(expected), len(got))
        a = int(expected[i]) if i < len(expected) else -1
        b = int(got[i]) if i < len(got) else -1
        return i, a, b
    return None


def _divergence_margin(
    scorer: _Scorer, s: Settings, prompt_ids: Sequence[int], prefix: Sequence[int], a: int, b: int
) -> float:
    """logit(a) - logit(b) of the target after prompt + prefix, penalised as the rule saw it."""
    from core.sampling import LogitsConfig, penalize

    row = scorer.logits([*prefix, 0])[-1:]
    if s.repetition_penalty != 1.0:
        ctx = mx.array([*prompt_ids, *prefix][-s.repetition_context :])
        cfg = LogitsConfig(1.0, 1.0, s.repetition_penalty, s.repetition_context)
        row = penalize(row, ctx, cfg)
    return float((row[0, a] - row[0, b]).item()) if a >= 0 and b >= 0 else float("nan")


def run_protocol(
    engine: Any,
    prompt_ids: Sequence[int],
    settings_list: Sequence[SettingLike],
    *,
    tokens: int = 256,
    seeds: int = 3,
    invocations: int = 3,
    warmup: int = 1,
    traced: bool = True,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    decode: Callable[[list[int]], str] | None = None,
    peer: Peer | None = None,
    reference: Any | None = None,
    environment: dict[str, Any] | None = None,
    quality: bool = True,
) -> BenchReport:
    """Run the seed's protocol on `engine` and return the report (no printing, no files).

    For each setting (a target-only baseline is added when none is given): `warmup` requests,
    then `invocations` x `seeds` timed untraced requests of exactly `tokens` tokens with EOS
    ignored (invocations outermost, so a slow spell on a shared machine hits every setting),
    and, in the first invocation, a traced request right after each untraced one with the
    same seed: the pairs give the tracing overhead, the first the phase split. Seeds are
    settings.seed + 0..seeds-1, the same for every setting. Quality: target NLL of the first invocation's outputs against a
    target-only run with the same sampling parameters; greedy settings are checked token by
    token against target-only outputs of `reference` (default: the same engine). `peer`
    adds mlx-lm rows (and greedy rows of ours to compare them with, when none match).
    Call on the engine's thread; `progress(done, total, label)` after every request.
    """
    if tokens < 1 or seeds < 1 or invocations < 1 or warmup < 0:
        raise BenchError("tokens, seeds and invocations must be at least 1 and warmup at least 0.")
    if not prompt_ids:
        raise BenchError("The prompt is empty: there is nothing to benchmark.")
    rows = _as_bench_settings(settings_list)
    if not rows:
        raise BenchError("There is no setting to benchmark.")
    rows = _with_baseline(rows)
    if peer is not None:
        rows = _with_peer_counterparts(rows, peer.k)
    prepared = [
        BenchSetting(b.name, b.settings.replace(max_tokens=tokens, ignore_eos=True, traced=False))
        for b in rows
    ]
    seed_lists = {b.name: [b.settings.seed + j for j in range(seeds)] for b in prepared}
    results = {
        b.name: BenchResult(b.name, describe(b.settings), b.settings.to_dict()) for b in prepared
    }
    reference = engine if reference is None else reference
    plan = _plan_references(prepared, reference is engine, quality)

    total = len(prepared) * (warmup + invocations * seeds + (seeds if traced else 0))
    total += sum(seeds for _ in plan["nll"]) + sum(seeds for _ in plan["greedy"])
    if quality:
        total += len(prepared)
    if peer is not None:
        total += (2 if peer.draft is not None else 1) * (warmup + invocations * seeds)
    done = 0

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, label)

    def check_cancel() -> None:
        if cancel is not None and cancel.is_set():
            raise BenchCancelled("The benchmark was cancelled before it finished.")

    # Warm-up: every setting's shapes compiled and caches allocated before any timing.
    for b in prepared:
        for _ in range(warmup):
            check_cancel()
            _run_request(engine, prompt_ids, b.settings.replace(seed=seed_lists[b.name][0]), cancel)
            tick(f"warm-up {b.name}")

    # Timed: untraced, exactly N tokens, a fresh cache per request.
    for inv in range(invocations):
        for b in prepared:
            for seed in seed_lists[b.name]:
                check_cancel()
                req = _run_request(engine, prompt_ids, b.settings.replace(seed=seed), cancel)
                _record_timed(results[b.name], req, seed, keep_output=inv == 0)
                tick(f"{b.name} invocation {inv + 1}/{invocations} seed {seed}")
                if traced and inv == 0:
                    check_cancel()
                    assert req.summary is not None
                    _record_traced(results[b.name], engine, prompt_ids,
                                   b.settings.replace(seed=seed), req.summary.e2e_s, cancel)  # fmt: skip
                    tick(f"traced {b.name} seed {seed}")

    if peer is not None:
        for row in _run_peer(peer, prompt_ids, tokens, seeds, invocations, warmup, tick,
                             check_cancel):  # fmt: skip
            results[row.name] = row

    out = list(results.values())
    baseline = next(r for r in out if r.settings.get("mode") == "target-only")
    if quality:
        _quality(engine, reference, prompt_ids, prepared, results, seed_lists, plan, tick,
                 check_cancel, cancel)  # fmt: skip
        if peer is not None:
            _peer_quality(engine, prompt_ids, results, prepared)
    base_med = baseline.median_e2e_s
    for r in out:
        med = r.median_e2e_s
        r.speedup_vs_target = base_med / med if base_med and med else None
        if decode is not None and r.outputs:
            first = next(iter(r.outputs.values()))
            r.sample_text = decode(first)
            if r.divergence is not None:
                d = r.divergence
                r.divergence = Divergence(
                    d.seed, d.position, d.target_only_token, d.speculative_token,
                    d.logit_margin,
                    decode([d.target_only_token]) if d.target_only_token >= 0 else "",
                    decode([d.speculative_token]) if d.speculative_token >= 0 else "",
                )  # fmt: skip
    _link_peers(out)

    env = environment if environment is not None else _environment()
    protocol = {
        "tokens": tokens,
        "seeds": seeds,
        "invocations": invocations,
        "warmup": warmup,
        "traced": traced,
        "ignore_eos": True,
        "order": "invocations outermost, then settings, then seeds; warm-up before all",
        "seed_values": seed_lists[baseline.name],
        "prompt_tokens": len(prompt_ids),
        "baseline": baseline.name,
        "nll_basis": NLL_BASIS,
        "greedy_reference": "same engine" if reference is engine else "another engine",
        "peer": peer.name if peer is not None else None,
    }
    return BenchReport(environment=env, protocol=protocol, results=out)


def _with_baseline(rows: list[BenchSetting]) -> list[BenchSetting]:
    """The target-only baseline, first, derived from the first setting when none was given."""
    if any(b.settings.mode == "target-only" for b in rows):
        return rows
    base = rows[0].settings.replace(mode="target-only")
    name = "target-only"
    names = {b.name for b in rows}
    while name in names:
        name += "-baseline"
    return [BenchSetting(name, base), *rows]


def _is_peer_match(s: Settings, mode: str, k: int) -> bool:
    same = s.mode == mode and s.greedy and s.repetition_penalty == 1.0
    if mode == "speculative":
        same = same and s.policy == "fixed" and s.k == k and s.bonus
    return same


def _with_peer_counterparts(rows: list[BenchSetting], k: int) -> list[BenchSetting]:
    """Greedy rows of ours that mlx-lm's loops are compared with (added when none match)."""
    base = rows[0].settings
    greedy = {"temperature": 0.0, "rule": "greedy", "repetition_penalty": 1.0, "top_p": 1.0}
    out = list(rows)
    names = {b.name for b in rows}
    if not any(_is_peer_match(b.settings, "target-only", k) for b in rows):
        name = "target-only greedy"
        out.append(BenchSetting(name, base.replace(mode="target-only", **greedy)))
        names.add(name)
    if not any(_is_peer_match(b.settings, "speculative", k) for b in rows):
        s = base.replace(mode="speculative", policy="fixed", k=k, bonus=True, **greedy)
        out.append(BenchSetting(f"speculative greedy k={k}", s))
    return out


def _plan_references(
    prepared: list[BenchSetting], same_engine: bool, quality: bool
) -> dict[str, dict[tuple[Any, ...], Settings]]:
    """Which target-only outputs must be generated untimed (no timed row has their sampling)."""
    if not quality:
        return {"nll": {}, "greedy": {}}
    timed = {_sampling_key(b.settings) for b in prepared if b.settings.mode == "target-only"}
    nll: dict[tuple[Any, ...], Settings] = {}
    greedy: dict[tuple[Any, ...], Settings] = {}
    for b in prepared:
        key = _sampling_key(b.settings)
        ref = b.settings.replace(mode="target-only")
        if key not in timed:
            nll.setdefault(key, ref)
        if (
            b.settings.greedy
            and b.settings.mode != "target-only"
            and (not same_engine or key not in timed)
        ):
            greedy.setdefault(key, ref)
    if same_engine:  # one generation serves both
        greedy = {k: v for k, v in greedy.items() if k not in nll}
    return {"nll": nll, "greedy": greedy}


def _quality(
    engine: Any,
    reference: Any,
    prompt_ids: Sequence[int],
    prepared: list[BenchSetting],
    results: dict[str, BenchResult],
    seed_lists: dict[str, list[int]],
    plan: dict[str, dict[tuple[Any, ...], Settings]],
    tick: Callable[[str], None],
    check_cancel: Callable[[], None],
    cancel: threading.Event | None,
) -> None:
    """NLL of each setting's text against matched target-only text, and the greedy check."""
    seeds = next(iter(seed_lists.values()))
    own: dict[tuple[Any, ...], dict[int, list[int]]] = {}
    for b in prepared:
        if b.settings.mode == "target-only":
            own.setdefault(_sampling_key(b.settings), results[b.name].outputs)
    def outputs_per_seed(eng: Any, s: Settings, label: str) -> dict[int, list[int]]:
        """One reference request per seed: the tokens other settings are compared against."""
        outs: dict[int, list[int]] = {}
        for seed in seeds:
            check_cancel()
            req = _run_request(eng, prompt_ids, s.replace(seed=seed), cancel)
            assert req.summary is not None
            outs[seed] = list(req.summary.token_ids)
            tick(label)
        return outs

    for key, s in plan["nll"].items():
        own[key] = outputs_per_seed(engine, s, "target-only reference")
    refs = own if reference is engine else {}
    for key, s in plan["greedy"].items():
        refs[key] = outputs_per_seed(reference, s, "greedy reference")

    scorer = _Scorer(_target_model(engine), prompt_ids, _vocab(engine))
    nll_cache: dict[tuple[Any, ...], float | None] = {}

    def mean_nll(outputs: dict[int, list[int]]) -> float | None:
        total, n = 0.0, 0
        for ids in outputs.values():
            t, c = scorer.nll(ids)
            total, n = total + t, n + c
        return total / n if n else None

    for key, outs in own.items():
        nll_cache[key] = mean_nll(outs)
    for b in prepared:
        check_cancel()
        r = results[b.name]
        key = _sampling_key(b.settings)
        r.target_nll = mean_nll(r.outputs)
        r.target_nll_baseline = nll_cache.get(key)
        if b.settings.greedy:
            # Target-only on the reference engine itself: first invocation against the last
            # (determinism); everything else against the reference's target-only outputs.
            same = b.settings.mode == "target-only" and reference is engine
            expected = r.last_outputs if same else refs.get(key, {})
            _greedy_check(r, b.settings, expected, scorer, prompt_ids)
        tick(f"quality {b.name}")


def _greedy_check(
    r: BenchResult,
    s: Settings,
    refs: dict[int, list[int]],
    scorer: _Scorer,
    prompt_ids: Sequence[int],
) -> None:
    """greedy_match and the first divergence against target-only's outputs, seed by seed."""
    if not refs:
        return
    r.greedy_match = True
    for seed, ids in r.outputs.items():
        expected = refs.get(seed)
        if expected is None:
            continue
        hit = first_divergence(expected, ids)
        if hit is None:
            continue
        pos, a, b = hit
        margin = _divergence_margin(scorer, s, prompt_ids, expected[:pos], a, b)
        r.greedy_match = False
        r.divergence = Divergence(seed, pos, a, b, margin)
        return


# --------------------------------------------------------------------------- the peer (mlx-lm)


def _peer_request(
    peer: Peer, prompt_ids: Sequence[int], tokens: int, speculative: bool
) -> tuple[float, float, list[int], int, int, int, list[float]]:
    """One mlx-lm request from a fresh cache: (e2e, ttft, ids, rounds, proposed, accepted, ms)."""
    from mlx_lm.generate import generate_step, speculative_generate_step

    V = peer.vocab_size

    def sampler(logprobs: mx.array) -> mx.array:
        return mx.argmax(logprobs[..., :V], axis=-1)  # the same sliced vocab as ours

    prompt = mx.array(list(prompt_ids), dtype=mx.uint32)
    ids: list[int] = []
    round_ms: list[float] = []
    rounds = proposed = accepted = 0
    t0 = time.perf_counter()
    ttft = None
    if not speculative:
        for tok, _ in generate_step(prompt, peer.target, max_tokens=tokens, sampler=sampler):
            ids.append(int(tok))
            ttft = ttft if ttft is not None else time.perf_counter() - t0
        e2e = time.perf_counter() - t0
        return e2e, ttft or e2e, ids, len(ids), 0, 0, []
    gen = speculative_generate_step(
        prompt, peer.target, peer.draft, num_draft_tokens=peer.k, max_tokens=tokens,
        sampler=sampler,
    )  # fmt: skip
    new_round, last = True, t0
    for tok, _, from_draft in gen:
        now = time.perf_counter()
        if new_round:  # mlx-lm drafts min(k, remaining) at the start of each round
            rounds += 1
            proposed += min(peer.k, tokens - len(ids))
        ids.append(int(tok))
        ttft = ttft if ttft is not None else now - t0
        accepted += bool(from_draft)
        new_round = not from_draft
        if new_round:
            round_ms.append((now - last) * 1e3)
            last = now
    e2e = time.perf_counter() - t0
    return e2e, ttft or e2e, ids, rounds, proposed, accepted, round_ms


def _run_peer(
    peer: Peer,
    prompt_ids: Sequence[int],
    tokens: int,
    seeds: int,
    invocations: int,
    warmup: int,
    tick: Callable[[str], None],
    check_cancel: Callable[[], None],
) -> list[BenchResult]:
    """mlx-lm's target-only and speculative loops, greedy, same protocol (median E2E)."""
    kinds = [False] + ([True] if peer.draft is not None else [])
    out = []
    for speculative in kinds:
        settings = {
            "mode": "speculative" if speculative else "target-only",
            "rule": "greedy",
            "tv_budget": 0.0,
            "k": peer.k,
            "policy": "fixed",
            "temperature": 0.0,
            "top_p": 1.0,
            "repetition_penalty": 1.0,
            "bonus": True,
            "engine": peer.name,
        }
        name = f"{peer.name} speculative k={peer.k}" if speculative else f"{peer.name} target-only"
        r = BenchResult(name, name, settings, engine=peer.name)
        for _ in range(warmup):
            check_cancel()
            _peer_request(peer, prompt_ids, tokens, speculative)
            tick(f"warm-up {name}")
        for inv in range(invocations * seeds):  # greedy: seeds change nothing but the count
            check_cancel()
            e2e, ttft, ids, rounds, proposed, accepted, round_ms = _peer_request(
                peer, prompt_ids, tokens, speculative
            )
            r.e2e_s.append(e2e)
            r.ttft_all_s.append(ttft)
            n = len(ids)
            r.decode_all_tok_s.append((n - 1) / (e2e - ttft) if n > 1 and e2e > ttft else 0.0)
            r.rounds.append(rounds)
            r.tokens.append(n)
            r.proposed += proposed
            r.accepted += accepted
            r.spec_rounds += rounds if speculative else 0
            if inv == 0:
                r.outputs[0] = ids
                r.trace = [{"total_ms": round(ms, 4)} for ms in round_ms]
            tick(f"{name} request {inv + 1}/{invocations * seeds}")
        out.append(r)
    return out


def _peer_quality(
    engine: Any, prompt_ids: Sequence[int], results: dict[str, BenchResult],
    prepared: list[BenchSetting],
) -> None:  # fmt: skip
    """Peer rows: NLL of their text, and whether it equals our greedy target-only text."""
    scorer = _Scorer(_target_model(engine), prompt_ids, _vocab(engine))
    ours = next(
        (results[b.name] for b in prepared if _is_peer_match(b.settings, "target-only", 0)), None
    )
    expected = next(iter(ours.outputs.values()), None) if ours is not None else None
    for r in results.values():
        if r.engine == "specdec-tui" or not r.outputs:
            continue
        ids = r.outputs[0]
        total, n = scorer.nll(ids)
        r.target_nll = total / n if n else None
        r.target_nll_baseline = ours.target_nll if ours is not None else None
        if expected is not None:
            hit = first_divergence(expected, ids)
            r.greedy_match = hit is None
            if hit is not None:
                pos, a, b = hit
                margin = _divergence_margin(
                    scorer, Settings(temperature=0.0), prompt_ids, expected[:pos], a, b
                )
                seed = next(iter(ours.outputs)) if ours is not None else 0
                r.divergence = Divergence(seed, pos, a, b, margin)


def _link_peers(results: list[BenchResult]) -> None:
    """Each mlx-lm row names the row of ours it is compared with and the ratio between them."""
    ours = [r for r in results if r.engine == "specdec-tui"]
    for r in results:
        if r.engine == "specdec-tui":
            continue
        mode, k = r.settings["mode"], r.settings["k"]
        match = next(
            (o for o in ours if _is_peer_match(Settings.from_dict(o.settings), mode, k)), None
        )
        if match is not None and match.median_e2e_s and r.median_e2e_s:
            r.peer_of = match.name
            r.ours_vs_peer = r.median_e2e_s / match.median_e2e_s


def _environment() -> dict[str, Any]:
    """Where the run happened (core.profile's record, so profiles and benches agree)."""
    try:
        from core.profile import record_environment
    except ImportError:  # pragma: no cover - profile.py ships with the project
        import platform

        return {"backend": str(mx.default_device()), "os": platform.platform()}
    return record_environment()


# --------------------------------------------------------------------------- renderings


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f} s"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _num(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def _config(r: BenchResult) -> str:
    return r.label if r.label == r.name else f"{r.label} (`{r.name}`)"


def _report_markdown(report: BenchReport) -> str:
    env, p = report.environment, report.protocol
    out: list[str] = []
    cmd = p.get("command")
    out.append("## Benchmark\n")
    if cmd:
        out.append(f"Command: `{cmd}`\n")
    out.append(
        f"Backend {env.get('backend', '?')} ({env.get('device_name') or '-'}), mlx "
        f"{env.get('mlx', '?')}, mlx-lm {env.get('mlx_lm', '?')}, {env.get('os', '?')}, "
        f"{env.get('timestamp', '')}.  "
    )
    models = p.get("models") or {}
    if models:
        out.append(f"Target {models.get('target')}, draft {models.get('draft')}.  ")
    prompt = p.get("prompt") or {}
    out.append(
        f"Prompt {prompt.get('name', '-')} ({p['prompt_tokens']} tokens after the chat "
        f"template); {p['tokens']} new tokens per request, EOS ignored; {p['warmup']} warm-up "
        f"request(s) per setting, then {p['invocations']} invocations x {p['seeds']} seeds "
        f"({p['invocations'] * p['seeds']} timed untraced requests per setting, each from an "
        "empty cache); in the first invocation each is followed by a traced request with the "
        "same seed: the pairs give the tracing overhead (median ratio), the first the phase "
        "split.\n"
    )
    out.append(
        "| Configuration | Acceptance | Avg. rounds/request | Median E2E latency | vs target-only |"
    )
    out.append("|---|---|---|---|---|")
    for r in report.results:
        spec = r.speculative
        out.append(
            f"| {_config(r)} | {_pct(r.acceptance) if spec else '-'} | "
            f"{_num(r.rounds_per_request, '.1f') if spec else '-'} | {_secs(r.median_e2e_s)} | "
            f"{_ratio(r.speedup_vs_target)} |"
        )
    out.append("")
    out.append("### Timing detail\n")
    out.append(
        "| Configuration | Timed requests | Min E2E | Max E2E | TTFT | Decode tok/s | "
        "Mean accepted length | Per-position acceptance |"
    )
    out.append("|---|---|---|---|---|---|---|---|")
    for r in report.results:
        d = r.to_dict()
        ppa = " ".join(f"{x:.2f}" for x in r.per_position_acceptance) or "-"
        out.append(
            f"| {r.name} | {r.timed_requests} | {_secs(d['min_e2e_s'])} | {_secs(d['max_e2e_s'])}"
            f" | {_secs(d['ttft_s'])} | {_num(d['decode_tok_s'], '.1f')} | "
            f"{_num(r.mean_accepted_length, '.2f')} | {ppa} |"
        )
    out.append("")
    if any(r.phase_ms for r in report.results):
        out.append("### Phase split (ms per request, one traced request)\n")
        out.append(
            "| Configuration | draft | verify | sample | cache | other | prefill + outside rounds "
            "| traced E2E | tracing overhead | predicted kernel |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for r in report.results:
            if not r.phase_ms:
                continue
            ph = r.phase_ms
            out.append(
                f"| {r.name} | "
                + " | ".join(f"{ph[x]:.1f}" for x in PHASES)
                + f" | {_num(r.outside_rounds_ms, '.1f')}"
                + f" | {_secs(r.traced_e2e_s)} | {_pct(r.tracing_overhead)} | {r.kernel or '-'} |"
            )
        out.append("")
    out.append("### What was given up\n")
    out.append(f"NLL basis: {p['nll_basis']}. The baseline is target-only with the same "
               "temperature, top-p and repetition penalty, same seeds.\n")  # fmt: skip
    out.append(
        "| Configuration | Target NLL/token | Target-only NLL/token | Difference | "
        "Mean per-step TV | Greedy match |"
    )
    out.append("|---|---|---|---|---|---|")
    for r in report.results:
        diff = r.nll_delta
        gm = "-" if r.greedy_match is None else ("yes" if r.greedy_match else "**no**")
        out.append(
            f"| {r.name} | {_num(r.target_nll)} | {_num(r.target_nll_baseline)} | "
            f"{_num(diff, '+.3f')} | {_num(r.mean_tv)} | {gm} |"
        )
    out.append("")
    for r in report.results:
        d = r.divergence
        if d is not None:
            out.append(
                f"- {r.name}: first divergence from target-only at generated token {d.position} "
                f"(seed {d.seed}): target-only {d.target_only_token} {d.target_only_text!r}, "
                f"this setting {d.speculative_token} {d.speculative_text!r}; target logit "
                f"margin {_num(d.logit_margin, '.4f')}."
            )
    peers = [r for r in report.results if r.engine != "specdec-tui"]
    if peers:
        out.append("\n### Against mlx-lm (greedy, same models, same protocol)\n")
        out.append("| mlx-lm row | its median E2E | ours | our median E2E | ours vs mlx-lm |")
        out.append("|---|---|---|---|---|")
        for r in peers:
            ours = next((o for o in report.results if o.name == r.peer_of), None)
            out.append(
                f"| {r.name} | {_secs(r.median_e2e_s)} | {r.peer_of or '-'} | "
                f"{_secs(ours.median_e2e_s if ours else None)} | {_ratio(r.ours_vs_peer)} |"
            )
    with_text = [r for r in report.results if r.outputs]
    if with_text:
        seed = next(iter(with_text[0].outputs))
        out.append(f"\n### Outputs side by side (seed {seed}, first timed invocation)\n")
        for r in with_text:
            text = r.sample_text or " ".join(map(str, next(iter(r.outputs.values()))))
            out.append(f"**{r.label}** (`{r.name}`)\n")
            out.append("\n".join("> " + line for line in text.splitlines() or [""]))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


CSV_COLUMNS = (
    "name", "label", "engine", "mode", "rule", "tv_budget", "k", "policy", "temperature",
    "top_p", "repetition_penalty", "bonus", "dispatch", "verify_attention", "timed_requests",
    "acceptance", "rounds_per_request", "mean_accepted_length", "median_e2e_s", "min_e2e_s",
    "max_e2e_s", "ttft_s", "decode_tok_s", "speedup_vs_target",
    *(f"{p}_ms" for p in PHASES), "outside_rounds_ms", "traced_e2e_s", "tracing_overhead", "kernel",
    "target_nll", "target_nll_baseline", "mean_tv", "greedy_match", "ours_vs_peer",
)  # fmt: skip


def _report_csv(report: BenchReport) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in report.results:
        d = r.to_dict()
        s = r.settings
        flat = {**d, **d["quality"], **{k: s.get(k) for k in CSV_COLUMNS if k in s}}
        for p in PHASES:
            flat[f"{p}_ms"] = (r.phase_ms or {}).get(p)
        w.writerow(["" if flat.get(c) is None else flat.get(c) for c in CSV_COLUMNS])
    return buf.getvalue()


def print_table(report: BenchReport, console: Any) -> None:
    """The terminal table: the seed's columns plus what was given up."""
    from rich.table import Table

    table = Table(title="benchmark", title_justify="left")
    for col in ("configuration", "acceptance", "rounds/req", "median E2E", "min-max",
                "TTFT", "tok/s", "vs target", "NLL Δ", "mean TV", "greedy", "kernel"):  # fmt: skip
        table.add_column(col, no_wrap=col == "configuration")
    for r in report.results:
        d = r.to_dict()
        diff = r.nll_delta
        gm = "-" if r.greedy_match is None else ("yes" if r.greedy_match else "[red]no[/red]")
        table.add_row(
            r.name,
            _pct(r.acceptance),
            _num(r.rounds_per_request, ".1f") if r.speculative else "-",
            _secs(r.median_e2e_s),
            f"{_num(d['min_e2e_s'])}-{_num(d['max_e2e_s'])}",
            _secs(d["ttft_s"]),
            _num(d["decode_tok_s"], ".1f"),
            _ratio(r.speedup_vs_target),
            _num(diff, "+.3f"),
            _num(r.mean_tv),
            gm,
            r.kernel or "-",
        )
    console.print(table)
    for r in report.results:
        if r.fallback_reason:
            console.print(f"[yellow]{r.name}: {r.fallback_reason}[/yellow]")
        if r.divergence is not None:
            dv = r.divergence
            console.print(
                f"[yellow]{r.name}: greedy output left target-only's at token {dv.position} "
                f"({dv.target_only_token} vs {dv.speculative_token}, margin "
                f"{_num(dv.logit_margin, '.4f')})[/yellow]"
            )


# --------------------------------------------------------------------------- CLI


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """`specdec-tui bench` flags: protocol, settings (profiles or flags), prompt, outputs, peer."""
    g = parser.add_argument_group("protocol")
    g.add_argument("--tokens", type=int, default=256, help="new tokens per request (EOS ignored)")
    g.add_argument("--seeds", type=int, default=3, help="seeds per invocation")
    g.add_argument("--invocations", type=int, default=3, help="timed invocations per setting")
    g.add_argument("--warmup", type=int, default=1, help="warm-up requests per setting")
    g.add_argument("--no-traced", action="store_true", help="skip the traced run (no phase split)")
    g.add_argument("--no-quality", action="store_true", help="skip NLL scoring and greedy check")

    g = parser.add_argument_group(
        "settings",
        "--profile NAME[:key=value,...] (repeatable) benchmarks saved profiles, with per-profile "
        "overrides; the flags below then override every profile. Without --profile the flags "
        "define one speculative setting. A target-only baseline is always measured.",
    )
    g.add_argument("--profile", dest="bench_profiles", action="append", default=[],
                   metavar="NAME", help="a saved profile or preset (repeatable)")  # fmt: skip
    # SUPPRESS: given here it wins; absent, the top-level --profiles-dir is kept.
    g.add_argument("--profiles-dir", default=argparse.SUPPRESS, help="where profiles are read")
    g.add_argument("--mode", choices=MODES, default=None)
    g.add_argument("--rule", choices=RULES, default=None)
    g.add_argument("--tv", type=float, default=None, help="TV budget in [0, 1] (mentored rule)")
    g.add_argument("--k", type=int, default=None, help="draft length (fixed k, or starting k)")
    g.add_argument("--policy", choices=POLICIES, default=None)
    g.add_argument("--temperature", type=float, default=None)
    g.add_argument("--top-p", type=float, default=None)
    g.add_argument("--repetition-penalty", type=float, default=None)
    g.add_argument("--no-bonus", action="store_true", help="no bonus token (the seed's engine)")
    g.add_argument("--dispatch", choices=DISPATCH, default=None)
    g.add_argument("--verify-attention", choices=VERIFY_ATTENTION, default=None)
    g.add_argument("--fused-draft", action="store_true", default=None,
                   help="compiled single-token draft steps")  # fmt: skip
    g.add_argument("--seed", type=int, default=None, help="first seed (then seed+1, ...)")

    g = parser.add_argument_group("prompt")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--prompt", default=None, help="the user message")
    src.add_argument("--prompt-file", default=None, help="a file holding the user message")
    src.add_argument("--prompt-name", default=None,
                     help=f"a shipped prompt (default {DEFAULT_PROMPT}); see --list-prompts")  # fmt: skip
    g.add_argument("--prompt-tokens", type=int, default=None,
                   help="cut the prompt at a word so the templated prompt is at most N tokens "
                   "(shipped prompts may set a default, e.g. creative-800)")  # fmt: skip
    g.add_argument("--list-prompts", action="store_true", help="list shipped prompts and exit")

    g = parser.add_argument_group("outputs")
    g.add_argument("--markdown", default=None, metavar="PATH")
    g.add_argument("--json", default=None, metavar="PATH")
    g.add_argument("--csv", default=None, metavar="PATH")
    g.add_argument("--peer", choices=PEERS, default=None,
                   help="also time mlx-lm's own loops (greedy) on the same models")  # fmt: skip
    g.add_argument("--peer-k", type=int, default=None,
                   help="draft length for the peer (default: the first fixed-k setting's k)")  # fmt: skip


_FLAG_FIELDS = {
    "mode": "mode",
    "rule": "rule",
    "tv": "tv_budget",
    "k": "k",
    "policy": "policy",
    "temperature": "temperature",
    "top_p": "top_p",
    "repetition_penalty": "repetition_penalty",
    "dispatch": "dispatch",
    "verify_attention": "verify_attention",
    "fused_draft": "fused_draft",
    "seed": "seed",
}


def _flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    out = {
        f: getattr(args, a) for a, f in _FLAG_FIELDS.items() if getattr(args, a, None) is not None
    }
    if getattr(args, "no_bonus", False):
        out["bonus"] = False
    return out


def _parse_overrides(spec: str) -> tuple[str, dict[str, Any]]:
    """'fixed-8-tv1:dispatch=gemv,bonus=true' -> ('fixed-8-tv1', {...}) typed like Settings."""
    name, _, rest = spec.partition(":")
    if not rest:
        return name, {}
    defaults = Settings()
    out: dict[str, Any] = {}
    for part in rest.split(","):
        key, eq, raw = part.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not hasattr(defaults, key):
            raise BenchError(f"--profile {spec}: {part!r} is not a known key=value setting.")
        want = type(getattr(defaults, key))
        raw = raw.strip()
        try:
            if want is bool:
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                out[key] = raw.lower() in ("true", "1", "yes")
            else:
                out[key] = want(raw)
        except ValueError:
            raise BenchError(
                f"--profile {spec}: {key} must be a {want.__name__}, got {raw!r}."
            ) from None
    return name, out


def settings_from_args(args: argparse.Namespace) -> list[BenchSetting]:
    """The rows a command line asks for: profiles (with overrides) or one flag-built setting."""
    from core.profile import load_profile

    specs = list(getattr(args, "bench_profiles", None) or [])
    top = getattr(args, "profile", None)  # the top-level --profile, when given before `bench`
    if isinstance(top, str) and top and top not in specs:
        specs.insert(0, top)
    flags = _flag_overrides(args)
    override_dir = getattr(args, "profiles_dir", None)
    rows: list[BenchSetting] = []
    for spec in specs:
        name, extra = _parse_overrides(spec)
        profile = load_profile(name, override_dir)
        s = profile.settings.replace(**extra, **flags)
        rows.append(BenchSetting(spec if not flags else f"{spec}+flags", s))
    if not rows:
        flags.setdefault("mode", "speculative")
        s = Settings().replace(**flags)
        rows.append(BenchSetting(describe(s), s))
    return rows


def _prompt_from_args(args: argparse.Namespace) -> tuple[str, str, int | None]:
    """(name, text, token budget) of the prompt the command line asks for."""
    if args.prompt is not None:
        if not args.prompt.strip():
            raise BenchError("--prompt is empty; give the user message to benchmark.")
        return "inline", args.prompt, args.prompt_tokens
    if args.prompt_file is not None:
        path = Path(args.prompt_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise BenchError(f"Could not read the prompt file {path}: {exc}.") from None
        if not text:
            raise BenchError(f"The prompt file {path} is empty.")
        return path.name, text, args.prompt_tokens
    name = args.prompt_name or DEFAULT_PROMPT
    text, budget = _read_prompt(name)
    return name, text, args.prompt_tokens if args.prompt_tokens is not None else budget


def _check_output_paths(args: argparse.Namespace) -> None:
    """Fail before a long run, not after it, when an output cannot be written there."""
    for flag in ("markdown", "json", "csv"):
        value = getattr(args, flag, None)
        if value is None:
            continue
        parent = Path(value).expanduser().resolve().parent
        if not parent.is_dir():
            raise BenchError(f"--{flag} {value}: the folder {parent} does not exist.")
        if Path(value).is_dir():
            raise BenchError(f"--{flag} {value} is a folder, not a file.")


def _write(path: str, text: str) -> None:
    from core.profile import write_atomic

    write_atomic(Path(path).expanduser(), text.encode("utf-8"))


def run_bench_cli(args: argparse.Namespace) -> int:
    """`specdec-tui bench`: load the pair, run the protocol with a progress bar, write reports."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console()
    if not console.is_terminal:  # a log file: room for every column rather than 80
        console.width = max(console.width, 160)
    err = Console(stderr=True)
    if getattr(args, "list_prompts", False):
        for name in prompt_names():
            console.print(f"{name}  ({prompt_kind(name)})")
        return 0
    for flag in ("tokens", "seeds", "invocations"):
        if getattr(args, flag) < 1:
            raise BenchError(f"--{flag} must be at least 1, got {getattr(args, flag)}.")
    if args.warmup < 0:
        raise BenchError(f"--warmup must be at least 0, got {args.warmup}.")
    _check_output_paths(args)
    rows = settings_from_args(args)
    prompt_name, text, budget = _prompt_from_args(args)

    first = rows[0].settings
    target = args.target or first.target
    draft = args.draft or first.draft
    others = {(b.settings.target, b.settings.draft) for b in rows} - {(first.target, first.draft)}
    if others and not (args.target and args.draft):
        err.print(
            f"[yellow]settings name different models; all rows run on {target} / {draft}[/yellow]"
        )
    from core.engine import Engine
    from core.models import load_pair

    needs_draft = args.peer is not None or any(b.settings.mode != "target-only" for b in rows)
    with err.status(f"loading {target} / {draft}"):
        pair = load_pair(target, draft if needs_draft else None)
        engine = Engine.from_pair(pair)
    if pair.draft is not None and not pair.speculation_ok:
        err.print(f"[yellow]{pair.speculation_reason}[/yellow]")
    prompt_ids, used = fit_prompt_ids(pair.target.tokenizer, text, budget)

    peer = None
    if args.peer == "mlx-lm":
        k = args.peer_k
        if k is None:
            k = next(
                (b.settings.k for b in rows
                 if b.settings.mode == "speculative" and b.settings.policy == "fixed"), 4,
            )  # fmt: skip
        if not 1 <= k <= 16:
            raise BenchError(f"--peer-k must be between 1 and 16, got {k}.")
        peer = Peer(
            target=pair.target.model,
            draft=pair.draft.model if pair.draft is not None else None,
            k=k,
            vocab_size=pair.vocab_size,
        )

    def decode(ids: list[int]) -> str:
        return str(pair.target.tokenizer.decode(ids))

    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=err, transient=True,
    )  # fmt: skip
    with bar:
        task = bar.add_task("benchmark", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=label[:48])

        report = run_protocol(
            engine, prompt_ids, rows,
            tokens=args.tokens, seeds=args.seeds, invocations=args.invocations,
            warmup=args.warmup, traced=not args.no_traced, progress=progress, decode=decode,
            peer=peer, quality=not args.no_quality,
        )  # fmt: skip
    report.protocol["command"] = "specdec-tui " + " ".join(_quote(a) for a in sys.argv[1:])
    report.protocol["prompt"] = {
        "name": prompt_name,
        "kind": prompt_kind(prompt_name),
        "text": used,
        "cut_to_tokens": budget,
    }
    report.protocol["models"] = {
        "target": f"{pair.target.spec} ({pair.target.name})",
        "draft": f"{pair.draft.spec} ({pair.draft.name})" if pair.draft is not None else None,
        "random_weights": bool(pair.target.random_weights),
        "vocab_size": pair.vocab_size,
    }
    print_table(report, console)
    for flag, render in (("markdown", report.to_markdown), ("json", report.to_json),
                         ("csv", report.to_csv)):  # fmt: skip
        path = getattr(args, flag, None)
        if path:
            _write(path, render())
            console.print(f"wrote {path}")
    return 0


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
