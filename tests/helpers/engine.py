"""Running the engine in tests: one generate's events and summary, the cache invariant, and the
exact law of the first two tokens (with the sampler that counts them). The engine, drafting,
lookup and no-loss tests share these."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mlx.core as mx
import numpy as np

from core.decode.engine import Engine
from core.events import RoundEvent, RunSummary
from core.primitives.sampling import LogitsConfig, penalize, to_probs
from core.settings import Settings
from tests.helpers.tiny import PROMPT, VOCAB, next_token_logits, softmax


def run(
    engine: Engine,
    prompt: Sequence[int],
    settings: Settings,
    *,
    on_event: Callable[[RoundEvent, list[RoundEvent]], None] | None = None,
    **kw,
) -> tuple[list[RoundEvent], RunSummary]:
    """All events and the summary of one generate; `on_event` runs after each round."""
    events: list[RoundEvent] = []
    summary = None
    for item in engine.generate(list(prompt), settings, **kw):
        if isinstance(item, RunSummary):
            summary = item
            continue
        events.append(item)
        if on_event is not None:
            on_event(item, events)
    assert summary is not None, "generate ended without a RunSummary"
    return events, summary


def assert_caches(
    engine: Engine, text: Sequence[int], *, settled: bool, last_mode: str = "speculative"
) -> None:
    """Offsets equal the token lists' lengths and both lists are prefixes of `text`.

    `settled` (after generate returned): the model that ran the last round holds exactly
    text[:-1], the token the next round feeds being the only one not yet processed; that is
    the target after speculative and target-only rounds, the draft after draft-only ones.
    """
    st = engine.cache_state()
    text = list(text)
    assert st["target_offset"] == len(st["target_seq"]), st
    assert st["target_seq"] == text[: len(st["target_seq"])], (st["target_seq"], text)
    if "draft_seq" in st:
        assert st["draft_offset"] == len(st["draft_seq"]), st
        assert st["draft_seq"] == text[: len(st["draft_seq"])], (st["draft_seq"], text)
    if settled:
        exact = "draft_seq" if last_mode == "draft-only" else "target_seq"
        assert st[exact] == text[:-1], (exact, st[exact], text)
        if "draft_seq" in st:
            assert len(st["draft_seq"]) <= len(text) - 1


N_RUNS = 1000


def exact_pair_law(model, prompt: Sequence[int], cfg: LogitsConfig) -> np.ndarray:
    """P(t1, t2) [V, V] of sampling two tokens from `model` with `cfg`, by enumerating t1.

    Plain temperature uses a float64 softmax written here; with repetition penalty or top-p
    the processed distribution comes from core.primitives.sampling (what both modes apply; the claim
    tested is that speculation does not change the law, not how logits are processed).
    """
    plain = cfg.repetition_penalty == 1.0 and cfg.top_p == 1.0
    contexts = [list(prompt) + [t] for t in range(VOCAB)]
    l1 = next_token_logits(model, [prompt])
    l2 = next_token_logits(model, contexts)
    if plain:
        p1, p2 = softmax(l1, cfg.temperature)[0], softmax(l2, cfg.temperature)
    else:
        rc = cfg.repetition_context

        def processed(logits: np.ndarray, ctx: Sequence[int]) -> np.ndarray:
            row = penalize(
                mx.array(logits[None].astype(np.float32)), mx.array(list(ctx)[-rc:]), cfg
            )
            return np.array(to_probs(row, cfg)[0], dtype=np.float64)

        p1 = processed(l1[0], prompt)
        p2 = np.stack([processed(l2[t], contexts[t]) for t in range(VOCAB)])
    return p1[:, None] * p2


def sample_pairs(engine: Engine, settings: Settings, n: int) -> np.ndarray:
    """Counts [V, V] of the first two tokens over n runs with seeds 0..n-1 (one engine)."""
    table = np.zeros((VOCAB, VOCAB), dtype=np.int64)
    for seed in range(n):
        _, summary = run(engine, PROMPT, settings.replace(seed=seed))
        t1, t2 = summary.token_ids[:2]
        table[t1, t2] += 1
    return table


def counting(engine: Engine) -> dict[str, int]:
    """Count the engine's pipelined stretches of target steps, its drafting rounds and its
    plans that chose a source to draft (each of the engine's methods wrapped in place)."""
    counts = {"stretches": 0, "drafted": 0, "plans that draft": 0}
    stretches, rounds, plan = engine._single_model_rounds, engine._speculative_round, engine._plan

    def stretch(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        counts["stretches"] += 1
        yield from stretches(*a, **kw)

    def drafted(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        counts["drafted"] += 1
        return rounds(*a, **kw)

    def planned(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        p = plan(*a, **kw)
        counts["plans that draft"] += p.drafter is not None
        return p

    engine._single_model_rounds = stretch  # type: ignore[method-assign]
    engine._speculative_round = drafted  # type: ignore[method-assign]
    engine._plan = planned  # type: ignore[method-assign]
    return counts
