"""The acceptance rules' maths (core/primitives/sampling.py), exactly by enumeration and statistically.

Exact part: for one position, the first emitted token has probability
    P(y) = sum_x q(x) [a(x) 1{x = y} + (1 - a(x)) r(y)],  a = min(1, pi/q), r = norm(max(p - q, 0))
which must equal p (lossless) or pi = (1 - theta) p + theta q, theta = min(1, D/d) (mentored).
The references below are written from docs/ARCHITECTURE.md in float64 numpy, independently of the code.

Statistical part: `accept_sampled` itself, vmapped over thousands of seeded keys, against the
same closed forms by chi-square (tests/helpers/tiny.py; alpha = 1e-3 at a fixed seed, so every
test is deterministic). Each distribution test also checks that the same sample rejects a
plausible wrong answer, so a pass means something.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.primitives.sampling import (
    accept_greedy,
    accept_greedy_packed,
    accept_sampled,
    acceptance_prob,
    mentored_mix,
    output_distribution,
    residual,
    sample,
    tv_distance,
)
from tests.helpers.tiny import assert_matches, assert_rejects

# -- float64 references written from docs/ARCHITECTURE.md -----------------------------------------------


def ref_tv(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(p - q).sum())


def ref_pi(p: np.ndarray, q: np.ndarray, budget: float) -> tuple[np.ndarray, float]:
    """pi and the realised TV(pi, p) = theta d."""
    d = ref_tv(p, q)
    theta = 1.0 if d <= budget else budget / d
    return (1 - theta) * p + theta * q, theta * d


def ref_accept(pi: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.where(q > 0, np.minimum(1.0, pi / np.where(q > 0, q, 1.0)), 0.0)


def ref_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    r = np.maximum(p - q, 0.0)
    return r / r.sum() if r.sum() > 0 else p


def ref_output(p: np.ndarray, q: np.ndarray, rule: str, budget: float) -> np.ndarray:
    """P(first emitted token = y), by enumerating the draft x over the vocabulary."""
    pi = ref_pi(p, q, budget)[0] if rule == "mentored" else p
    a, r = ref_accept(pi, q), ref_residual(p, q)
    out = np.zeros_like(p)
    for x in range(len(p)):
        out[x] += q[x] * a[x]
        out += q[x] * (1.0 - a[x]) * r
    return out


def f32(a) -> mx.array:
    return mx.array(np.asarray(a, dtype=np.float32))


def np64(a: mx.array) -> np.ndarray:
    return np.array(a, dtype=np.float64)


def normalised(w) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    return (w / w.sum()).astype(np.float32).astype(np.float64)  # exactly what float32 holds


# -- fixed cases --------------------------------------------------------------------------------

CASES = {
    "generic": ([0.5, 0.3, 0.2], [0.2, 0.3, 0.5]),
    "q_zero_where_p_positive": ([0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.5, 0.0]),
    "p_zero_where_q_positive": ([0.0, 0.6, 0.4, 0.0, 0.0], [0.3, 0.1, 0.1, 0.3, 0.2]),
    "one_hot_p": ([0.0, 0.0, 1.0, 0.0], [0.25, 0.25, 0.25, 0.25]),
    "one_hot_q": ([0.1, 0.2, 0.3, 0.15, 0.15, 0.1], [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]),
    "one_hot_both_differ": ([1.0, 0.0, 0.0], [0.0, 0.0, 1.0]),
    "disjoint": ([0.7, 0.3, 0.0, 0.0], [0.0, 0.0, 0.4, 0.6]),
    "equal": ([0.2, 0.5, 0.1, 0.2], [0.2, 0.5, 0.1, 0.2]),
}
BUDGETS = [0.0, 0.05, 0.25, 0.5, 0.9, 1.0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_lossless_output_is_p(case: str) -> None:
    p, q = (normalised(v) for v in CASES[case])
    got = np64(output_distribution(f32(p), f32(q), "lossless", 0.0))
    np.testing.assert_allclose(ref_output(p, q, "lossless", 0.0), p, atol=1e-12)  # the maths
    np.testing.assert_allclose(got, p, atol=1e-6)  # the code


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_mentored_output_is_pi_within_budget(case: str, budget: float) -> None:
    p, q = (normalised(v) for v in CASES[case])
    pi, realised = ref_pi(p, q, budget)
    np.testing.assert_allclose(ref_output(p, q, "mentored", budget), pi, atol=1e-12)
    got = np64(output_distribution(f32(p), f32(q), "mentored", budget))
    np.testing.assert_allclose(got, pi, atol=1e-6)
    assert ref_tv(got, p) <= budget + 1e-6
    assert ref_tv(pi, p) == pytest.approx(min(budget, ref_tv(p, q)), abs=1e-12)
    assert realised == pytest.approx(min(budget, ref_tv(p, q)), abs=1e-12)


@pytest.mark.parametrize("case", sorted(CASES))
def test_budget_zero_is_lossless_and_budget_one_accepts_every_draft(case: str) -> None:
    p, q = (normalised(v) for v in CASES[case])
    zero = np64(output_distribution(f32(p), f32(q), "mentored", 0.0))
    np.testing.assert_allclose(
        zero, np64(output_distribution(f32(p), f32(q), "lossless", 0.0)), atol=1e-7
    )
    np.testing.assert_allclose(zero, p, atol=1e-6)
    # D = 1 >= any TV: theta = 1, pi = q, every drafted token (q > 0) is accepted.
    one = np64(output_distribution(f32(p), f32(q), "mentored", 1.0))
    np.testing.assert_allclose(one, q, atol=1e-6)
    pi, _ = mentored_mix(f32(p)[None], f32(q)[None], 1.0)
    drafted = mx.array([int(i) for i in np.flatnonzero(q > 0)])
    a = acceptance_prob(
        mx.repeat(pi, drafted.size, 0), mx.repeat(f32(q)[None], drafted.size, 0), drafted
    )
    np.testing.assert_array_equal(np64(a), 1.0)


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_pieces_match_closed_form(case: str, budget: float) -> None:
    """The sampler's own pieces (not output_distribution) against the float64 references."""
    p, q = (normalised(v) for v in CASES[case])
    V = len(p)
    assert float(tv_distance(f32(p)[None], f32(q)[None])[0]) == pytest.approx(
        ref_tv(p, q), abs=1e-6
    )
    pi_m, realised = mentored_mix(f32(p)[None], f32(q)[None], budget)
    pi_ref, realised_ref = ref_pi(p, q, budget)
    np.testing.assert_allclose(np64(pi_m)[0], pi_ref, atol=1e-6)
    assert float(realised[0]) == pytest.approx(realised_ref, abs=1e-6)
    assert float(realised[0]) <= budget + 1e-7
    # acceptance_prob for every token as a draft, against min(1, pi/q).
    xs = mx.arange(V)
    a = acceptance_prob(mx.repeat(pi_m, V, 0), mx.repeat(f32(q)[None], V, 0), xs)
    np.testing.assert_allclose(np64(a), ref_accept(pi_ref, q), atol=1e-6)
    np.testing.assert_allclose(
        np64(residual(f32(p)[None], f32(q)[None]))[0], ref_residual(p, q), atol=1e-6
    )
    # The mentored residual norm(max(pi - q, 0)) is norm(max(p - q, 0)) whenever rejection can happen.
    if realised_ref < ref_tv(p, q):  # theta < 1
        np.testing.assert_allclose(ref_residual(pi_ref, q), ref_residual(p, q), atol=1e-12)
    # Enumerate the sampler's pieces: the first emitted token's law is pi.
    a64, r64 = np64(a), ref_residual(p, q)
    enum = sum(q[x] * (a64[x] * np.eye(V)[x] + (1 - a64[x]) * r64) for x in range(V))
    np.testing.assert_allclose(enum, pi_ref, atol=1e-6)


