"""The decode loop: target-only, draft-only and speculative rounds, one RoundEvent per round.

One loop feeds the TUI, the benchmark and the profile writer. Its discipline:
- every MLX call on the caller's thread (MLX streams are per thread);
- untraced rounds sync the host once (speculative: after acceptance; single-model modes are
  pipelined like mlx-lm's generate_step, the next token launched before the last is read);
- acceptance maths on the device (core.sampling), no Python loop over the vocabulary;
- each cache holds a known token list; after every round both are rewound (trimmed) to the
  longest prefix they share with the committed sequence minus its last token, the token the
  next round feeds. That one rule covers rejection, the bonus switch, EOS, cancellation and
  multi-turn reuse (a new turn keeps the common prefix and prefills only the rest).
Like vLLM and llama.cpp, the draft samples from its processed distribution q and the target
verifies all k drafts plus one bonus row in one forward pass.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

from core.dispatch import verification_patches
from core.errors import UserError
from core.events import PHASES, CommittedToken, RoundEvent, RunSummary
from core.policy import Policy, make_policy
from core.sampling import (
    LogitsConfig,
    Verdict,
    accept_greedy,
    accept_sampled,
    penalize,
    sample,
    to_probs,
)
from core.settings import MAX_K, Settings
from core.trace import RoundTimer

Item = RoundEvent | RunSummary


def _common_prefix(a: Sequence[int], b: Sequence[int], start: int = 0) -> int:
    """Length of the common prefix of a and b, trusting that the first `start` agree."""
    n = min(len(a), len(b))
    i = min(start, n)
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass
class _ModelState:
    """A model, its prompt cache, and the token list that cache holds (same length)."""

    model: nn.Module
    cache: list[Any]
    seq: list[int] = field(default_factory=list)
    fused: Any = None  # CompiledDecodeStep once built; False when the model cannot use one

    def rewind(self, want: Sequence[int], start: int = 0) -> None:
        keep = _common_prefix(self.seq, want, start)
        if keep < len(self.seq):
            trim_prompt_cache(self.cache, len(self.seq) - keep)
            del self.seq[keep:]

    def forward(self, tokens: mx.array, vocab: int) -> mx.array:
        """Logits [rows, vocab] for a 1-D token array; the cache advances by its length."""
        return self.model(tokens[None], cache=self.cache)[0, :, :vocab]

    def decode(self, tokens: mx.array, vocab: int, fused: bool) -> mx.array:
        """Logits of the last row; with `fused`, the last token goes through the compiled step."""
        if fused and self.fused is None:
            from core.drafting.compiled import CompiledDecodeStep, supports

            self.fused = CompiledDecodeStep(self.model) if supports(self.model) is None else False
        if not (fused and self.fused):
            return self.forward(tokens, vocab)[-1:]
        if tokens.shape[0] > 1:
            self.model(tokens[:-1][None], cache=self.cache)
        if self.cache[0].keys is None:
            return self.forward(tokens[-1:], vocab)
        return self.fused.step(tokens[-1:], self.cache)[:, :vocab]

    def prefill(self, tokens: Sequence[int], chunk: int) -> None:
        """Feed tokens in chunks, evaluating each so memory stays bounded."""
        for i in range(0, len(tokens), chunk):
            part = list(tokens[i : i + chunk])
            self.model(mx.array(part)[None], cache=self.cache)
            mx.eval([c.state for c in self.cache])
            self.seq.extend(part)

    def offset(self) -> int:
        return int(self.cache[0].offset)


@dataclass
class _Tally:
    """Running totals that become the RunSummary."""

    rounds: int = 0
    tokens: list[int] = field(default_factory=list)
    proposed: int = 0
    accepted: int = 0
    pos_tries: list[int] = field(default_factory=lambda: [0] * MAX_K)
    pos_hits: list[int] = field(default_factory=lambda: [0] * MAX_K)
    tv_sum: float = 0.0
    tv_count: int = 0
    draft_catch_up: int = 0  # tokens the draft prefilled in its first drafting round
    phase: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    first_token_at: float | None = None
    spec_rounds: int = 0

    def add(self, ev: RoundEvent, now: float) -> None:
        self.rounds += 1
        self.tokens.extend(t.id for t in ev.tokens)
        if self.first_token_at is None and ev.tokens:
            self.first_token_at = now
        for p in PHASES:
            self.phase[p] += getattr(ev.timings, p)
        if ev.proposed:
            self.spec_rounds += 1
            self.proposed += ev.proposed
            self.accepted += ev.accepted
            if ev.tv is not None:
                decided = min(ev.accepted + 1, ev.proposed)
                self.tv_sum += ev.tv * decided
                self.tv_count += decided
            # Conditional per position: position i is verified only if all before it were
            # accepted, so P(accept i | reached i); their product is the accepted-length law
            # the cost-aware policy and the Acceptance panel use.
            for i in range(min(ev.accepted + 1, ev.proposed)):
                self.pos_tries[i] += 1
                self.pos_hits[i] += i < ev.accepted


class Engine:
    """Owns both models' caches across turns and runs the decode loop over them."""

    def __init__(
        self,
        target: nn.Module,
        draft: nn.Module | None = None,
        *,
        vocab_size: int,
        eos_ids: Sequence[int] = (),
        predictor: Any | None = None,
        speculation_ok: bool = True,
        speculation_reason: str | None = None,
    ) -> None:
        self.vocab_size = vocab_size
        self.eos_ids = frozenset(eos_ids)
        self.predictor = predictor
        self.cost_curve: Any | None = None
        self._t = _ModelState(target, make_prompt_cache(target))
        self._d = _ModelState(draft, make_prompt_cache(draft)) if draft is not None else None
        self.speculation_reason = speculation_reason
        if draft is None:
            self.speculation_reason = speculation_reason or "no draft model is loaded"
        elif not (can_trim_prompt_cache(self._t.cache) and can_trim_prompt_cache(self._d.cache)):
            self.speculation_reason = "a model's cache cannot be rewound (not trimmable)"
        self.speculation_ok = speculation_ok and self.speculation_reason is None
        self._policy: Policy | None = None
        self._policy_sig: tuple[Any, ...] | None = None

    @classmethod
    def from_pair(cls, pair: Any) -> Engine:
        """Build from a core.models.ModelPair, with the kernel predictor for the target."""
        predictor = None
        with contextlib.suppress(Exception):  # prediction is informative, never required
            from core.dispatch import KernelPredictor

            predictor = KernelPredictor(pair.target.model)
        return cls(
            pair.target.model,
            pair.draft.model if pair.draft is not None else None,
            vocab_size=pair.vocab_size,
            eos_ids=sorted(pair.eos_ids),
            predictor=predictor,
            speculation_ok=pair.speculation_ok,
            speculation_reason=pair.speculation_reason,
        )

    @property
    def target_model(self) -> nn.Module:
        """The target's mlx-lm module (for scoring text with the same weights)."""
        return self._t.model

    @property
    def draft_model(self) -> nn.Module | None:
        return self._d.model if self._d is not None else None

    # -- state -----------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget both caches and the policy's learning; the next generate starts afresh."""
        self._policy, self._policy_sig = None, None
        self._t = _ModelState(self._t.model, make_prompt_cache(self._t.model))
        if self._d is not None:
            self._d = _ModelState(self._d.model, make_prompt_cache(self._d.model))

    def cache_state(self) -> dict[str, Any]:
        """Token lists and offsets of both caches (tests check they never disagree)."""
        out: dict[str, Any] = {"target_seq": list(self._t.seq), "target_offset": self._t.offset()}
        if self._d is not None:
            out |= {"draft_seq": list(self._d.seq), "draft_offset": self._d.offset()}
        return out

    def set_cost_curve(self, curve: Any) -> None:
        """A VerifyCostCurve for the cost-aware policy (from core.dispatch.calibrate)."""
        self.cost_curve = curve

    # -- the loop ----------------------------------------------------------------------------

    def generate(
        self,
        prompt_ids: Sequence[int],
        settings: Settings,
        cancel: threading.Event | None = None,
        settings_source: Callable[[], Settings] | None = None,
    ) -> Iterator[Item]:
        """Yield one RoundEvent per round, then a RunSummary.

        `settings_source` is read once per round, so a key pressed mid-run applies from the
        next round; `cancel` is checked once per round and leaves the caches consistent.
        """
        if not prompt_ids:
            raise UserError("The prompt is empty: there is nothing to continue.")
        t_start = time.perf_counter()
        s = settings
        source = settings_source or (lambda: settings)
        fallback = self._fallback_reason(s)
        if s.mode == "draft-only" and self._d is None:
            raise UserError("Draft-only mode needs a draft model; load one with --draft.")
        seq = list(prompt_ids)
        n_prompt = len(seq)
        prefilled = self._prefill(
            seq,
            s,
            # A speculative draft catches up in its first round that drafts (below): the
            # cost-aware policy may never draft here (on the CPU it does not), and then the
            # draft's prefill would only double the time to the first token.
            uses_draft=s.mode == "draft-only" and fallback is None,
            uses_target=s.mode != "draft-only",
        )
        tally = _Tally()
        key = mx.random.key(s.seed)
        stop = "length"

        while True:
            s = source()
            if cancel is not None and cancel.is_set():
                stop = "cancelled"
                break
            remaining = s.max_tokens - len(tally.tokens)
            if remaining <= 0:
                break
            mode = s.mode
            if mode == "speculative" and not self.speculation_ok:
                mode, fallback = "target-only", self.speculation_reason
            if mode == "draft-only" and self._d is None:
                mode = "target-only"
            key, round_key = mx.random.split(key)
            if mode == "speculative":
                if s.dispatch == "fastest":
                    self._ensure_curve(s, len(seq))
                policy = self._policy_for(s, len(seq))
                k = min(policy.next_k(), MAX_K, remaining - 1 if s.bonus else remaining)
                if k > 0:
                    tally.draft_catch_up = max(tally.draft_catch_up, self._catch_up_draft(seq, s))
                ev = self._speculative_round(seq, s, max(k, 0), round_key, tally.rounds)
                policy.observe(ev.proposed, ev.accepted, ev.timings.total)
                events: Iterator[RoundEvent] = iter((ev,))
            else:
                events = self._single_model_rounds(
                    seq, s, mode, round_key, tally.rounds, remaining, source, cancel
                )
            for ev in events:
                tally.add(ev, time.perf_counter())
                yield ev
            if self._hit_eos(tally.tokens, s):
                stop = "eos"
                break

        self._settle(seq)
        e2e = time.perf_counter() - t_start
        prefilled = max(prefilled, tally.draft_catch_up)  # the larger of the two catch-ups
        yield self._summary(tally, s, n_prompt, prefilled, e2e, t_start, stop, fallback)

    def _policy_for(self, s: Settings, context: int) -> Policy:
        """The policy these settings name, kept across rounds and chat turns until a setting
        it depends on changes (an adaptive k keeps what it learnt from earlier messages)."""
        sig = (s.policy, s.k, s.k_min, s.k_max, s.accept_lo, s.accept_hi, s.ema_alpha, s.bonus,
               s.dispatch, s.fused_draft)
        if self._policy is None or sig != self._policy_sig:
            if s.policy == "cost-aware":
                self._ensure_curve(s, context)
            self._policy, self._policy_sig = make_policy(s, self.cost_curve), sig
        return self._policy

    def needs_curve(self, s: Settings) -> bool:
        """Whether a speculative run with `s` will stop to calibrate first: the cost-aware
        policy needs a curve, dispatch=fastest one that measured the padded kernel. A caller
        with a progress display (the TUI) calibrates itself first; otherwise the round waits."""
        if s.mode != "speculative" or not self.speculation_ok:
            return False
        return (s.policy == "cost-aware" or s.dispatch == "fastest") and self._curve_missing(s)

    def _curve_missing(self, s: Settings) -> bool:
        curve = self.cost_curve
        return curve is None or (s.dispatch == "fastest" and "gemm" not in curve.modes)

    def _ensure_curve(self, s: Settings, context: int) -> None:
        """Calibrate on first need (seconds on a GPU, ~30 s on a CPU; the round waits)."""
        if self._curve_missing(s):
            self.cost_curve = self._quick_calibration(s, context)

    def _fallback_reason(self, s: Settings) -> str | None:
        if s.mode == "speculative" and not self.speculation_ok:
            return self.speculation_reason
        return None

    def _hit_eos(self, tokens: list[int], s: Settings) -> bool:
        return not s.ignore_eos and bool(tokens) and tokens[-1] in self.eos_ids

    def _prefill(self, seq: list[int], s: Settings, uses_draft: bool, uses_target: bool = True) -> int:
        """Bring caches to seq[:-1], keeping what they already share with it.

        An unused draft is still rewound (a trim, no forward): its token list must stay a
        prefix of this conversation, because a mid-run switch to speculative feeds it only
        the tokens past its list.
        """
        want = seq[:-1]
        done = 0
        for st in (self._t, self._d):
            if st is None:
                continue
            st.rewind(want)
            if (st is self._d and not uses_draft) or (st is self._t and not uses_target):
                continue
            todo = want[len(st.seq) :]
            st.prefill(todo, s.prefill_chunk)
            done = max(done, len(todo))
        return done

    def _settle(self, seq: list[int]) -> None:
        """End of run: each cache holds at most seq[:-1] (the pipelined step may be ahead)."""
        want = seq[:-1]
        for st in (self._t, self._d):
            if st is not None:
                st.rewind(want, max(len(want) - MAX_K - 2, 0))

    def _quick_calibration(self, s: Settings, context: int) -> Any:
        from core.dispatch import calibrate

        draft = self._d.model if self._d is not None else None
        modes = ("auto", "gemm") if s.dispatch == "fastest" else ("auto",)
        return calibrate(
            self._t.model,
            draft,
            rows=s.k_max + 1,
            repeats=3,
            context=max(context, 16),
            modes=modes,
            fused_draft=s.fused_draft,
        )

    # -- rounds ------------------------------------------------------------------------------

    def _catch_up_draft(self, seq: list[int], s: Settings) -> int:
        """Before a round that drafts: feed the draft what it lags behind seq[:-1] (all of the
        prompt in the first such round, since a speculative run does not prefill it up front).
        Outside the round, so its timings and the policy's observed costs stay the round's."""
        assert self._d is not None
        todo = seq[len(self._d.seq) : -1]
        if todo:
            self._d.prefill(todo, s.prefill_chunk)
        return len(todo)

    @staticmethod
    def _logits_config(s: Settings) -> LogitsConfig:
        return LogitsConfig(
            temperature=0.0 if s.greedy else s.temperature,
            top_p=s.top_p,
            repetition_penalty=s.repetition_penalty,
            repetition_context=s.repetition_context,
        )

    def _kernel(self, rows: int) -> str:
        if self.predictor is None:
            return ""
        try:
            return str(self.predictor.family(rows))
        except Exception:  # prediction must never break decoding
            return ""

    def _speculative_round(
        self, seq: list[int], s: Settings, k: int, key: mx.array, index: int
    ) -> RoundEvent:
        """Draft k tokens, verify k + 1 rows in one target pass, accept on the device, rewind."""
        assert self._d is not None
        t, d = self._t, self._d
        cfg = self._logits_config(s)
        timer = RoundTimer(s.traced)
        greedy = cfg.greedy
        keys = mx.random.split(key, k + 1)
        hist = mx.array(seq[-cfg.repetition_context :]) if cfg.repetition_penalty != 1.0 else None
        V = self.vocab_size
        start = max(len(seq) - 2, 0)

        # Draft: k steps chained lazily; async_eval keeps the device fed without a host sync.
        d_pending = seq[len(d.seq) :]
        x = mx.array(d_pending)
        drafts: list[mx.array] = []
        qs: list[mx.array] = []
        for i in range(k):
            logits = d.decode(x, V, s.fused_draft)
            if hist is not None:
                ctx = mx.concatenate([hist, *drafts]) if drafts else hist
                logits = penalize(logits, ctx, cfg)
            if greedy:
                x = mx.argmax(logits, axis=-1)
            else:
                q = to_probs(logits, cfg)
                qs.append(q)
                x = sample(q, keys[i])
            drafts.append(x)
            # Queued in traced mode too: the draft phase still ends at one barrier (below),
            # and without this the host builds all k steps before the device starts any.
            mx.async_eval(x)
        draft_arr = mx.concatenate(drafts) if drafts else mx.array([], dtype=mx.uint32)
        timer.mark("draft", draft_arr)

        # Verify: the pending token plus all drafts, one forward, k + 1 rows kept.
        t_pending = seq[len(t.seq) :]
        inp = mx.concatenate([mx.array(t_pending, dtype=draft_arr.dtype), draft_arr])
        rows = inp.shape[0]
        with self._verify_context(s, rows):
            logits = t.forward(inp, V)[-(k + 1) :]
        timer.mark("verify", logits)

        # Accept on the device, then the round's single host sync.
        if hist is not None:
            logits = penalize(logits, mx.concatenate([hist, draft_arr]), cfg)
        verdict: Verdict
        if greedy:
            verdict = accept_greedy(mx.argmax(logits, axis=-1), draft_arr)
        else:
            p = to_probs(logits, cfg)
            q = mx.concatenate(qs) if qs else mx.zeros((0, V), mx.float32)
            verdict = accept_sampled(p, q, draft_arr, s.rule, s.tv_budget, keys[k])
        packed = mx.concatenate(
            [draft_arr.astype(mx.int32), verdict.n_accepted.reshape(1).astype(mx.int32),
             verdict.next_token.reshape(1).astype(mx.int32)]
        )
        mx.eval(packed, verdict.tv_sum)
        vals = packed.tolist()
        tv_sum = float(verdict.tv_sum.item())
        timer.mark("sample")

        proposed_ids, n, nxt = vals[:k], vals[k], vals[k + 1]
        committed = [CommittedToken(x_, "accepted") for x_ in proposed_ids[:n]]
        if n < k:
            committed.append(CommittedToken(nxt, "corrected"))
        elif s.bonus:
            committed.append(CommittedToken(nxt, "bonus"))
        committed = self._cut_at_eos(committed, s)
        rejected = tuple(proposed_ids[n:])

        # Rewind: both caches keep what they share with the committed sequence minus its tail.
        t.seq.extend(t_pending + proposed_ids)
        if k:  # the draft fed its pending tokens and k - 1 drafts; with k = 0 it fed nothing
            d.seq.extend(d_pending + proposed_ids[: k - 1])
        seq.extend(c.id for c in committed)
        want = seq[:-1]
        t.rewind(want, start)
        d.rewind(want, start)
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
            kernel=self._kernel(rows),
            tv=(tv_sum / decided) if decided and not greedy else None,
            context=len(seq),
            traced=s.traced,
        )

    def _verify_context(self, s: Settings, rows: int) -> contextlib.AbstractContextManager[Any]:
        """Dispatch and attention overrides around the multi-row verification only."""
        return verification_patches(
            self._t.model, s.dispatch, s.verify_attention, rows, curve=self.cost_curve
        )

    def _cut_at_eos(self, toks: list[CommittedToken], s: Settings) -> list[CommittedToken]:
        if s.ignore_eos:
            return toks
        for i, tok in enumerate(toks):
            if tok.id in self.eos_ids:
                return toks[: i + 1]
        return toks

    def _single_model_rounds(
        self,
        seq: list[int],
        s: Settings,
        mode: str,
        key: mx.array,
        index: int,
        budget: int,
        source: Callable[[], Settings],
        cancel: threading.Event | None,
    ) -> Iterator[RoundEvent]:
        """One token per round from one model, pipelined, traced or not.

        The next token's forward is queued (async_eval) before the current one is read, as
        mlx-lm's generate_step does, so the host sync overlaps device work. A barrier between
        forward and sampling would cost that overlap (about 30% of a 7B step on the H200), so a
        traced round charges its whole time, read to read, to the forward's phase: sampling is
        part of the same device graph. The loop hands control back when the settings change,
        so a key applies from the next round.
        """
        st = self._t if mode == "target-only" else self._d
        assert st is not None
        origin = "target" if mode == "target-only" else "draft"
        phase = "verify" if mode == "target-only" else "draft"
        cfg = self._logits_config(s)
        V = self.vocab_size
        ctx_n = cfg.repetition_context
        kernel = self._kernel(1) if mode == "target-only" else ""

        def step(tokens: mx.array, hist: mx.array | None, k: mx.array) -> mx.array:
            logits = st.decode(tokens, V, s.fused_draft)
            if hist is not None:
                logits = penalize(logits, hist, cfg)
            if cfg.greedy:
                return mx.argmax(logits, axis=-1)
            return sample(to_probs(logits, cfg), k)

        def window(hist: mx.array | None, y: mx.array) -> mx.array | None:
            return None if hist is None else mx.concatenate([hist, y])[-ctx_n:]

        def wants_more(produced: int) -> bool:
            if produced + 1 >= budget or (cancel is not None and cancel.is_set()):
                return False
            return source() == s  # a changed setting hands control back to generate()

        pending = seq[len(st.seq) :]
        hist = mx.array(seq[-ctx_n:]) if cfg.repetition_penalty != 1.0 else None
        key, k0 = mx.random.split(key)
        timer = RoundTimer(s.traced)
        y = step(mx.array(pending), hist, k0)
        st.seq.extend(pending)
        mx.async_eval(y)
        produced = 0
        while True:
            more = wants_more(produced)
            nxt = None
            if more:
                key, kn = mx.random.split(key)
                nxt = step(y, window(hist, y), kn)
                mx.async_eval(nxt)
            tok = int(y.item())
            timer.mark(phase)  # no barrier: the clock at the read that ends this round
            seq.append(tok)
            produced += 1
            if nxt is not None:
                st.seq.append(tok)
            yield RoundEvent(
                index=index + produced - 1,
                tokens=(CommittedToken(tok, origin),),
                rows=1,
                timings=timer.finish(),
                kernel=kernel,
                context=len(seq),
                traced=s.traced,
            )
            if not more or self._hit_eos([tok], s):
                return
            if (cancel is not None and cancel.is_set()) or source() != s:
                # Set by the consumer while it held this round: stop now, not one token
                # later. A pipelined step already fed `tok`; take it back (seq[:-1] again).
                st.rewind(seq[:-1], max(len(seq) - 2, 0))
                return
            timer = RoundTimer(s.traced)
            hist = window(hist, y)
            assert nxt is not None  # `more` held
            y = nxt

    # -- summary -----------------------------------------------------------------------------

    def _summary(
        self,
        tally: _Tally,
        s: Settings,
        n_prompt: int,
        prefilled: int,
        e2e: float,
        t_start: float,
        stop: str,
        fallback: str | None,
    ) -> RunSummary:
        ttft = (tally.first_token_at - t_start) if tally.first_token_at else e2e
        n = len(tally.tokens)
        decode_time = e2e - ttft
        decode_tok_s = (n - 1) / decode_time if n > 1 and decode_time > 0 else 0.0
        spec = tally.spec_rounds > 0
        per_pos = tuple(
            tally.pos_hits[i] / tally.pos_tries[i] for i in range(MAX_K) if tally.pos_tries[i]
        )
        return RunSummary(
            mode=s.mode if fallback is None else "target-only",
            tokens=n,
            rounds=tally.rounds,
            prompt_tokens=n_prompt,
            prefill_tokens=prefilled,
            proposed=tally.proposed,
            accepted=tally.accepted,
            acceptance=(tally.accepted / tally.proposed) if spec and tally.proposed else None,
            per_position_acceptance=per_pos,
            mean_accepted_length=(tally.accepted / tally.spec_rounds) if spec else None,
            e2e_s=e2e,
            ttft_s=ttft,
            decode_tok_s=decode_tok_s,
            phase_s=dict(tally.phase),
            mean_tv=(tally.tv_sum / tally.tv_count) if tally.tv_count else None,
            traced=s.traced,
            stop_reason=stop,
            token_ids=tuple(tally.tokens),
            fallback_reason=fallback,
        )
