"""Compiles never timed: a warm-up that runs every shape the timed work will use before any
timing, inside the watch that says when a first use stalls on GPU kernel compilation.

Why: on a fresh CUDA machine MLX compiles its kernels (NVRTC) at their first use and caches
them on disk (`MLX_PTX_CACHE_DIR`, else <tmp>/mlx/<version>/ptx); on Metal it compiles at first
use in every process, with no disk cache; on the CPU only `mx.compile`d functions compile. A
first chat then waited a minute with no sign, and a calibration or a timed request that ran
first paid for compiles it should never have measured. So:

- `CompileWatch` (core/runtime/compile_watch.py) says when a first use stalls on a compile.
- `warm_up` runs, on fresh caches (the engine's are untouched), the target's prefill at the
  prompt's length in the engine's chunks (one chunk when unknown), its decode step, verifications of every row count asked for (per calibration
  mode) with the acceptance rules, a tree source's tree verifications (their own forward,
  mask and acceptance) of every tree row count, the draft's prefill and decode steps (greedy and
  sampled, compiled when asked), inside one watch; then a settle check repeats a single-row target step
  until two consecutive timings agree within `settle_tolerance`. On the CPU backend it does
  nothing unless forced. It only runs before timed work: decode rounds are never touched.
- `Warmer` (core/runtime/warmer.py) runs the same forwards in the order of need.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from core.runtime.compile_watch import THRESHOLD_S, CompileWatch, Notify, kernel_cache_dir

SETTLE_TRIES = 8
SETTLE_TOLERANCE = 0.2  # two consecutive single-row steps within 20% of each other


@dataclass
class WarmupRecord:
    """What the warm-up did, as bench reports and calibration files keep it."""

    ran: bool
    seconds: float = 0.0
    compiled: bool = False  # a compile was seen: the kernel cache grew (CUDA) or a step stalled
    settled: bool | None = None  # two consecutive single-row steps agreed (None: not run)
    cache_growth_bytes: int | None = None  # None: this backend keeps no disk cache
    backend: str = ""
    reason: str | None = None  # why it did not run
    rows: list[int] = field(default_factory=list)
    tree_rows: list[int] = field(default_factory=list)  # a tree source's verifications
    prompt_tokens: int = 0
    settle_s: list[float] = field(default_factory=list)  # the settle check's step timings

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verify_rows(settings: Iterable[Any], extra: int = 0) -> list[int]:
    """1..R: every row count a verification of these settings (or a calibration of `extra`
    rows) can run: the longest proposal plus one."""
    from core.settings import MAX_K

    longest = 0
    for s in settings:
        if s.mode == "speculative":
            longest = max(longest, s.k if s.policy == "fixed" else max(s.k, s.k_max))
    top = max(min(longest, MAX_K) + 1, extra, 1)
    return list(range(1, top + 1))


def tree_rows(settings: Iterable[Any]) -> list[int]:
    """2..NODE_BUDGET + 1: every row count a tree verification of these settings can run
    (the tree's nodes, from the depth up to the budget as the curve sizes them, and its root;
    a handed-off round feeds the nodes alone), or none when no setting drafts trees."""
    from core.dispatch.curve_cache import tree_run
    from core.dispatch.row_plan import plan_need

    if not any(s.mode == "speculative" and tree_run(s) for s in settings):
        return []
    return list(range(2, plan_need(0, tree=True) + 1))


def sampling_configs(settings: Iterable[Any] = ()) -> list[Any]:
    """One LogitsConfig per kind of logits processing the settings use (greedy, temperature,
    top-p, repetition penalty), plus greedy and a plain sampled one, which any run may use."""
    from core.primitives.sampling import LogitsConfig

    out = {LogitsConfig(0.0), LogitsConfig(0.7)}
    for s in settings:
        out.add(LogitsConfig(
            0.0 if s.greedy else 0.7,
            0.9 if s.top_p < 1.0 else 1.0,
            1.1 if s.repetition_penalty != 1.0 else 1.0,
            s.repetition_context,
        ))
    return sorted(out, key=lambda c: (c.temperature, c.top_p, c.repetition_penalty))


def warm_up(
    target: Any,
    draft: Any | None = None,
    *,
    vocab: int,
    rows: Sequence[int] = (1,),
    tree_rows: Sequence[int] = (),
    prompt_tokens: int = 0,
    chunk: int | None = None,
    modes: Sequence[str] = ("auto",),
    configs: Sequence[Any] | None = None,
    compiled_draft: bool = False,
    label: str = "this model",
    backend: Any | None = None,
    force: bool = False,
    on_notice: Notify | None = None,
    threshold_s: float = THRESHOLD_S,
    settle_tries: int = SETTLE_TRIES,
    settle_tolerance: float = SETTLE_TOLERANCE,
    lockstep: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> WarmupRecord:
    """Run every shape the timed work will use once, on fresh caches, inside a CompileWatch.

    `rows`: the verification row counts; `tree_rows`: a tree source's (`tree_rows()`),
    each a tree forward per mode; `prompt_tokens`: the prefill's length (the timed
    work's prompt, prefilled in `chunk`s as the engine does; one chunk when not known); `modes`: calibration modes whose dispatch and
    attention overrides the verifications run under. `lockstep` (a sharded target: every rank
    must run the same forwards) runs all `settle_tries` steps instead of stopping when settled.
    `backend` fakes the machine in tests (core.dispatch.backend_info(query=...)).
    """
    from core.dispatch.backend import current_backend
    from core.primitives.cached_model import PREFILL_CHUNK

    b = backend or current_backend()
    if b.backend == "cpu" and not force:
        return WarmupRecord(False, backend="cpu",
                            reason="the CPU backend compiles no kernels at first use")
    chunk = chunk or PREFILL_CHUNK
    n_prompt = prompt_tokens if prompt_tokens > 0 else chunk
    row_list = sorted({int(r) for r in rows if int(r) >= 1}) or [1]
    trees = sorted({int(r) for r in tree_rows if int(r) >= 2})
    record = WarmupRecord(True, backend=b.backend, rows=row_list, tree_rows=trees,
                          prompt_tokens=n_prompt)
    t0 = clock()
    watch = CompileWatch(label, on_notice=on_notice, threshold_s=threshold_s,
                         cache_dir=kernel_cache_dir(b.backend))
    with watch:
        cfgs = list(configs) if configs is not None else sampling_configs()
        run = WarmShapes(target, draft, vocab, cfgs, b, watch.progress)
        prompt = run.prompt(n_prompt)
        t_cache = run.target(prompt, chunk, row_list, modes)
        run.trees(t_cache, trees, modes)
        if draft is not None:
            run.draft(prompt, chunk, compiled_draft)
        record.settle_s, record.settled = _settle(
            t_cache, run, settle_tries, settle_tolerance, lockstep, clock)
    record.seconds = clock() - t0
    record.cache_growth_bytes = watch.cache_growth_bytes
    grew = watch.cache_growth_bytes
    record.compiled = bool(grew) if grew is not None else watch.noticed
    return record


def warm_up_engine(
    engine: Any,
    settings: Sequence[Any] = (),
    *,
    prompt_tokens: int = 0,
    rows: Sequence[int] | None = None,
    modes: Sequence[str] = ("auto",),
    label: str | None = None,
    **kw: Any,
) -> WarmupRecord:
    """`warm_up` for an Engine's pair and the settings its timed work will run (rows 1..the
    longest proposal + 1 unless given; the settings' logits processing; the compiled draft step where their step may run it)."""
    target = getattr(engine, "target_model", None)
    if target is None:  # a stand-in engine (tests) with no model to warm
        return WarmupRecord(False, reason="the engine exposes no target model")
    models = getattr(engine, "models", None) or {}
    target_id = models.get("target")
    name = label or (getattr(target_id, "spec", None) or "this model")
    compiled = any(getattr(s, "step", "eager") != "eager" for s in settings)
    return warm_up(
        target, getattr(engine, "draft_model", None), vocab=engine.vocab_size,
        rows=rows if rows is not None else verify_rows(settings),
        tree_rows=tree_rows(settings), prompt_tokens=prompt_tokens,
        modes=modes, configs=sampling_configs(settings), compiled_draft=compiled, label=name,
        lockstep=getattr(engine, "spmd", None) is not None, **kw,
    )