# -- hypothesis ---------------------------------------------------------------------------------


@st.composite
def distribution_pairs(draw) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) over V = 3..6: random with zeros, one-hot, disjoint support, or equal."""
    V = draw(st.integers(3, 6))
    weights = st.lists(
        st.one_of(st.just(0.0), st.floats(1e-3, 1.0)), min_size=V, max_size=V
    ).filter(lambda w: sum(w) > 0)
    kind = draw(
        st.sampled_from(["random", "one_hot_p", "one_hot_q", "one_hot_both", "disjoint", "equal"])
    )
    one_hot = lambda: np.eye(V)[draw(st.integers(0, V - 1))]  # noqa: E731
    if kind == "disjoint":
        cut = draw(st.integers(1, V - 1))
        wp, wq = np.array(draw(weights)), np.array(draw(weights))
        wp[cut:], wq[:cut] = 0.0, 0.0
        wp[0], wq[-1] = max(wp[0], 1e-3), max(wq[-1], 1e-3)
        p, q = wp, wq
    else:
        p = one_hot() if kind in ("one_hot_p", "one_hot_both") else np.array(draw(weights))
        q = one_hot() if kind in ("one_hot_q", "one_hot_both") else np.array(draw(weights))
        if kind == "equal":
            q = p
    return normalised(p), normalised(q)


budgets = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0))


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(distribution_pairs(), budgets)
def test_fuzz_output_distributions(pq: tuple[np.ndarray, np.ndarray], budget: float) -> None:
    p, q = pq
    pi, realised = ref_pi(p, q, budget)
    lossless = np64(output_distribution(f32(p), f32(q), "lossless", budget))
    mentored = np64(output_distribution(f32(p), f32(q), "mentored", budget))
    np.testing.assert_allclose(lossless, p, atol=1e-6)
    np.testing.assert_allclose(mentored, pi, atol=1e-6)
    assert ref_tv(mentored, p) <= budget + 1e-6
    assert realised <= budget + 1e-12
    _, got_realised = mentored_mix(f32(p)[None], f32(q)[None], budget)
    assert float(got_realised[0]) == pytest.approx(realised, abs=1e-6)
    assert float(got_realised[0]) <= budget + 1e-7
    if budget == 0.0:
        np.testing.assert_allclose(mentored, p, atol=1e-6)
    if budget == 1.0:
        np.testing.assert_allclose(mentored, q, atol=1e-6)


# -- greedy -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("drafts", "n", "nxt"),
    [
        ([3, 1, 4], 3, 2),  # full match: n = k, next = argmax of row k (the bonus)
        ([0, 1, 4], 0, 3),  # first mismatch at 0
        ([3, 0, 4], 1, 1),  # mismatch at 1; the later match at 2 must not count
        ([3, 1, 0], 2, 4),  # mismatch at 2
        ([], 0, 3),  # k = 0: a plain target step
    ],
)
def test_accept_greedy_exact(drafts: list[int], n: int, nxt: int) -> None:
    p_argmax = mx.array([3, 1, 4, 2])[: len(drafts) + 1]
    v = accept_greedy(p_argmax, mx.array(drafts, dtype=mx.uint32))
    assert int(v.n_accepted) == n
    assert int(v.next_token) == nxt
    assert float(v.tv_sum) == 0.0


@pytest.mark.parametrize(
    ("drafts", "n", "nxt"),
    [([3, 1, 4], 3, 2), ([0, 1, 4], 0, 3), ([3, 0, 4], 1, 1), ([3, 1, 0], 2, 4), ([], 0, 3)],
)
def test_accept_greedy_packed_reads_what_accept_greedy_decides(
    drafts: list[int], n: int, nxt: int
) -> None:
    """The round's one read: [drafts, argmax per row, n]; the next token is row n's argmax,
    the same n and token as accept_greedy's Verdict (the cases above)."""
    rows = [3, 1, 4, 2][: len(drafts) + 1]
    logits = mx.array(np.eye(5, dtype=np.float32)[rows] * 3.0 - 1.0)  # argmax of row i: rows[i]
    vals = accept_greedy_packed(logits, mx.array(drafts, dtype=mx.uint32)).tolist()
    k = len(drafts)
    assert vals[:k] == drafts and vals[k : 2 * k + 1] == rows
    assert vals[-1] == n and vals[k + vals[-1]] == nxt
    v = accept_greedy(mx.array(rows), mx.array(drafts, dtype=mx.uint32))
    assert (int(v.n_accepted), int(v.next_token)) == (vals[-1], vals[k + vals[-1]])


