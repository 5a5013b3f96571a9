"""MLXSession: the real engine behind the app: core.models + core.decode.engine + core.dispatch.

Built on the engine thread by EngineBridge (the factory is called there), so every MLX
object it creates belongs to that thread's stream. Only `decode` is called from the UI
thread, and it touches the tokenizer alone, never MLX.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from core.events import RoundEvent, RunSummary
from core.settings import MAX_K, Settings
from tui.engine_info import CurveInfo, PairInfo, ShapeKernel


def curve_info(curve: Any, greedy: bool | None = None, kept_at: str | None = None) -> CurveInfo:
    """A core.dispatch.VerifyCostCurve as the plain numbers the Kernels panel draws; with
    `greedy` given, the draft step is the one a run sampling that way pays (for_sampling);
    `kept_at`: reused from the curve cache, measured then."""
    step = curve.draft_step_s
    if greedy is not None and hasattr(curve, "for_sampling"):
        step = curve.for_sampling(greedy).draft_step_s
    return CurveInfo(
        t_verify={r: float(curve.t_verify(r)) for r in curve.rows},
        draft_step_s=step,
        boundary=curve.boundary(),
        predicted_boundary=curve.predicted_boundary,
        kernels={int(r): str(k) for r, k in curve.kernels.items()},
        raw=curve,
        kept_at=kept_at,
    )


def shape_kernels(predictor: Any, rows: int) -> tuple[ShapeKernel, ...]:
    """The predictor's per-shape answers (core.dispatch.ShapePrediction) as table rows."""
    out = []
    for p in predictor.per_shape(rows):
        bits = f" {p.bits}-bit" if p.quantized and p.bits else ""
        out.append(ShapeKernel(p.name, f"{p.k}x{p.n}{bits}", p.kernel, p.count))
    return tuple(out)


