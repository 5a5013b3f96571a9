"""Tiny seeded random models and a numpy-only chi-square, shared by the engine and sampling tests.

Not a conftest: tests import what they need (tests/core/conftest.py holds the loaded model pairs).

The models are mlx-lm llamas small enough to run thousands of rounds on a CPU in seconds.
Random llamas at default init give near-uniform next-token distributions that collapse onto
one repeated token under argmax, which would make every distribution and greedy test weak.
Scaling the embeddings (token identity dominates the residual stream) and the output head
(peakier softmax) gives distributions with a few dominant tokens that change with context.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx_lm.models import llama

VOCAB = 48
PROMPT = [5, 6, 7, 8, 9, 10]


def llama_args(
    *, hidden: int, layers: int, inter: int, vocab: int, tie: bool = False
) -> llama.ModelArgs:
    """The test llamas' shape (4 heads, 2 KV heads) at a width, depth and vocabulary: one
    place for what tiny_llama, the dispatch tests' quantized llama and the distributed
    worker's wide llama share."""
    return llama.ModelArgs(
        model_type="llama",
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=inter,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        vocab_size=vocab,
        rope_theta=10000.0,
        tie_word_embeddings=tie,
    )


def tiny_llama(
    layers: int,
    seed: int,
    *,
    vocab: int = VOCAB,
    embed_scale: float = 10.0,
    head_scale: float = 3.0,
) -> llama.Model:
    """A seeded random llama (hidden 64, 4 heads, 2 KV heads), untied head, weights evaluated."""
    mx.random.seed(seed)
    model = llama.Model(llama_args(hidden=64, layers=layers, inter=128, vocab=vocab))
    model.model.embed_tokens.weight = model.model.embed_tokens.weight * embed_scale
    model.lm_head.weight = model.lm_head.weight * head_scale
    mx.eval(model.parameters())
    return model


def dispatch_llama(
    *,
    hidden: int = 64,
    inter: int = 128,
    layers: int = 2,
    vocab: int = 96,
    tie: bool = False,
    quantize: bool = True,
    dtype: mx.Dtype = mx.float32,
    seed: int = 0,
) -> llama.Model:
    """A seeded random llama for the dispatch tests: 4-bit group-64 quantized unless asked
    otherwise, in `dtype`, tied or untied head, weights evaluated."""
    mx.random.seed(seed)
    model = llama.Model(llama_args(hidden=hidden, layers=layers, inter=inter, vocab=vocab, tie=tie))
    model.set_dtype(dtype)
    if quantize:
        nn.quantize(model, group_size=64, bits=4)
    model.eval()
    mx.eval(model.parameters())
    return model


def next_token_logits(model: llama.Model, contexts: Sequence[Sequence[int]]) -> np.ndarray:
    """Raw last-position logits [len(contexts), V] for equal-length contexts, no cache."""
    out = model(mx.array([list(c) for c in contexts]))[:, -1, :].astype(mx.float32)
    return np.array(out, dtype=np.float64)


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


# -- chi-square ---------------------------------------------------------------------------------

Z_999 = 3.090232306167813  # standard normal 0.999 quantile: every chi-square test uses alpha = 1e-3


def chi2_critical(df: int, z: float = Z_999) -> float:
    """Upper chi-square quantile by Wilson-Hilferty: df (1 - 2/(9df) + z sqrt(2/(9df)))^3.

    Against exact values at alpha = 1e-3 (scipy.stats.chi2.ppf(0.999, df)): df=1 10.83
    (WH 11.16), df=2 13.82 (14.13), df=4 18.47 (18.72), df=10 29.59 (29.76), df=30 59.70
    (59.81). It errs on the high side for small df, i.e. the tests are marginally more
    lenient than alpha = 1e-3 there; with fixed seeds they are deterministic anyway.
    """
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


def chi2_stat(
    counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0
) -> tuple[float, int]:
    """Pearson chi-square of observed `counts` against `probs`, and its degrees of freedom.

    Cells whose expected count is below `min_expected` are pooled into one cell (pooled
    cells with a total expected count still below it are pooled into the smallest kept cell).
    A cell with probability exactly 0 must have no observations: that is asserted, not pooled.
    """
    counts = np.asarray(counts, dtype=np.float64).ravel()
    probs = np.asarray(probs, dtype=np.float64).ravel()
    n = counts.sum()
    zero = probs <= 0.0
    assert counts[zero].sum() == 0, f"{int(counts[zero].sum())} draws landed on probability-0 cells"
    probs = probs / probs.sum()
    expected = probs * n
    big = (expected >= min_expected) & ~zero
    obs = list(counts[big])
    exp = list(expected[big])
    small_o, small_e = counts[~big & ~zero].sum(), expected[~big & ~zero].sum()
    if small_e >= min_expected:
        obs.append(small_o)
        exp.append(small_e)
    elif small_e > 0:
        i = int(np.argmin(exp))
        obs[i] += small_o
        exp[i] += small_e
    o, e = np.array(obs), np.array(exp)
    assert len(o) >= 2, "chi-square needs at least two cells"
    return float(((o - e) ** 2 / e).sum()), len(o) - 1


def assert_matches(counts: np.ndarray, probs: np.ndarray, what: str) -> float:
    """Fail when the chi-square test rejects `probs` for `counts` at alpha = 1e-3; return stat."""
    stat, df = chi2_stat(counts, probs)
    crit = chi2_critical(df)
    assert stat < crit, (
        f"{what}: chi2 = {stat:.1f} >= {crit:.1f} (df {df}, n {int(np.sum(counts))})"
    )
    return stat


def assert_rejects(counts: np.ndarray, probs: np.ndarray, what: str) -> None:
    """The same test must reject a wrong distribution: proof that the sample size has power."""
    if np.asarray(counts).ravel()[np.asarray(probs).ravel() <= 0.0].sum() > 0:
        return  # draws where the wrong law has no mass: rejected outright
    stat, df = chi2_stat(counts, probs)
    crit = chi2_critical(df)
    assert stat >= crit, f"{what}: the test has no power (chi2 {stat:.1f} < {crit:.1f}, df {df})"


def noisy_copy(model: llama.Model, noise: float, seed: int) -> llama.Model:
    """A draft that resembles `model`: same shape, each matrix plus `noise` x its std of noise.

    Like a quantised or distilled draft, it agrees with the target often but not always, so
    greedy and sampled rounds see both full acceptances (bonus tokens) and rejections.
    """
    from mlx.utils import tree_flatten, tree_unflatten

    args = model.args
    copy = llama.Model(args)
    key = mx.random.key(seed)
    params = []
    for name, w in tree_flatten(model.parameters()):
        key, sub = mx.random.split(key)
        if w.ndim > 1:
            w = w + noise * mx.std(w) * mx.random.normal(w.shape, key=sub)
        params.append((name, w))
    copy.update(tree_unflatten(params))
    mx.eval(copy.parameters())
    return copy