def test_accept_sampled_refuses_unknown_rule() -> None:
    with pytest.raises(ValueError, match="no rule 'greedy'"):
        accept_sampled(
            f32([[0.5, 0.5]] * 2), f32([[0.5, 0.5]]), mx.array([0]), "greedy", 0.0, mx.random.key(0)
        )


# -- statistics of accept_sampled ------------------------------------------------------------

# k = 3 positions over V = 5, plus the bonus row of p. Rows chosen so that every branch matters:
# row 1 has p = 0 where q > 0 (such drafts must always be rejected), row 2 has q = 0 where p > 0
# (only the residual can produce those tokens).
P_ROWS = np.array(
    [
        [0.40, 0.25, 0.20, 0.10, 0.05],
        [0.05, 0.05, 0.30, 0.60, 0.00],
        [0.20, 0.20, 0.20, 0.20, 0.20],
        [0.10, 0.60, 0.10, 0.10, 0.10],  # row k: the bonus
    ]
)
Q_ROWS = np.array(
    [
        [0.10, 0.20, 0.30, 0.30, 0.10],
        [0.30, 0.30, 0.10, 0.10, 0.20],
        [0.00, 0.50, 0.50, 0.00, 0.00],
    ]
)
N_DRAWS = 20_000


def draw_verdicts(p: np.ndarray, q: np.ndarray, rule: str, budget: float, n: int, seed: int):
    """n independent rounds: drafts x ~ q row by row, then accept_sampled; numpy arrays out."""
    pm, qm = f32(p), f32(q)

    def one(key: mx.array):
        k_draft, k_accept = mx.random.split(key)
        x = sample(qm, k_draft)
        v = accept_sampled(pm, qm, x, rule, budget, k_accept)
        return x, v.n_accepted, v.next_token, v.tv_sum

    keys = mx.random.split(mx.random.key(seed), n)
    x, nacc, nxt, tv = mx.vmap(one)(keys)
    mx.eval(x, nacc, nxt, tv)
    return np.array(x), np.array(nacc), np.array(nxt), np.array(tv, dtype=np.float64)


