"""The speculative rounds: which source drafts next (or plain target steps while none would),
then one round: draft up to k, verify them plus one row in one target pass, accept on the
device with the round's one host sync, commit and rewind.

Its own module (issue 27) beside the single-model loop (core/decode/single.py), so the engine
(core/decode/engine.py) reads as its run and this as its rounds. The engine keeps thin
`_drafting_rounds` / `_speculative_round` methods that call these, so a test that replaces
the round on an engine still sees every round go through it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from core.decode.run_totals import RunTotals
from core.decode.trace import RoundTimer
from core.dispatch.bucketed import took_new_plan
from core.dispatch.patches import DENSE_KERNEL, resolve_dispatch, verification_patches
from core.drafting.base import Drafter, DraftRequest
from core.drafting.plan import Plan
from core.events import CommittedToken, RoundEvent
from core.primitives.sampling import (
    accept_greedy_packed,
    accept_sampled,
    one_hot,
    penalize,
    to_probs,
)
from core.settings import Settings


@dataclass
class Handoff:
    """A plan that drafts, made after a stretch's last token while the next target step was
    queued: that step fed the last token, and its logits (`row0`, before any penalty) are
    the round's first verified row. `settings` are those it was planned with; `t_plan` when
    the plan began (the guard charges a round from there)."""

    plan: Plan
    row0: mx.array
    settings: Settings
    t_plan: float


def drop_handoff(engine: Any, seq: list[int], totals: RunTotals, round_s: Settings | None) -> None:
    """Forget a handed-off step no round will take: the next round's settings (`round_s`;
    None when it is not speculative) are not those it was planned with. The target's cache
    goes back to seq[:-1], so the last token is fed again."""
    h = totals.handoff
    if h is not None and (round_s is None or h.settings != round_s):
        totals.handoff = None
        engine._target.rewind(seq[:-1], max(len(seq) - 2, 0))


def drafting_rounds(
    engine: Any,
    seq: list[int],
    s: Settings,
    key: mx.array,
    totals: RunTotals,
    remaining: int,
    source: Callable[[], Settings],
    cancel: threading.Event | None,
) -> Iterator[RoundEvent]:
    """One speculative round from the first offer whose source's policy wants to draft;
    when none does, plain target steps, pipelined until one might (asked after each)."""
    engine.drafter(s.draft_source)  # built (a hybrid builds its parts) before configured
    for d in list(engine._drafters.values()):  # each source reads its own settings
        configure = getattr(d, "configure", None)
        if configure is not None:
            configure(s)
    if engine.needs_curve(s):
        engine._ensure_curve(s, len(seq))  # a first calibration is no round's cost
    guard = engine._guard(s, totals)
    handoff, totals.handoff = totals.handoff, None  # kept by the engine only for these settings
    row0 = None
    if handoff is not None:  # planned after the last token, its step queued: a round now
        plan, row0, t_plan = handoff.plan, handoff.row0, handoff.t_plan
    else:
        t_plan = engine._clock()
        plan = engine._plan(seq, s, remaining, guard)
    drafter, policy, asked = plan.drafter, plan.policy, plan.declined
    if drafter is not None and policy is not None:
        # Outside the round's timer. A catch-up after the first (a model's lag behind target
        # steps or copies) is charged to its policy: a hybrid's model pays its way or stops.
        # The guard is charged every catch-up, the first too: a request's first model round
        # feeds the draft the whole prompt, and on the H200 that prefill, paid again at each
        # request's probe, was most of what the model-alone rows lost (issue 28).
        t0 = engine._clock()
        absorbed = drafter.catch_up(seq, s.prefill_chunk, cancel=cancel)
        caught_all = engine._clock() - t0
        caught = caught_all if drafter.name in totals.caught_up else 0.0
        totals.caught_up.add(drafter.name)
        totals.draft_catch_up = max(totals.draft_catch_up, absorbed)
        if cancel is not None and cancel.is_set():  # Esc in a long catch-up: no round
            return
        took_new_plan()  # what the catch-up or the steps before built is not this round's
        ev = engine._speculative_round(seq, s, plan.k, key, totals.rounds, drafter, row0)
        built = took_new_plan()  # a plan built for its shape: a one-time cost, not the source's
        seconds = engine._observed_s(ev)
        policy.observe(ev.proposed, ev.accepted,
                       None if seconds is None or built else seconds + caught)  # fmt: skip
        if guard is not None and seconds is not None:
            # End to end: the host work that chose it and its catch-up, while the device
            # waits (the pipeline is broken), are the round's own cost.
            guard.observe_round(drafter.name, len(ev.tokens), seconds + (t0 - t_plan),
                                catch_up_s=caught_all, new_plan=built)  # fmt: skip
            totals.broke_after = (guard, drafter.name, policy, ev.proposed)
        yield ev
        return
    done = 0

    def drafts_now(row0: mx.array) -> bool:
        """After each token, the next step queued: does a round draft now? (host work, on
        the committed tokens; a yes hands the queued step to the round as its first row)."""
        nonlocal asked
        t = engine._clock()
        after = engine._plan(seq, s, remaining - done, guard)
        asked = after.declined
        if after.drafter is None:
            return False
        totals.handoff = Handoff(after, row0, s, t)
        return True

    for ev in engine._single_model_rounds(seq, s, "target-only", key, totals.rounds, remaining,
                                        source, cancel, stop_after=drafts_now):  # fmt: skip
        done += 1
        seconds = engine._observed_s(ev)
        broke, totals.broke_after = totals.broke_after, None
        # The policies that said 0 for this step observe it; the step right after a round is
        # not a plain step's cost but the round's (the pipeline break): it moves no step scale,
        # and what it cost above a pipelined step is charged to the round's policy.
        for p in asked:
            p.observe(0, 0, None if broke else seconds)
        # The break is the round's: observed by the guard of the settings it ran with.
        measured = broke[0] if broke else guard
        if measured is not None and seconds is not None:
            extra = measured.observe_step(seconds, after=broke[1] if broke else None)
            charge = getattr(broke[2], "charge", None) if broke else None
            if charge is not None:
                charge(broke[3], extra)
        yield ev


def speculative_round(
    engine: Any, seq: list[int], s: Settings, k: int, key: mx.array, index: int, drafter: Drafter,
    row0: mx.array | None = None,
) -> RoundEvent:  # fmt: skip
    """Draft up to k tokens, verify them plus one row in one target pass, accept on the
    device, rewind. k becomes what the drafter actually proposed. `row0`: the logits of a
    queued target step that already fed the last token (a stretch's handoff), so the pass
    verifies the drafts alone and that step's row is the first."""
    t = engine._target
    if row0 is not None and s.traced:
        mx.eval(row0)  # a traced round's phases are its own, not the queued step's
    cfg = engine._logits_config(s)
    timer = RoundTimer(s.traced, engine._clock)
    # A greedy round draws nothing: no key is split (mlx-lm's loop splits none either).
    keys = None if cfg.greedy else mx.random.split(key, k + 1)
    hist = mx.array(seq[-cfg.repetition_context :]) if cfg.repetition_penalty != 1.0 else None
    V = engine.vocab_size
    start = max(len(seq) - 2, 0)

    proposal = drafter.propose(
        DraftRequest(seq, k, V, cfg, None if keys is None else keys[:k], hist,
                     compiled=s.fused_draft)
    )  # fmt: skip
    draft_arr = engine._agreed(proposal.tokens)  # every rank verifies the same drafts
    k = proposal.k
    timer.mark("draft", draft_arr)

    # Verify: the pending token plus all drafts, one forward, k + 1 rows kept; after a
    # handoff the queued step fed the pending token and gave the first row.
    t_pending = seq[len(t.seq) :]
    if row0 is not None:
        assert not t_pending, "a handed-off step has fed every committed token"
        rows = max(k, 1)  # the forward's rows (the queued step's one without drafts)
        logits = row0
        if k:
            with _verify_context(engine, s, rows):
                logits = mx.concatenate([row0, t.forward(draft_arr, V)], axis=0)
    else:
        inp = mx.concatenate([mx.array(t_pending, dtype=draft_arr.dtype), draft_arr])
        rows = inp.shape[0]
        with _verify_context(engine, s, rows):
            logits = t.forward(inp, V, last=k + 1)
    timer.mark("verify", logits)

    # Accept on the device, then the round's single host sync (one array read).
    if hist is not None:
        logits = penalize(logits, mx.concatenate([hist, draft_arr]), cfg)
    tv_sum = 0.0
    if cfg.greedy:
        packed = engine._agreed(accept_greedy_packed(logits, draft_arr))
        mx.eval(packed)
        vals = packed.tolist()
        # [drafts (k), the target's argmax per row (k + 1), n]: the next token is row n's
        proposed_ids, n = vals[:k], vals[-1]
        nxt = vals[k + n]
    else:
        p = to_probs(logits, cfg)
        q = proposal.q if proposal.q is not None else one_hot(draft_arr, V)
        assert keys is not None
        verdict = accept_sampled(p, q, draft_arr, s.rule, s.tv_budget, keys[-1])
        ids = draft_arr.astype(mx.int32)
        tail = mx.stack([verdict.n_accepted, verdict.next_token]).astype(mx.int32)
        packed = engine._agreed(mx.concatenate([ids, tail]))
        if s.rule == "mentored":  # lossless realises no distance: nothing to read
            mx.eval(packed, verdict.tv_sum)
            tv_sum = float(verdict.tv_sum.item())
        else:
            mx.eval(packed)
        vals = packed.tolist()
        proposed_ids, n, nxt = vals[:k], vals[k], vals[k + 1]
    timer.mark("sample")

    committed = [CommittedToken(x_, proposal.origin) for x_ in proposed_ids[:n]]
    if n < k:
        committed.append(CommittedToken(nxt, "corrected"))
    elif s.bonus:
        committed.append(CommittedToken(nxt, "bonus"))
    committed = _cut_at_eos(committed, s, engine.eos_ids)
    rejected = tuple(proposed_ids[n:])

    # Rewind: every cache keeps what it shares with the committed sequence minus its tail.
    t.seq.extend(t_pending + proposed_ids)
    drafter.learn(proposed_ids, n)
    seq.extend([c.id for c in committed])
    t.rewind(seq, start, upto=len(seq) - 1)  # seq[:-1], without copying the conversation
    drafter.rewind(seq, start)
    timer.mark("cache")

    decided = min(n + 1, k)
    return RoundEvent(
        index=index,
        tokens=tuple(committed),
        rejected=rejected,
        proposed=k,
        accepted=n,
        rows=rows,
        timings=timer.finish(),
        kernel=_round_kernel(engine, s, rows),
        tv=(tv_sum / decided) if decided and not cfg.greedy else None,
        context=len(seq),
        traced=s.traced,
        source=proposal.source,
        copied_from=proposal.copied_from,
    )


def _round_kernel(engine: Any, s: Settings, rows: int) -> str:
    """The kernel family the round's verification ran: "dense (dequantized)" where its
    dispatch took the dense copy (core/dispatch/patches.py), else the predicted family."""
    if rows > 1 and resolve_dispatch(s.dispatch, rows, engine.cost_curve) == "dense":
        return DENSE_KERNEL
    return engine._kernel(rows)


def _verify_context(engine: Any, s: Settings, rows: int) -> contextlib.AbstractContextManager[Any]:
    """Dispatch and attention overrides around the multi-row verification only."""
    return verification_patches(
        engine._target.model, s.dispatch, s.verify_attention, rows, curve=engine.cost_curve
    )


def _cut_at_eos(toks: list[CommittedToken], s: Settings, eos_ids: Any) -> list[CommittedToken]:
    """The round's tokens up to and with the first EOS (all of them under ignore_eos)."""
    if s.ignore_eos:
        return toks
    for i, tok in enumerate(toks):
        if tok.id in eos_ids:
            return toks[: i + 1]
    return toks
