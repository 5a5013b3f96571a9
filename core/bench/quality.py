"""What a setting gave up: the target's NLL of its text, and the greedy-equivalence check.

Both compare against target-only text with the same sampling parameters and seeds; the
scorer is the target's own weights over a fresh cache, so a score never depends on what the
engine did before it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from core.bench.requests import run_request
from core.bench.results import BenchResult, BenchSetting, Divergence, sampling_key
from core.primitives.cached_model import CachedModel
from core.settings import Settings

NLL_BASIS = (
    "raw target logits at temperature 1 (no top-p, no repetition penalty), teacher-forced over "
    "prompt + generated text from an empty cache; mean over the generated tokens"
)
# Which target-only outputs each quality check needs generated, by sampling key.
Plan = dict[str, dict[tuple[Any, ...], Settings]]


class _Scorer:
    """Teacher-forced target forwards over prompt + text, the prompt prefilled once.

    Why not the engine's cache: the score must not depend on what the engine did; a fresh
    cache with the prompt prefilled, trimmed back after each text, is the same as a fresh
    forward over prompt + text each time, at one prefill's cost.

    Why a memo: a text's score is a function of its tokens, and a run's texts repeat (greedy
    target-only is scored as the baseline and as its own row; a mentored text at TV 0 or a
    lossless greedy one is target-only's): each distinct text costs one forward of its rows.
    """

    def __init__(self, model: Any, prompt_ids: Sequence[int], vocab: int) -> None:
        self.vocab = vocab
        self.last = int(prompt_ids[-1])
        self.head = [int(t) for t in prompt_ids[:-1]]
        self.held = CachedModel.fresh(model)
        self.held.prefill(self.head)
        self.scored: dict[tuple[int, ...], tuple[float, int]] = {}

    def logits(self, ids: Sequence[int]) -> mx.array:
        """Raw float32 logits [len(ids), V]: row i predicts ids[i] from prompt + ids[:i]."""
        fed = [self.last, *(int(t) for t in ids[:-1])]
        out = self.held.forward(mx.array(fed), self.vocab).astype(mx.float32)
        mx.eval(out)
        self.held.seq.extend(fed)
        self.held.rewind(self.head, start=len(self.head))  # back to the prompt alone
        return out

    def nll(self, ids: Sequence[int]) -> tuple[float, int]:
        """Summed negative log-likelihood of ids and their count (see NLL_BASIS)."""
        key = tuple(int(t) for t in ids)
        if not key:
            return 0.0, 0
        if key not in self.scored:
            logits = self.logits(key)
            logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
            picked = mx.take_along_axis(logprobs, mx.array(key)[:, None], axis=-1)
            self.scored[key] = (float(-picked.sum().item()), len(key))
        return self.scored[key]


def scorer_for(engine: Any, prompt_ids: Sequence[int]) -> _Scorer:
    """A scorer on the engine's target weights (the model whose NLL the report states)."""
    return _Scorer(engine.target_model, prompt_ids, int(engine.vocab_size))


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


def divergence_margin(
    scorer: _Scorer, s: Settings, prompt_ids: Sequence[int], prefix: Sequence[int], a: int, b: int
) -> float:
    """logit(a) - logit(b) of the target after prompt + prefix, penalised as the rule saw it."""
    from core.primitives.sampling import LogitsConfig, penalize

    row = scorer.logits([*prefix, 0])[-1:]
    if s.repetition_penalty != 1.0:
        ctx = mx.array([*prompt_ids, *prefix][-s.repetition_context :])
        cfg = LogitsConfig(1.0, 1.0, s.repetition_penalty, s.repetition_context)
        row = penalize(row, ctx, cfg)
    return float((row[0, a] - row[0, b]).item()) if a >= 0 and b >= 0 else float("nan")


def plan_references(prepared: list[BenchSetting], same_engine: bool, quality: bool) -> Plan:
    """Which target-only outputs must be generated untimed (no timed row has their sampling)."""
    if not quality:
        return {"nll": {}, "greedy": {}}
    timed = {sampling_key(b.settings) for b in prepared if b.settings.mode == "target-only"}
    nll: dict[tuple[Any, ...], Settings] = {}
    greedy: dict[tuple[Any, ...], Settings] = {}
    for b in prepared:
        key = sampling_key(b.settings)
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


def assess_quality(
    engine: Any,
    reference: Any,
    prompt_ids: Sequence[int],
    prepared: list[BenchSetting],
    results: dict[str, BenchResult],
    seed_lists: dict[str, list[int]],
    plan: Plan,
    tick: Callable[[str], None],
    check_cancel: Callable[[], None],
    cancel: threading.Event | None,
) -> None:
    """NLL of each setting's text against matched target-only text, and the greedy check."""
    seeds = next(iter(seed_lists.values()))
    own: dict[tuple[Any, ...], dict[int, list[int]]] = {}
    for b in prepared:
        if b.settings.mode == "target-only":
            own.setdefault(sampling_key(b.settings), results[b.name].outputs)

    def outputs_per_seed(eng: Any, s: Settings, label: str) -> dict[int, list[int]]:
        """One reference request per seed: the tokens other settings are compared against."""
        outs: dict[int, list[int]] = {}
        for seed in seeds:
            check_cancel()
            req = run_request(eng, prompt_ids, s.replace(seed=seed), cancel)
            assert req.summary is not None
            outs[seed] = list(req.summary.token_ids)
            tick(label)
        return outs

    for key, s in plan["nll"].items():
        own[key] = outputs_per_seed(engine, s, "target-only reference")
    refs = own if reference is engine else {}
    for key, s in plan["greedy"].items():
        refs[key] = outputs_per_seed(reference, s, "greedy reference")

    scorer = scorer_for(engine, prompt_ids)
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
        key = sampling_key(b.settings)
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
        margin = divergence_margin(scorer, s, prompt_ids, expected[:pos], a, b)
        r.greedy_match = False
        r.divergence = Divergence(seed, pos, a, b, margin)
        return