def emitted(x: np.ndarray, nacc: np.ndarray, nxt: np.ndarray, pos: int) -> np.ndarray:
    """Token emitted at position `pos` (valid where nacc >= pos)."""
    return np.where(nacc > pos, x[:, pos] if pos < x.shape[1] else nxt, nxt)


def counts(tokens: np.ndarray, V: int) -> np.ndarray:
    return np.bincount(tokens.astype(np.int64), minlength=V)


def test_vmap_draws_equal_a_python_loop() -> None:
    """The vectorised harness draws exactly what calling accept_sampled one key at a time does."""
    x, nacc, nxt, _ = draw_verdicts(P_ROWS, Q_ROWS, "lossless", 0.0, 40, seed=3)
    keys = mx.random.split(mx.random.key(3), 40)
    for i in range(40):
        k_draft, k_accept = mx.random.split(keys[i])
        xi = sample(f32(Q_ROWS), k_draft)
        v = accept_sampled(f32(P_ROWS), f32(Q_ROWS), xi, "lossless", 0.0, k_accept)
        assert (np.array(xi).tolist(), int(v.n_accepted), int(v.next_token)) == (
            x[i].tolist(),
            int(nacc[i]),
            int(nxt[i]),
        )


@pytest.mark.parametrize(("rule", "budget"), [("lossless", 0.0), ("mentored", 0.3)])
def test_emitted_tokens_follow_p_or_pi(rule: str, budget: float) -> None:
    V = P_ROWS.shape[1]
    x, nacc, nxt, _ = draw_verdicts(P_ROWS, Q_ROWS, rule, budget, N_DRAWS, seed=11)
    target = [
        ref_pi(P_ROWS[i], Q_ROWS[i], budget)[0] if rule == "mentored" else P_ROWS[i]
        for i in range(3)
    ]
    # Position 0 always emits; position 1 emits iff position 0 was accepted, and is then a fresh
    # position with its own law (rows do not depend on context here).
    first = counts(emitted(x, nacc, nxt, 0), V)
    assert_matches(first, target[0], f"{rule}: first emitted token")
    second = counts(emitted(x, nacc, nxt, 1)[nacc >= 1], V)
    assert_matches(second, target[1], f"{rule}: token after an accepted first draft")
    third = counts(emitted(x, nacc, nxt, 2)[nacc >= 2], V)
    assert_matches(third, target[2], f"{rule}: token after two accepted drafts")
    # Power: the same sample rejects "accept every draft" (q) and "resample from p" (a
    # residual that forgets to subtract q).
    assert_rejects(first, Q_ROWS[0], f"{rule}: first token vs q")
    pi0 = target[0]
    kept = Q_ROWS[0] * ref_accept(pi0, Q_ROWS[0])
    assert_rejects(
        first, kept + (1 - kept.sum()) * P_ROWS[0], f"{rule}: first token vs p-resampling"
    )