class MLXSession:
    """Loads the pair with core.models and drives core.decode.engine.Engine on the calling thread."""

    park_thread_on_close = True  # see EngineBridge._serve: an ended MLX thread aborts at exit
    # `<|im_end|>` typed in a message stays text unless --special-tokens-in-text
    specials_in_text = False

    def __init__(self, target_spec: str, draft_spec: str | None) -> None:
        from core.decode.engine import Engine
        from core.models import load_pair, pair_context_window
        from core.runtime.warmer import Warmer, every_size

        self.pair = load_pair(target_spec, draft_spec)
        self.engine = Engine.from_pair(self.pair)
        # Compiles in the order of need: each turn warms what its first rounds use
        # (generate), and the engine thread warms the rest while idle (warm_idle), smallest
        # first: every row count, each kind of logits processing (top-p, repetition penalty),
        # the compiled draft step and the tree source's verifications (`d` reaches it), since
        # settings change while the app runs. On a fresh GPU the first answer then waits for a
        # few kernels, not for all of them.
        self.warmer = Warmer(self.engine, label=self.pair.target.name)
        every = [Settings(), Settings(temperature=0.7, top_p=0.9, repetition_penalty=1.1,
                                      step="auto"), Settings(draft_source="tree")]
        self.warmer.plan_idle(every_size(every, rows=range(1, MAX_K + 2),
                                         has_draft=self.pair.draft is not None))
        # A GPU whose matrix kernels are not compiled yet starts narrow until the idle warm-up
        # has compiled them (core/runtime/warm_start.py: 30 s a kernel, none below 8 rows).
        from core.runtime.warm_start import NarrowGate, narrow_start

        self.narrow = NarrowGate(narrow_start([self.engine.target_model,
                                               self.engine.draft_model]), self.warmer)
        self.warmup: Any = None  # the last turn's first-round WarmupRecord
        self.tokenizer = self.pair.target.tokenizer
        # Tokens both models can attend to: a chat that outgrows it drops its oldest turns.
        self.context_window = pair_context_window(self.pair)
        self._decode_lock = threading.Lock()
        self._span_ends: list[tuple[tuple[str, str], int]] = []  # message -> its end, cached
        self.info = self._describe(target_spec, draft_spec)

    def _describe(self, target_spec: str, draft_spec: str | None) -> PairInfo:
        """Names, backend, and every per-shape kernel prediction, computed once at load."""
        from core.dispatch import backend_info
        from core.profile import record_environment

        pair, engine = self.pair, self.engine
        backend = backend_info()
        kernels: dict[int, tuple[ShapeKernel, ...]] = {}
        families: dict[int, str] = {}
        boundary = None
        predictor = engine.predictor
        if predictor is not None:
            for rows in range(1, MAX_K + 2):
                families[rows] = str(predictor.family(rows))
                kernels[rows] = shape_kernels(predictor, rows)
            boundary = predictor.forward_boundary()
        random = pair.target.random_weights or bool(pair.draft and pair.draft.random_weights)
        return PairInfo(
            target_spec=target_spec,
            draft_spec=draft_spec,
            target_name=pair.target.name,
            draft_name=pair.draft.name if pair.draft is not None else None,
            backend=backend.backend,
            device=backend.device_name,
            random_weights=random,
            speculation_ok=engine.speculation_ok,
            speculation_reason=engine.speculation_reason,
            eos_ids=frozenset(pair.eos_ids),
            kernels=kernels,
            families=families,
            predicted_boundary=boundary,
            environment=record_environment(),
            models=engine.models,
        )

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        from core.models import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages, model=self._model_name(),
                               specials_in_text=self.specials_in_text)

    def _model_name(self) -> str:
        return str(self.pair.target.name)

    def message_spans(self, messages: list[dict[str, str]]) -> list[tuple[int, int]]:
        """Per message, its [start, end) in prompt_ids(messages): where the conversation
        rendered up to it ends. The ends of earlier messages are kept, so a turn renders only
        its new messages (the template is assumed to render a prefix as a prefix)."""
        cache = self._span_ends
        keys = [(m["role"], m["content"]) for m in messages]
        same = 0
        while same < min(len(cache), len(keys)) and cache[same][0] == keys[same]:
            same += 1
        del cache[same:]
        for i in range(same, len(messages)):
            cache.append((keys[i], len(self._rendered(messages[: i + 1]))))
        ends = [end for _, end in cache]
        return list(zip([0, *ends[:-1]], ends, strict=True))

    def _rendered(self, messages: list[dict[str, str]]) -> list[int]:
        """The ids of a conversation as the template renders it, without the answer's header."""
        from core.models import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages, add_generation_prompt=False,
                               model=self._model_name(),
                               specials_in_text=self.specials_in_text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids without special tokens (a rejected draft may be EOS or <|im_start|>)."""
        with self._decode_lock:
            try:
                return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))
            except TypeError:  # a tokenizer without the keyword
                return str(self.tokenizer.decode(list(ids)))

    def generate(
        self,
        prompt_ids: list[int],
        settings: Settings,
        cancel: threading.Event,
        settings_source: Callable[[], Settings],
    ) -> Iterable[RoundEvent | RunSummary]:
        # What this turn's first rounds use, before its first round (the compile notices are
        # forwarded by the bridge); the rest was or will be warmed while idle.
        said = self.narrow.announce()
        if said:  # the bridge shows a core WARNING as a notification
            logging.getLogger("core.runtime.warm_start").warning(said)
        settings = self.narrow.settings(settings)
        self.warmup = self.warmer.first_round(settings, len(prompt_ids))
        return self.engine.generate(prompt_ids, settings, cancel=cancel,
                                    settings_source=self.narrow.source(settings_source))

    def cached_tokens(self, prompt_ids: Sequence[int], settings: Settings) -> int:
        """How many of the prompt's tokens the cache of the model that prefills it already
        holds (an earlier turn's): its prefill feeds only the rest."""
        state = self.engine.cache_state()
        held = state.get("draft_seq" if settings.mode == "draft-only" else "target_seq", [])
        want = list(prompt_ids[:-1])
        n = min(len(held), len(want))
        return next((i for i in range(n) if held[i] != want[i]), n)

    def warm_idle_next(self, settings: Settings) -> Any:
        """What warm_idle(settings) would warm next (IdleProgress, running), or None."""
        from core.runtime.warmer import first_round_sizes

        first = first_round_sizes(settings, 0, curve=self.engine.cost_curve,
                                  has_draft=self.pair.draft is not None)
        return self.warmer.idle_next(first)

    def warm_idle(self, settings: Settings) -> Any:
        """One size of the idle warm-up, preferring what `settings`' next turn would use; None
        when all are warm (core.runtime.warmer.IdleProgress otherwise)."""
        from core.runtime.warmer import first_round_sizes

        first = first_round_sizes(settings, 0, curve=self.engine.cost_curve,
                                  has_draft=self.pair.draft is not None)
        return self.warmer.idle_step(first)

    def kept_curve(self, settings: Settings) -> tuple[CurveInfo | None, tuple[str, ...]]:
        """The curve kept for this pair, machine and settings by an earlier start, set on the
        engine (None: none kept, or it does not match); notices for files ignored."""
        from core.dispatch.curve_cache import engine_key, load_curve

        settings = self.narrow.settings(settings)  # a short kept curve serves a narrow start
        found = load_curve(engine_key(self.engine, settings), settings)
        notices = (found.notice,) if found.notice else ()
        if found.kept is None:
            return None, notices
        curve = found.kept.curve
        self.engine.set_cost_curve(curve)
        return curve_info(curve, settings.greedy, kept_at=found.kept.when()), notices

    def needs_curve(self, settings: Settings) -> bool:
        self.narrow.drop_short_curve(self.engine, settings)  # lifted: measure the full rows
        return self.engine.needs_curve(self.narrow.settings(settings))

    def calibrate(self, settings: Settings, progress: Callable[[float, str], None],
                  cancel: threading.Event | None = None) -> CurveInfo:
        """Measure verify cost at the row plan's counts (core/dispatch/row_plan.py: every R on a
        GPU; on the CPU 1..9, both sides of each predicted kernel change, k_max + 1); `cancel`
        set (Esc) stops it after the forward under way (CalibrationCancelled)."""
        from core.runtime.calibration import curve_for

        def report(done: int, total: int, label: str) -> None:
            progress(done / total if total else 0.0, label)

        # Measured now (`c`, or a first turn that found no kept curve), after a warm-up of every
        # row and mode it times (no sample includes a compile); kept for the next start.
        # narrow while the GEMM kernels are not compiled: at most its rows (none compiled)
        result = curve_for(self.engine, self.narrow.settings(settings), context=128,
                           progress=report, cancel=cancel, remeasure=True,
                           label=self.pair.target.name, max_rows=self.narrow.rows)
        curve = result.curve
        curve.target_spec, curve.target_name = self.pair.target.spec, self.pair.target.name
        if self.pair.draft is not None:
            curve.draft_spec, curve.draft_name = self.pair.draft.spec, self.pair.draft.name
        for text in result.notices:  # the cache folder could not be written: said, not fatal
            logging.getLogger("core.dispatch.curve_cache").warning(text)
        return curve_info(curve, settings.greedy)

    def bench(
        self,
        prompt_ids: list[int],
        settings: Settings,
        progress: Callable[[float, str], None],
        cancel: threading.Event,
    ) -> Any:
        from core import bench

        def report(done: int, total: int, label: str) -> None:
            progress(done / total if total else 0.0, f"{label} ({done}/{total})")

        try:
            return bench.run_protocol(
                self.engine,
                prompt_ids,
                [settings],  # the protocol adds the target-only baseline itself
                # In the app: the seed's protocol at a size that answers in a minute or two;
                # `specdec-tui bench` runs it in full (3 x 3 requests of 256 tokens).
                tokens=min(settings.max_tokens, 64),
                seeds=3,
                invocations=1,
                progress=report,
                cancel=cancel,
                decode=lambda ids: self.decode(ids),
                environment=self.info.environment or None,
            )
        except bench.BenchCancelled:
            return None
