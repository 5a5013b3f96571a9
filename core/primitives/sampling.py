"""Logits to distributions, and the acceptance rules of speculative sampling, on the device.

Everything here is lazy MLX: the engine builds one graph per round and syncs once.
The rules (docs/ARCHITECTURE.md, "The acceptance rules"):
  greedy    accept while draft == argmax p; the first mismatch becomes argmax p.
  lossless  accept x ~ q with min(1, p(x)/q(x)); on rejection sample norm(max(p - q, 0)).
  mentored  theta = min(1, D/d), d = TV(p, q); pi = (1 - theta) p + theta q; accept with
            min(1, pi(x)/q(x)); on rejection sample norm(max(pi - q, 0)) = norm(max(p - q, 0)).
After k accepted drafts the target's row k is already computed: the bonus token comes from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
from mlx_lm.sample_utils import apply_top_p, make_repetition_penalty


@dataclass(frozen=True)
class LogitsConfig:
    """What turns raw logits into a distribution (both models use the same one)."""

    temperature: float = 1.0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    repetition_context: int = 20

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def penalize(logits: mx.array, context: mx.array | None, cfg: LogitsConfig) -> mx.array:
    """Repetition penalty row by row: row i sees `context` plus the i rows' inputs before it.

    `logits` is [R, V]; `context` holds the committed tokens followed by the R - 1 tokens the
    rows were fed after the first (the draft tokens), so row i uses context[: C + i]. The
    penalty itself is mlx-lm's processor; only the per-row window is ours.
    """
    if cfg.repetition_penalty == 1.0 or context is None or context.size == 0:
        return logits
    proc = make_repetition_penalty(cfg.repetition_penalty, cfg.repetition_context)
    rows = logits.shape[0]
    base = context.size - (rows - 1)
    out = [proc(context[: base + i], logits[i : i + 1]) for i in range(rows)]
    return mx.concatenate(out, axis=0) if rows > 1 else out[0]


def to_probs(logits: mx.array, cfg: LogitsConfig) -> mx.array:
    """Temperature, then top-p (mlx-lm's), then softmax; float32 [R, V]."""
    logits = logits.astype(mx.float32)
    logprobs = logits / cfg.temperature
    logprobs = logprobs - mx.logsumexp(logprobs, axis=-1, keepdims=True)
    if cfg.top_p < 1.0:
        logprobs = apply_top_p(logprobs, cfg.top_p)
    return mx.softmax(logprobs, axis=-1)


def sample(probs: mx.array, key: mx.array) -> mx.array:
    """One token per row from probabilities (zeros are never drawn)."""
    return mx.random.categorical(mx.log(probs), axis=-1, key=key)


def one_hot(tokens: mx.array, vocab: int) -> mx.array:
    """q of a deterministic draft: probability 1 on each proposed token ([k] -> [k, V]).

    With it every rule stays exact: lossless accepts x with probability p(x) and otherwise
    samples norm(max(p - q, 0)) (p without x); mentored has d = 1 - p(x).
    """
    return (mx.arange(vocab)[None, :] == tokens[:, None].astype(mx.int32)).astype(mx.float32)


def tv_distance(p: mx.array, q: mx.array) -> mx.array:
    """Total variation 1/2 sum |p - q| per row."""
    return 0.5 * mx.abs(p - q).sum(axis=-1)


def mentored_mix(p: mx.array, q: mx.array, tv_budget: float) -> tuple[mx.array, mx.array]:
    """pi = (1 - theta) p + theta q with theta = min(1, D / d) (1 when d = 0); returns (pi, theta*d).

    theta * d = TV(pi, p) is the realised distance, never above D.
    """
    d = tv_distance(p, q)
    theta = mx.where(d <= tv_budget, 1.0, tv_budget / mx.maximum(d, 1e-30))
    theta = theta[..., None]
    pi = (1.0 - theta) * p + theta * q
    return pi, theta[..., 0] * d


def acceptance_prob(pi: mx.array, q: mx.array, x: mx.array) -> mx.array:
    """min(1, pi(x) / q(x)) per row for the drafted tokens x ([k])."""
    px = mx.take_along_axis(pi, x[:, None], axis=-1)[:, 0]
    qx = mx.take_along_axis(q, x[:, None], axis=-1)[:, 0]
    return mx.where(qx > 0, mx.minimum(1.0, px / mx.where(qx > 0, qx, 1.0)), 0.0)


def residual(p: mx.array, q: mx.array) -> mx.array:
    """norm(max(p - q, 0)); where it is all zero (p == q: rejection impossible) fall back to p."""
    r = mx.maximum(p - q, 0.0)
    s = r.sum(axis=-1, keepdims=True)
    return mx.where(s > 0, r / mx.where(s > 0, s, 1.0), p)


@dataclass(frozen=True)
class Verdict:
    """The acceptance result, still on the device: one host sync reads it."""

    n_accepted: mx.array  # scalar int
    next_token: mx.array  # scalar int: the correction (n < k) or the bonus (n == k)
    tv_sum: mx.array  # sum of realised TV(pi, p) over the decided draft positions


def accept_greedy(p_argmax: mx.array, drafts: mx.array) -> Verdict:
    """Greedy verification: p_argmax [k+1] is the target's argmax per row, drafts [k]."""
    k = drafts.shape[0]
    if k == 0:
        return Verdict(mx.array(0), p_argmax[0], mx.array(0.0))
    match = (drafts == p_argmax[:k]).astype(mx.int32)
    n = mx.cumprod(match).sum()
    return Verdict(n, mx.take(p_argmax, n), mx.array(0.0))


def accept_greedy_packed(logits: mx.array, drafts: mx.array) -> mx.array:
    """Greedy verification as one array for the round's one read: [drafts, argmax p per row,
    n accepted] (k + k + 1 + 1 ids; logits [k+1, V], drafts [k]).

    The round reads the drafts, the target's argmax rows and n together, and takes the
    correction or the bonus, row n of the argmax, on the host: fewer graph nodes and MLX
    calls than `accept_greedy`'s Verdict plus the round's packing
    (docs/benchmarks/round-overhead.md). n itself is still counted on the device.
    """
    p_argmax = mx.argmax(logits, axis=-1)
    k = drafts.shape[0]
    if k == 0:
        return mx.concatenate([p_argmax, mx.zeros((1,), p_argmax.dtype)])
    n = mx.cumprod(drafts == p_argmax[:k]).sum(keepdims=True).astype(p_argmax.dtype)
    return mx.concatenate([drafts, p_argmax, n])


def accept_sampled(
    p: mx.array, q: mx.array, drafts: mx.array, rule: str, tv_budget: float, key: mx.array
) -> Verdict:
    """Lossless or mentored verification, vectorised over the k positions.

    p is [k+1, V] (target rows, the last one for the bonus), q is [k, V] (draft rows),
    drafts [k] were drawn from q. Output tokens follow p (lossless) or pi (mentored) exactly.
    """
    k = drafts.shape[0]
    k_u, k_r = mx.random.split(key, 2)
    if k == 0:
        return Verdict(mx.array(0), sample(p[0], k_r), mx.array(0.0))
    if rule == "mentored":
        pi, tv = mentored_mix(p[:k], q, tv_budget)
    elif rule == "lossless":
        pi, tv = p[:k], None  # pi = p: no distance realised, no graph built for one
    else:
        raise ValueError(f"accept_sampled has no rule {rule!r}")
    a = acceptance_prob(pi, q, drafts)
    u = mx.random.uniform(shape=(k,), key=k_u)
    ok = (u < a).astype(mx.int32)
    n = mx.cumprod(ok).sum()
    # Row n of p against row n of q (a zero row past the end, so row k is the bonus from p).
    q_ext = mx.concatenate([q, mx.zeros((1, q.shape[-1]), q.dtype)], axis=0)
    res = residual(mx.take(p, n, axis=0), mx.take(q_ext, n, axis=0))
    if tv is None:
        return Verdict(n, sample(res, k_r), mx.array(0.0))
    decided = (mx.arange(k) <= n).astype(mx.float32)  # positions whose distribution was used
    return Verdict(n, sample(res, k_r), (tv * decided).sum())


def output_distribution(p: mx.array, q: mx.array, rule: str, tv_budget: float) -> mx.array:
    """Exact distribution of the first token emitted at one position (for tests and docs).

    P(y) = sum_x q(x) a(x) [x = y] + (1 - sum_x q(x) a(x)) residual(y), built from the same
    pieces the sampler uses, so enumeration over a small vocabulary checks the sampler's maths.
    """
    p2, q2 = p[None], q[None]
    if rule == "mentored":
        pi, _ = mentored_mix(p2, q2, tv_budget)
    else:
        pi = p2
    a = mx.where(q2 > 0, mx.minimum(1.0, pi / mx.where(q2 > 0, q2, 1.0)), 0.0)
    kept = q2 * a
    reject = 1.0 - kept.sum(axis=-1, keepdims=True)
    return (kept + reject * residual(p2, q2))[0]
