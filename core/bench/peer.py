"""The mlx-lm peer: its own `generate_step` / `speculative_generate_step` on the same models.

Why: "ours vs theirs" is only fair on the same weights, the same vocabulary slice, greedy, and
the same protocol, so the peer rows are timed like ours and linked to the greedy row of ours
they are compared with.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from core.bench.quality import divergence_margin, first_divergence, scorer_for
from core.bench.results import BenchResult, BenchSetting, Divergence
from core.primitives.acceptance import PositionTally
from core.settings import Settings

PEERS = ("mlx-lm", "transformers-pld", "transformers-assisted")


@dataclass(frozen=True)
class Peer:
    """The models mlx-lm's own loops run on (the same ones the engine holds) and their k."""

    target: Any
    draft: Any | None
    k: int
    vocab_size: int
    name: str = "mlx-lm"


@dataclass
class _PeerRequest:
    """One mlx-lm request: its timings, tokens, and rounds (speculative only)."""

    e2e_s: float
    ttft_s: float
    ids: list[int]
    rounds: int
    positions: PositionTally
    round_ms: list[float]


def is_peer_match(s: Settings, mode: str, k: int, peer: str = "mlx-lm") -> bool:
    """Whether a row of ours runs what the peer's loop of `mode` runs: greedy; for mlx-lm's
    speculative loop and transformers' assisted generation a fixed k with the bonus from the
    draft model, for transformers' prompt lookup our lookup (its k our own: the comparison is
    of how far each copies)."""
    same = s.mode == mode and s.greedy and s.repetition_penalty == 1.0
    if mode == "speculative" and peer == "transformers-pld":
        return same and s.draft_source == "lookup"
    if mode == "speculative":
        same = same and s.policy == "fixed" and s.k == k and s.bonus and s.draft_source == "model"
    return same


def with_peer_counterparts(
    rows: list[BenchSetting], k: int, peer: str = "mlx-lm"
) -> list[BenchSetting]:
    """Greedy rows of ours that mlx-lm's loops are compared with (added when none match)."""
    base = rows[0].settings
    greedy = {"temperature": 0.0, "rule": "greedy", "repetition_penalty": 1.0, "top_p": 1.0}
    out = list(rows)
    names = {b.name for b in rows}
    if not any(is_peer_match(b.settings, "target-only", k) for b in rows):
        name = "target-only greedy"
        out.append(BenchSetting(name, base.replace(mode="target-only", **greedy)))
        names.add(name)
    if not any(is_peer_match(b.settings, "speculative", k, peer) for b in rows):
        if peer == "transformers-pld":
            s = base.replace(mode="speculative", draft_source="lookup", policy="cost-aware",
                             k_min=0, k_max=32, bonus=True, **greedy)
            out.append(BenchSetting("lookup greedy", s))
        else:
            s = base.replace(mode="speculative", policy="fixed", k=k, k_max=max(k, base.k_max),
                             bonus=True, **greedy)
            out.append(BenchSetting(f"speculative greedy k={k}", s))
    return out


def paired_counterparts(rows: Sequence[BenchSetting], peer: Any) -> dict[bool, BenchSetting]:
    """The row of ours each of mlx-lm's loops runs against, request by request (False:
    target-only, True: speculative): the first greedy row that runs what that loop runs."""
    out: dict[bool, BenchSetting] = {}
    for speculative, mode in ((False, "target-only"), (True, "speculative")):
        if speculative and peer.draft is None:
            continue
        match = next((b for b in rows if is_peer_match(b.settings, mode, peer.k, peer.name)),
                     None)
        if match is not None:
            out[speculative] = match
    return out


def _peer_request(
    peer: Any, prompt_ids: Sequence[int], tokens: int, speculative: bool
) -> _PeerRequest:
    """One request of the peer's from a fresh cache (mlx-lm builds one per call)."""
    if peer.name in ("transformers-pld", "transformers-assisted"):
        from core.bench.peer_pld import pld_request

        return _PeerRequest(*pld_request(peer, prompt_ids, tokens, speculative))  # type: ignore[arg-type]
    from mlx_lm.generate import generate_step, speculative_generate_step

    V = peer.vocab_size

    def sampler(logprobs: mx.array) -> mx.array:
        return mx.argmax(logprobs[..., :V], axis=-1)  # the same sliced vocab as ours

    prompt = mx.array(list(prompt_ids), dtype=mx.uint32)
    ids: list[int] = []
    positions = PositionTally()
    round_ms: list[float] = []
    t0 = time.perf_counter()
    ttft = None
    if not speculative:
        for tok, _ in generate_step(prompt, peer.target, max_tokens=tokens, sampler=sampler):
            ids.append(int(tok))
            ttft = ttft if ttft is not None else time.perf_counter() - t0
        e2e = time.perf_counter() - t0
        return _PeerRequest(e2e, ttft or e2e, ids, len(ids), positions, [])
    gen = speculative_generate_step(
        prompt, peer.target, peer.draft, num_draft_tokens=peer.k, max_tokens=tokens,
        sampler=sampler,
    )
    rounds = proposed = accepted = 0
    new_round, last = True, t0
    for tok, _, from_draft in gen:
        now = time.perf_counter()
        if new_round:  # mlx-lm drafts min(k, remaining) at the start of each round
            rounds += 1
            proposed, accepted = min(peer.k, tokens - len(ids)), 0
        ids.append(int(tok))
        ttft = ttft if ttft is not None else now - t0
        accepted += bool(from_draft)
        new_round = not from_draft
        if new_round:
            positions.observe(proposed, accepted)
            round_ms.append((now - last) * 1e3)
            last = now
    if not new_round:  # the token budget ended a round inside its accepted drafts
        positions.observe(proposed, accepted)
    e2e = time.perf_counter() - t0
    return _PeerRequest(e2e, ttft or e2e, ids, rounds, positions, round_ms)