@pytest.mark.parametrize(("rule", "budget"), [("lossless", 0.0), ("mentored", 0.3)])
def test_accepted_length_law(rule: str, budget: float) -> None:
    """P(n = j) = a_0 ... a_{j-1} (1 - a_j) with a_i = sum_x min(q_i, pi_i); E[n] likewise."""
    _, nacc, _, tv = draw_verdicts(P_ROWS, Q_ROWS, rule, budget, N_DRAWS, seed=12)
    alpha = []
    for i in range(3):
        pi = ref_pi(P_ROWS[i], Q_ROWS[i], budget)[0] if rule == "mentored" else P_ROWS[i]
        alpha.append(float(np.minimum(Q_ROWS[i], pi).sum()))
    law = [
        1 - alpha[0],
        alpha[0] * (1 - alpha[1]),
        alpha[0] * alpha[1] * (1 - alpha[2]),
        np.prod(alpha),
    ]
    assert_matches(counts(nacc, 4), np.array(law), f"{rule}: accepted length")
    rate0 = float((nacc >= 1).mean())
    assert abs(rate0 - alpha[0]) < 5 * np.sqrt(alpha[0] * (1 - alpha[0]) / N_DRAWS), (
        rate0,
        alpha[0],
    )
    mean_n = alpha[0] + alpha[0] * alpha[1] + alpha[0] * alpha[1] * alpha[2]
    assert abs(nacc.mean() - mean_n) < 5 * nacc.std() / np.sqrt(N_DRAWS), (nacc.mean(), mean_n)
    # tv_sum: the realised TV theta_i d_i = min(D, d_i) summed over decided positions i <= n, i < k.
    per_pos = np.array(
        [min(budget, ref_tv(P_ROWS[i], Q_ROWS[i])) if rule == "mentored" else 0.0 for i in range(3)]
    )
    want = np.array([per_pos[: min(n + 1, 3)].sum() for n in nacc])
    np.testing.assert_allclose(tv, want, atol=1e-6)


def test_full_acceptance_bonus_comes_from_row_k() -> None:
    V = P_ROWS.shape[1]
    # D = 1: every draft accepted, so the verdict's token is always the bonus, drawn from p[k].
    x, nacc, nxt, tv = draw_verdicts(P_ROWS, Q_ROWS, "mentored", 1.0, N_DRAWS, seed=13)
    assert (nacc == 3).all()
    bonus = counts(nxt, V)
    assert_matches(bonus, P_ROWS[3], "bonus after D = 1")
    assert_rejects(bonus, P_ROWS[0], "bonus vs row 0")
    np.testing.assert_allclose(tv, sum(ref_tv(P_ROWS[i], Q_ROWS[i]) for i in range(3)), atol=1e-6)
    # Drafts under D = 1 are just q's samples, all kept.
    for i in range(3):
        assert_matches(counts(x[:, i], V), Q_ROWS[i], f"accepted draft {i} under D = 1")
    # Lossless: conditioned on full acceptance, the next token is still p[k]'s.
    q_close = 0.8 * P_ROWS[:3] + 0.2 * Q_ROWS
    _, nacc, nxt, _ = draw_verdicts(P_ROWS, q_close, "lossless", 0.0, N_DRAWS, seed=14)
    full = nacc == 3
    assert full.mean() > 0.4
    assert_matches(counts(nxt[full], V), P_ROWS[3], "lossless bonus given n = k")


def test_zero_drafts_samples_row_zero() -> None:
    V = P_ROWS.shape[1]
    pm = f32(P_ROWS[:1])
    empty_q = mx.zeros((0, V), mx.float32)
    empty_x = mx.array([], dtype=mx.uint32)

    def one(key: mx.array):
        v = accept_sampled(pm, empty_q, empty_x, "mentored", 0.5, key)
        return v.n_accepted, v.next_token, v.tv_sum

    nacc, nxt, tv = mx.vmap(one)(mx.random.split(mx.random.key(15), N_DRAWS))
    assert np.array(nacc).max() == 0 and np.array(tv).max() == 0.0
    assert_matches(counts(np.array(nxt), V), P_ROWS[0], "k = 0 step")
