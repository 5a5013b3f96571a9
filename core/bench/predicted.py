"""Predicted against measured: what core.cost.prediction expected of each speculative row, and, when
the measurement fell short, which phase took the difference.

Why: a speedup alone does not say whether the idea or its implementation fell short. The
prediction for a row takes the row's own measured per-position acceptance (per draft source),
the k it actually proposed round by round, each source's price of k and the verification cost
under the row's dispatch (both from one calibration at the prompt's context), and the
target-only row's measured step (its median decode tok/s, inverted). What it is compared with
is the row's decode speedup (median decode tok/s over target-only's): the prediction models
the rounds, not the prefill. Efficiency = measured / predicted; below EFFICIENCY_FLOOR the
row's traced request says which phase (draft, verify, or the rest) ran over its prediction.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from core.bench.results import BenchResult, BenchSetting
from core.cost.prediction import RoundCost, predict, predict_schedule
from core.dispatch.curve import run_step, verify_cost
from core.settings import Settings

EFFICIENCY_FLOOR = 0.85  # below this, the report says where the time went
CALIBRATION_REPEATS = 3


def needed_calibration(rows: Sequence[BenchSetting]) -> dict[str, Any] | None:
    """What a calibration must measure to predict these rows: the row counts (up to the
    longest proposal + 1), the modes their dispatch settings read, and whether the draft step
    is the compiled one. None when no row speculates."""
    spec = [b.settings for b in rows if b.settings.mode == "speculative"]
    if not spec:
        return None
    longest = max(s.longest_proposal for s in spec)
    modes = ["auto"]
    for s in spec:
        if s.dispatch in ("gemv", "gemm", "dense"):
            modes.append(s.dispatch)
        elif s.dispatch == "fastest":
            modes.append("gemm")
    steps = {s.step for s in spec}
    step = steps.pop() if len(steps) == 1 else "auto"  # mixed rows: both measured
    if step != "eager":
        modes.append("compiled")
    from core.dispatch.curve_cache import tree_run
    from core.dispatch.row_plan import plan_need

    tree = any(tree_run(s) for s in spec)  # a tree source verifies up to its node budget + 1
    return {"rows": plan_need(longest, tree), "modes": tuple(dict.fromkeys(modes)), "step": step}


def _covers(curve: Any, need: dict[str, Any]) -> bool:
    try:
        return set(need["modes"]) <= set(curve.modes) and max(curve.rows) >= need["rows"]
    except Exception:  # not a curve we can read: measure one
        return False


def calibration_for(
    engine: Any, prompt_ids: Sequence[int], rows: Sequence[BenchSetting]
) -> tuple[Any | None, str]:
    """The curve the predictions read, and where it came from: the engine's own when it covers
    the rows, else one calibration at the prompt's context (rows up to k + 1, 3 repeats), which
    the engine then uses too when it had none (cost-aware rows price with the same numbers)."""
    need = needed_calibration(rows)
    if need is None:
        return None, "no speculative row"
    curve = getattr(engine, "cost_curve", None)
    if curve is not None and _covers(curve, need):
        return curve, "the engine's calibration"
    from core.dispatch import calibrate
    from core.dispatch.curve_cache import modes_here
    from core.dispatch.row_plan import calibration_context

    # and what "auto" runs where it is cheaper here (the dense copy, CUDA's fused attention)
    here = [m for b in rows for m in modes_here(b.settings, engine)]
    need["modes"] = tuple(dict.fromkeys((*need["modes"], *here)))

    fresh = calibrate(
        engine.target_model,
        getattr(engine, "draft_model", None),
        rows=need["rows"],
        repeats=CALIBRATION_REPEATS,
        # the prompt's context on a GPU; 16 tokens on the CPU, where a 346-token prompt took
        # two minutes to prefill for target and draft and priced the same rows as 16
        context=calibration_context(max(len(prompt_ids), 16)),
        modes=need["modes"],
        step=need["step"],
    )
    if curve is None and hasattr(engine, "set_cost_curve"):
        engine.set_cost_curve(fresh)
    return fresh, "calibrated by the bench"


def source_price(engine: Any, source: str, curve: Any) -> Callable[[int], float]:
    """A draft source's seconds to propose k, priced from the curve by the source itself."""
    try:
        return engine.drafter(source).price(curve)
    except Exception:  # an engine stand-in, or a source that cannot draft here
        if source in ("lookup", "tree"):  # copies: host work only
            return lambda k: 0.0
        from core.drafting.model import model_draft_price

        return model_draft_price(curve)


def _median(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x > 0]
    return statistics.median(xs) if xs else None


