"""The speculative rounds: which source drafts next (or plain target steps while none would),
then one round: draft up to k, verify them plus one row in one target pass, accept on the
device with the round's one host sync, commit and rewind.

Beside the single-model loop (core/decode/single.py), so the engine (core/decode/engine.py)
reads as its run and this as its rounds. Both take what they work on from the engine as a
`RunState` and a `RoundKit` (core/decode/run_state.py), never the engine itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mlx.core as mx

from core.cost.guard import Guard
from core.cost.policy import Policy
from core.decode.run_state import BrokeAfter, Handoff, RoundKit, RunState, logits_config
from core.decode.trace import RoundTimer
from core.decode.tree_round import fit_rows, rejected_branches, tree_to_verify, verify_tree
from core.dispatch.bucketed import took_new_plan
from core.dispatch.patches import DENSE_KERNEL, resolve_dispatch
from core.drafting.base import Drafter, DraftRequest, Proposal
from core.drafting.plan import Plan
from core.events import CommittedToken, RoundEvent
from core.primitives.sampling import (
    LogitsConfig,
    accept_greedy_packed,
    accept_sampled,
    one_hot,
    penalize,
    to_probs,
)
from core.primitives.token_tree import TokenTree
from core.settings import Settings


def drafting_rounds(
    run: RunState, seq: list[int], s: Settings, key: mx.array, remaining: int
) -> Iterator[RoundEvent]:
    """One speculative round from the first offer whose source's policy wants to draft;
    when none does, plain target steps, pipelined until one might (asked after each)."""
    run.prepare(s, len(seq))  # drafters built and configured, a first calibration: no round's
    kit = run.kit()
    guard = run.guard_for(s)
    handoff, run.handoff = run.handoff, None  # kept only for these settings (drop_handoff)
    if handoff is not None:  # planned after the last token, its step queued: a round now
        yield from _drafted(run, kit, guard, seq, s, key, handoff.plan, handoff.row0,
                            handoff.t_plan)
        return
    t_plan = kit.clock()
    plan = run.plan(seq, s, remaining, guard)
    if plan.drafts:
        yield from _drafted(run, kit, guard, seq, s, key, plan, None, t_plan)
        return
    yield from _plain_steps(run, kit, guard, seq, s, key, remaining, plan.declined)


def _drafted(
    run: RunState, kit: RoundKit, guard: Guard, seq: list[int], s: Settings, key: mx.array,
    plan: Plan, row0: mx.array | None, t_plan: float,
) -> Iterator[RoundEvent]:
    """The round `plan` drafts (none if Esc comes in its catch-up), observed by its policy
    and `guard`. A catch-up after the first (a model's lag behind target steps or copies) is
    charged to its policy, so a hybrid's model pays its way or stops; the guard is charged
    every catch-up, the first too: a request's first model round feeds the draft the whole
    prompt, and a prefill paid again at each request's probe is the source's cost."""
    drafter, policy, totals = plan.drafter, plan.policy, run.totals
    t0 = kit.clock()  # outside the round's timer
    absorbed = drafter.catch_up(seq, s.prefill_chunk, cancel=run.cancel)
    caught_all = kit.clock() - t0
    caught = caught_all if drafter.name in run.caught_up else 0.0
    run.caught_up.add(drafter.name)
    totals.draft_catch_up = max(totals.draft_catch_up, absorbed)
    if run.cancel.is_set():  # Esc in a long catch-up: no round
        return
    took_new_plan()  # what the catch-up or the steps before built is not this round's
    ev = run.speculative_round(seq, s, plan.k, key, totals.rounds, drafter, row0)
    built = took_new_plan()  # a plan built for its shape: a one-time cost, not the source's
    seconds = run.observed_s(ev)
    policy.observe(ev.proposed, ev.accepted,
                   None if seconds is None or built else seconds + caught)
    if seconds is not None:
        # End to end: the host work that chose it and its catch-up, while the device waits
        # (the pipeline is broken), are the round's own cost.
        guard.observe_round(drafter.name, len(ev.tokens), seconds + (t0 - t_plan),
                            catch_up_s=caught_all, new_plan=built)
        run.broke_after = BrokeAfter(guard, drafter.name, policy, ev.proposed)
    yield ev


def _plain_steps(
    run: RunState, kit: RoundKit, guard: Guard, seq: list[int], s: Settings, key: mx.array,
    remaining: int, asked: list[Policy],
) -> Iterator[RoundEvent]:
    """Pipelined target steps until a source would draft (asked after each token, while the
    next step is queued: a yes hands that step to the round as its first row, `Handoff`).
    The policies that said 0 (`asked`) observe each step; the step right after a round is
    not a plain step's cost but the round's (the pipeline break): it moves no step scale,
    and what it cost above a pipelined step is charged to the round's source in the guard
    it ran under and to its policy (`charge`)."""
    done = 0

    def drafts_now(row0: mx.array) -> bool:
        nonlocal asked
        t = kit.clock()
        after = run.plan(seq, s, remaining - done, guard)
        asked = after.declined
        if not after.drafts:
            return False
        run.handoff = Handoff(after, row0, s, t)
        return True

    for ev in run.single_model_rounds(seq, s, "target-only", key, run.totals.rounds, remaining,
                                      run.source, run.cancel, stop_after=drafts_now):
        done += 1
        seconds = run.observed_s(ev)
        broke, run.broke_after = run.broke_after, None
        for p in asked:
            p.observe(0, 0, None if broke else seconds)
        if seconds is not None:
            if broke is None:
                guard.observe_step(seconds)
            else:
                extra = broke.guard.observe_step(seconds, after=broke.source)
                broke.policy.charge(broke.proposed, extra)
        yield ev


def speculative_round(
    kit: RoundKit, seq: list[int], s: Settings, k: int, key: mx.array, index: int,
    drafter: Drafter, row0: mx.array | None = None,
) -> RoundEvent:
    """Draft up to k tokens, verify them plus one row in one target pass, accept on the
    device, rewind. k becomes what the drafter actually proposed. `row0`: the logits of a
    queued target step that already fed the last token (a stretch's handoff), so the pass
    verifies the drafts alone and that step's row is the first."""
    t = kit.target
    if row0 is not None and s.traced:
        mx.eval(row0)  # a traced round's phases are its own, not the queued step's
    cfg = logits_config(s)
    timer = RoundTimer(s.traced, kit.clock)
    # A greedy round draws nothing: no key is split (mlx-lm's loop splits none either).
    keys = None if cfg.greedy else mx.random.split(key, k + 1)
    hist = mx.array(seq[-cfg.repetition_context :]) if cfg.repetition_penalty != 1.0 else None
    V = kit.vocab_size
    start = max(len(seq) - 2, 0)

    proposal = drafter.propose(
        DraftRequest(seq, k, V, cfg, None if keys is None else keys[:k], hist)
    )
    tree = tree_to_verify(proposal.tree, kit, s, cfg, hist is not None)
    if tree is not None:
        timer.mark("draft")
        return _tree_round(kit, seq, s, cfg, None if keys is None else keys[-1], index, drafter,
                           proposal, tree, row0, timer, start)
    draft_arr = kit.agreed(proposal.tokens)  # every rank verifies the same drafts
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
            with kit.verify_context(s, rows):
                logits = mx.concatenate([row0, t.forward(draft_arr, V)], axis=0)
    else:
        inp = mx.concatenate([mx.array(t_pending, dtype=draft_arr.dtype), draft_arr])
        rows = inp.shape[0]
        with kit.verify_context(s, rows):
            logits = t.forward(inp, V, last=k + 1)
    timer.mark("verify", logits)

    # Accept on the device, then the round's single host sync (one array read).
    if hist is not None:
        logits = penalize(logits, mx.concatenate([hist, draft_arr]), cfg)
    tv_sum = 0.0
    if cfg.greedy:
        packed = kit.agreed(accept_greedy_packed(logits, draft_arr))
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
        packed = kit.agreed(mx.concatenate([ids, tail]))
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
    committed = _cut_at_eos(committed, s, kit.eos_ids)
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
        kernel=_round_kernel(kit, s, rows),
        tv=(tv_sum / decided) if decided and not cfg.greedy else None,
        context=len(seq),
        traced=s.traced,
        source=proposal.source,
        copied_from=proposal.copied_from,
    )


def _tree_round(
    kit: RoundKit, seq: list[int], s: Settings, cfg: LogitsConfig, key: mx.array | None,
    index: int, drafter: Drafter, proposal: Proposal, tree: TokenTree, row0: mx.array | None,
    timer: RoundTimer, start: int,
) -> RoundEvent:
    """The round of a token tree (core/decode/tree_round.py): the accepted path is the copy,
    then the correction (the path stopped at a node with children) or the bonus (it ran to a
    leaf); committed and rewound as a chain round is. `proposed` is the tree's depth, or the
    path's where it ran to a leaf (the copy's run reached its end)."""
    t = kit.target
    tree = fit_rows(tree, 0 if row0 is not None else len(seq) - len(t.seq))
    v = verify_tree(kit, seq, tree, cfg, key, row0, timer, s)
    ids = [tree.tokens[i] for i in v.path]
    n = len(ids)
    proposed = n if v.at_leaf else tree.depth
    committed = [CommittedToken(x_, proposal.origin) for x_ in ids]
    if not v.at_leaf:
        committed.append(CommittedToken(v.next_token, "corrected"))
    elif s.bonus:
        committed.append(CommittedToken(v.next_token, "bonus"))
    committed = _cut_at_eos(committed, s, kit.eos_ids)
    branches = rejected_branches(tree, v.path)
    rejected = branches[0] if branches else ()
    drafter.learn(ids, n)
    seq.extend([c.id for c in committed])
    t.rewind(seq, start, upto=len(seq) - 1)
    drafter.rewind(seq, start)
    timer.mark("cache")
    return RoundEvent(
        index=index, tokens=tuple(committed), rejected=rejected, proposed=proposed, accepted=n,
        rows=v.rows, timings=timer.finish(), kernel=_round_kernel(kit, s, v.rows), tv=None,
        context=len(seq), traced=s.traced, source=proposal.source,
        copied_from=proposal.copied_from, nodes=tree.size, branches=branches,
    )


def _round_kernel(kit: RoundKit, s: Settings, rows: int) -> str:
    """The kernel family the round's verification ran: "dense (dequantized)" where its
    dispatch took the dense copy (core/dispatch/patches.py), else the predicted family."""
    if rows > 1 and resolve_dispatch(s.dispatch, rows, kit.cost_curve) == "dense":
        return DENSE_KERNEL
    return kit.kernel(rows)


def _cut_at_eos(toks: list[CommittedToken], s: Settings, eos_ids: Any) -> list[CommittedToken]:
    """The round's tokens up to and with the first EOS (all of them under ignore_eos)."""
    if s.ignore_eos:
        return toks
    for i, tok in enumerate(toks):
        if tok.id in eos_ids:
            return toks[: i + 1]
    return toks