def run_peer(
    peer: Any,
    prompt_ids: Sequence[int],
    tokens: int,
    seeds: int,
    invocations: int,
    warmup: int,
    tick: Callable[[str], None],
    check_cancel: Callable[[], None],
    paired: dict[bool, BenchSetting] | None = None,
    ours: Callable[[BenchSetting, int, int], float] | None = None,
    after_pair: Callable[[BenchSetting, int, int, float], None] | None = None,
    seed_values: Mapping[str, Sequence[int]] | None = None,
) -> list[BenchResult]:
    """mlx-lm's target-only and speculative loops, greedy, same protocol (median E2E).

    With `paired` rows and `ours(row, seed, invocation) -> E2E s` (a timed request of ours,
    recorded by the caller), each of mlx-lm's requests follows one of ours (ABAB..., the row's
    seeds from `seed_values`, row name -> seeds), and the pair's ratio is kept: the host's slow spells hit both sides of a pair,
    so the spread of the ratios, not two medians minutes apart, says whether ours is faster.
    `after_pair(row, seed, invocation, E2E)` runs after each pair (the caller's traced run).
    """
    kinds = [False] + ([True] if peer.draft is not None else [])
    paired = paired or {}
    out = []
    for speculative in kinds:
        settings: dict[str, Any] = {
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
        if peer.name == "transformers-pld":
            settings |= {"draft_source": "prompt-lookup", "prompt_lookup_num_tokens": peer.k,
                         "max_matching_ngram_size": peer.ngram, "dtype": peer.dtype,
                         "device": peer.device}
            name = (f"{peer.name} k={peer.k} ngram={peer.ngram}" if speculative
                    else f"transformers greedy ({peer.dtype})")
        if peer.name == "transformers-assisted":
            settings |= {"draft_source": "assistant-model", "num_assistant_tokens": peer.k,
                         "num_assistant_tokens_schedule": "constant",
                         "assistant_confidence_threshold": 0.0, "dtype": peer.dtype,
                         "device": peer.device}
            name = (f"{peer.name} k={peer.k}" if speculative
                    else f"transformers greedy ({peer.dtype})")
        r = BenchResult(name, name, settings, engine=peer.name)
        mine = paired.get(speculative) if ours is not None else None
        for _ in range(warmup):
            check_cancel()
            _peer_request(peer, prompt_ids, tokens, speculative)
            tick(f"warm-up {name}")
        n = 0
        seed_list = list(range(seeds))  # greedy: seeds change nothing but the count
        if mine is not None and seed_values is not None:
            seed_list = list(seed_values[mine.name])[:seeds]
        for inv in range(invocations):
            for seed in seed_list:
                ours_e2e = ours(mine, seed, inv) if mine is not None and ours else None
                check_cancel()
                req = _peer_request(peer, prompt_ids, tokens, speculative)
                r.e2e_s.append(req.e2e_s)
                r.ttft_all_s.append(req.ttft_s)
                k = len(req.ids)
                decode_s = req.e2e_s - req.ttft_s
                r.decode_all_tok_s.append((k - 1) / decode_s if k > 1 and decode_s > 0 else 0.0)
                r.rounds.append(req.rounds)
                r.tokens.append(k)
                r.positions.merge(req.positions)
                if n == 0:
                    r.outputs[0] = req.ids
                    r.trace = [{"total_ms": round(ms, 4)} for ms in req.round_ms]
                n += 1
                tick(f"{name} request {n}/{invocations * seeds}")
                if mine is not None and ours_e2e:
                    r.pairs.append({
                        "invocation": inv, "seed": seed, "ours": mine.name,
                        "ours_e2e_s": ours_e2e, "peer_e2e_s": req.e2e_s,
                        "ratio": req.e2e_s / ours_e2e,
                    })
                    if after_pair is not None:
                        after_pair(mine, seed, inv, ours_e2e)
        out.append(r)
    return out


def peer_quality(
    engine: Any, prompt_ids: Sequence[int], results: dict[str, BenchResult],
    prepared: list[BenchSetting],
) -> None:
    """Peer rows: NLL of their text, and whether it equals our greedy target-only text."""
    scorer = scorer_for(engine, prompt_ids)
    ours = next(
        (results[b.name] for b in prepared if is_peer_match(b.settings, "target-only", 0)), None
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
                margin = divergence_margin(
                    scorer, Settings(temperature=0.0), prompt_ids, expected[:pos], a, b
                )
                seed = next(iter(ours.outputs)) if ours is not None else 0
                r.divergence = Divergence(seed, pos, a, b, margin)


def link_peers(results: list[BenchResult]) -> None:
    """Each mlx-lm row names the row of ours it is compared with and the ratio between them."""
    ours = [r for r in results if r.engine == "specdec-tui"]
    for r in results:
        if r.engine == "specdec-tui":
            continue
        mode, k, kind = r.settings["mode"], r.settings["k"], r.settings["engine"]
        match = next(
            (o for o in ours if is_peer_match(Settings.from_dict(o.settings), mode, k, kind)),
            None,
        )
        if match is not None and match.median_e2e_s and r.median_e2e_s:
            r.peer_of = match.name
            r.ours_vs_peer = r.median_e2e_s / match.median_e2e_s