class WarmShapes:
    """The forwards of a warm-up, built from the engine's own pieces so the kernels match."""

    def __init__(self, target: Any, draft: Any, vocab: int, configs: list[Any], backend: Any,
                 progress: Callable[[], None]) -> None:
        import numpy as np

        self.target_model, self.draft_model, self.vocab = target, draft, vocab
        self.configs, self.backend, self.progress = configs, backend, progress
        self.rng = np.random.default_rng(0)

    def prompt(self, n: int) -> list[int]:
        return [int(x) for x in self.rng.integers(0, self.vocab, n)]

    def _tokens(self, n: int) -> Any:
        import mlx.core as mx

        return mx.array(self.rng.integers(0, self.vocab, n), dtype=mx.int32)

    def _process(self, logits: Any, drafts: Any, hist: Any, configs: Sequence[Any]) -> list[Any]:
        """Every sampling config's processing and acceptance of `logits` [R, V] (lazy)."""
        import mlx.core as mx

        from core.primitives.sampling import (
            accept_greedy_packed,
            accept_sampled,
            one_hot,
            penalize,
            sample,
            to_probs,
        )

        out = []
        k = drafts.shape[0]
        key = mx.random.key(0)
        for cfg in configs:
            lg = penalize(logits, mx.concatenate([hist, drafts]), cfg)
            if cfg.greedy:
                out.append(accept_greedy_packed(lg, drafts))  # what a greedy round runs
                continue
            p = to_probs(lg, cfg)
            out.append(sample(p[-1:], key))
            if k:
                q = one_hot(drafts, self.vocab)
                for rule in ("lossless", "mentored"):
                    v = accept_sampled(p, q, drafts, rule, 0.5, key)
                    out += [v.n_accepted, v.next_token, v.tv_sum]
        return out

    def target(self, prompt: list[int], chunk: int, rows: list[int], modes: Sequence[str]) -> Any:
        """Prefill, then each row count under each mode; returns the cache (trimmed back)."""
        t = self.target_cache(prompt, chunk)
        for mode in dict.fromkeys(modes):
            for r in rows:
                self.verify(t, r, mode, self.configs)
        return t

    def target_cache(self, prompt: list[int], chunk: int) -> Any:
        """A fresh target cache holding `prompt` (prefilled in `chunk`s, as the engine does)."""
        from core.primitives.cached_model import CachedModel

        t = CachedModel.fresh(self.target_model)
        t.prefill(prompt, chunk)
        self.progress()
        return t

    def verify(self, t: Any, r: int, mode: str, configs: Sequence[Any]) -> None:
        """One verification of `r` rows under `mode`, with each config's processing and
        acceptance, on top of `t`'s context, then taken back."""
        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache

        from core.dispatch.calibrate import MODE_SETTINGS
        from core.dispatch.patches import verification_patches

        dispatch, attention = MODE_SETTINGS[mode]
        hist = mx.array(self.prompt(20), dtype=mx.int32)
        toks = self._tokens(r)
        if mode == "compiled":  # the compiled forward's graph for r rows: no patch applies
            logits = t.forward(toks, self.vocab, compiled=True)
        else:
            with verification_patches(t.model, dispatch, attention, r, backend=self.backend):
                logits = t.forward(toks, self.vocab)
        mx.eval(logits, *self._process(logits, toks[1:], hist, configs))
        trim_prompt_cache(t.cache, r)
        self.progress()

    def trees(self, t: Any, rows: Sequence[int], modes: Sequence[str]) -> None:
        """A tree verification of each of `rows` under each mode, as a tree round runs it
        (core/decode/tree_round.py): the tree forward with its mask, under the mode's
        patches (none for "compiled": that step's rounds run the tree unpatched), then the
        greedy and lossless tree rules; taken back after."""
        for mode in dict.fromkeys(modes):
            for r in rows:
                self.tree(t, r, mode, self.configs)

    def tree(self, t: Any, r: int, mode: str, configs: Sequence[Any]) -> None:
        """One tree verification of `r` rows (the root and r - 1 nodes in two branches) with
        each config's tree rule. Nothing where the target has no tree forward (its tree
        rounds verify the chain, which `verify` warms)."""
        import contextlib

        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache

        from core.dispatch.calibrate import MODE_SETTINGS
        from core.dispatch.patches import verification_patches
        from core.primitives import tree_forward
        from core.primitives.sampling import to_probs
        from core.primitives.token_tree import TokenTree
        from core.primitives.tree_sampling import (
            TreeArrays,
            accept_tree_greedy_packed,
            accept_tree_lossless_packed,
        )

        if tree_forward.supports_tree(t) is not None:
            return
        n = r - 1
        half = (n + 1) // 2  # a chain of half the nodes, then a second branch from the root
        parents = tuple(-1 if i in (0, half) else i - 1 for i in range(n))
        tree = TokenTree(tuple(int(x) for x in self.rng.integers(0, self.vocab, n)), parents)
        dispatch, attention = MODE_SETTINGS[mode]
        patch = (contextlib.nullcontext() if mode == "compiled" else
                 verification_patches(t.model, dispatch, attention, r, backend=self.backend))
        with patch:
            logits = tree_forward.forward_tree(t, self.prompt(1), tree, self.vocab)
        out = []
        for cfg in configs:
            if cfg.greedy:
                out.append(accept_tree_greedy_packed(logits, TreeArrays.of(tree, False)))
            else:
                out.append(accept_tree_lossless_packed(to_probs(logits, cfg),
                                                       TreeArrays.of(tree), mx.random.key(0)))
        mx.eval(logits, *out)
        trim_prompt_cache(t.cache, r)
        self.progress()

    def step(self, t: Any) -> None:
        """One single-row target step, evaluated, then taken back."""
        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache

        mx.eval(t.forward(self._tokens(1), self.vocab))
        trim_prompt_cache(t.cache, 1)

    def draft(self, prompt: list[int], chunk: int, fused: bool) -> None:
        """The draft's prefill and its chained decode steps, greedy and sampled, plain and
        (when asked) compiled, as core.drafting.model runs them."""
        for compiled in dict.fromkeys((False, fused)):
            d = self.draft_cache(prompt, chunk)
            self.draft_steps(d, self.configs, compiled)
            del d

    def draft_cache(self, prompt: list[int], chunk: int) -> Any:
        """A fresh draft cache holding `prompt` (its ids folded into the draft's vocabulary)."""
        from core.dispatch.patches import draft_attention
        from core.primitives.cached_model import CachedModel

        d = CachedModel.fresh(self.draft_model, draft_attention(self.draft_model))
        d.prefill([x % self.draft_vocab() for x in prompt], chunk)
        self.progress()
        return d

    def draft_vocab(self) -> int:
        from core.primitives.introspect import vocab_size

        return min(self.vocab, vocab_size(self.draft_model) or self.vocab)

    def draft_steps(self, d: Any, configs: Sequence[Any], compiled: bool) -> None:
        """Two chained draft decode steps per config on top of `d`, then taken back."""
        import mlx.core as mx
        from mlx_lm.models.cache import trim_prompt_cache

        from core.primitives.sampling import sample, to_probs

        dvocab = self.draft_vocab()
        for cfg in configs:
            x = mx.array([int(self.rng.integers(0, dvocab))], dtype=mx.int32)
            outs = []
            for _ in range(2):
                logits = d.decode(x, self.vocab, compiled)
                x = (mx.argmax(logits, axis=-1) if cfg.greedy
                     else sample(to_probs(logits, cfg), mx.random.key(1)))
                mx.async_eval(x)
                outs.append(x)
            mx.eval(*outs)
            trim_prompt_cache(d.cache, 2)
            self.progress()


def _settle(t: Any, run: WarmShapes, tries: int, tolerance: float, lockstep: bool,
            clock: Callable[[], float]) -> tuple[list[float], bool]:
    """Single-row target steps until two consecutive timings agree within `tolerance` (all
    `tries` under lockstep); the timings, and whether two did agree."""
    times: list[float] = []
    settled = False
    for _ in range(max(tries, 2)):
        t0 = clock()
        run.step(t)
        times.append(clock() - t0)
        run.progress()
        if len(times) >= 2:
            a, b = times[-2], times[-1]
            if abs(a - b) <= tolerance * max(a, b, 1e-12):
                settled = True
                if not lockstep:
                    break
    return times, settled