def attach_predictions(
    results: Sequence[BenchResult], baseline: BenchResult, curve: Any, engine: Any
) -> None:
    """Fill predicted_speedup, efficiency and prediction on every speculative row of ours.

    Under another machine's curve (bench --curve) the target step is that curve's one-row
    forward, not this machine's, and there is no efficiency: the prediction is for there."""
    base_tok_s = _median(baseline.decode_all_tok_s)
    if curve is None or base_tok_s is None:
        return
    from core.dispatch import measured_elsewhere

    foreign = measured_elsewhere(curve)
    t_step = curve.t_verify(1) if foreign else 1.0 / base_tok_s
    step_from = ("the curve's one-row forward (another machine's)" if foreign
                 else "target-only row, median decode tok/s")
    for r in results:
        if r.engine != "specdec-tui" or not r.speculative or r.fallback_reason:
            continue
        s = Settings.from_dict(r.settings)
        # The row's own sampling: a sampled draft step and acceptance cost more than greedy ones.
        view = curve.for_sampling(s.greedy) if hasattr(curve, "for_sampling") else curve
        t_accept = getattr(view, "t_accept", None)
        verify = verify_cost(view, s.dispatch, run_step(s.step, view))  # as its policy priced
        prices: dict[str, Callable[[int], float]] = {}
        parts = []
        main = s.draft_source
        sources = getattr(r, "sources", {}) or {}
        for src, counts in r.proposals.items():
            if src == "none":
                parts.append((RoundCost(verify, lambda k: 0.0, t_step), counts, []))
                continue
            if src not in prices:
                prices[src] = source_price(engine, src, view)
            tally = sources.get(src)
            accept = list(tally.reached_rates()) if tally is not None else r.per_position_acceptance
            parts.append((RoundCost(verify, prices[src], t_step, t_accept=t_accept), counts,
                          accept))
        mix = predict_schedule(parts, s.bonus)
        if mix is None or mix.speedup <= 0:
            continue
        ours = _median(r.decode_all_tok_s)
        measured = ours / base_tok_s if ours is not None and not foreign else None
        r.predicted_speedup = mix.speedup
        r.efficiency = measured / mix.speedup if measured is not None else None
        if main not in prices:
            prices[main] = source_price(engine, main, view)
        accept = r.per_position_acceptance
        k_max = s.longest_proposal
        best = predict(RoundCost(verify, prices[main], t_step, t_accept=t_accept), accept,
                       bonus=s.bonus, k_max=k_max, k_min=0).best
        r.prediction = {
            "t_step_s": t_step,
            "t_step_from": step_from,
            "mean_k": mix.k,
            "tokens_per_round": mix.tokens,
            "seconds_per_round": mix.seconds,
            "draft_s_per_round": mix.draft_s,
            "verify_s_per_round": mix.verify_s,
            "tok_s": mix.tok_s,
            "speedup": mix.speedup,
            "measured_decode_speedup": measured,
            "efficiency": r.efficiency,
            "best_k": int(best.k),
            "best_speedup": best.speedup,
            "rounds": {
                src: {str(k): n for k, n in sorted(c.items())} for src, c in r.proposals.items()
            },
            "phases": _phase_check(r, verify, prices, t_step, t_accept),
            "diagnosis": None,
        }
        if r.efficiency is not None and r.efficiency < EFFICIENCY_FLOOR:
            r.prediction["diagnosis"] = diagnose(r)


def _phase_check(
    r: BenchResult, verify: Callable[[int], float], prices: dict[str, Callable[[int], float]],
    t_step: float, t_accept: Callable[[int], float] | None = None,
) -> dict[str, dict[str, float]] | None:
    """The traced request's rounds priced phase by phase, next to what its trace measured
    (ms per request): draft, verify, and the rest (sample: the calibrated acceptance; cache and
    other: predicted 0)."""
    if not r.phase_ms or not r.trace:
        return None
    s = Settings.from_dict(r.settings)
    draft = ver = rest_s = 0.0
    for t in r.trace:
        k = int(t.get("proposed", 0))
        if k <= 0:
            ver += t_step
            continue
        price = prices.get(t.get("source") or s.draft_source)
        draft += price(k) if price is not None else 0.0
        ver += verify(k + 1)
        rest_s += t_accept(k + 1) if t_accept is not None else 0.0
    ph = r.phase_ms
    # A sharded target's collectives (comm) are inside its calibrated verification cost.
    rest = sum(v for p, v in ph.items() if p not in ("draft", "verify", "comm"))
    verify_ms = ph.get("verify", 0.0) + ph.get("comm", 0.0)
    return {
        "draft": {"predicted_ms": draft * 1e3, "measured_ms": ph.get("draft", 0.0)},
        "verify": {"predicted_ms": ver * 1e3, "measured_ms": verify_ms},
        "sample, cache and other": {"predicted_ms": rest_s * 1e3, "measured_ms": rest},
    }


def diagnose(r: BenchResult) -> str:
    """One sentence: which phase of the traced request ran furthest over its prediction."""
    p = r.prediction or {}
    phases = p.get("phases")
    head = (f"{r.name}: measured {p.get('measured_decode_speedup', 0.0):.2f}x against "
            f"{p.get('speedup', 0.0):.2f}x predicted (efficiency {r.efficiency:.2f})")
    if not phases:
        return head + "; no traced request to split the difference by phase."
    over = {name: v["measured_ms"] - v["predicted_ms"] for name, v in phases.items()}
    worst = max(over, key=lambda n: over[n])
    v = phases[worst]
    total = sum(over.values())
    others = ", ".join(
        f"{n} {phases[n]['measured_ms']:.1f} against {phases[n]['predicted_ms']:.1f}"
        for n in phases if n != worst
    )
    return (
        f"{head}; {worst} took the difference: {v['measured_ms']:.1f} ms in the traced request "
        f"against {v['predicted_ms']:.1f} ms predicted ({over[worst]:+.1f} of {total:+.1f} ms "
        f"over; {others})."
    )
