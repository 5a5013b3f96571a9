"""The seed's benchmark protocol over an Engine: warm-up, timed and traced requests, quality.

`run_protocol` is a pure function of an Engine (the TUI calls it from its engine thread, the
CLI from `specdec-tui bench`, the sweep once per block): no printing, no files, a
`BenchReport` back. Its parameters come as two objects: `ProtocolConfig`, what is measured
(recorded in reports), and `ProtocolInputs`, what the caller plugs in (callbacks, a peer).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.bench.errors import BenchCancelled, BenchError
from core.bench.peer import (
    Peer,
    link_peers,
    paired_counterparts,
    peer_quality,
    run_peer,
    with_peer_counterparts,
)
from core.bench.predicted import attach_predictions, calibration_for, needed_calibration
from core.bench.provenance import models_protocol, stamp_models
from core.bench.quality import NLL_BASIS, assess_quality, plan_references
from core.bench.requests import record_timed, record_traced, run_request
from core.bench.results import (
    BenchReport,
    BenchResult,
    BenchSetting,
    Divergence,
    SettingLike,
    as_bench_settings,
    describe,
)

# Progress callback: (done, total, label). The TUI posts it as a message; the CLI draws a bar.
Progress = Callable[[int, int, str], None]

# The most of each count one run takes, checked before any list of requests is built:
# `--seeds 1000000000` built a billion requests and died of a MemoryError at 5.5 GB. Far past
# any measurement (the seed's protocol is 3 x 3 with one warm-up).
MAX_COUNTS = {"seeds": 1_000, "invocations": 1_000, "warmup": 100}
# A plan past this many requests says its size and asks (--yes where no one can answer).
PLAN_CONFIRM = 500
# The rate an estimate assumes before a model is loaded (the default pair on a laptop CPU
# decodes ~50 tokens a second; a GPU is faster, a large model slower): an order of magnitude.
ESTIMATE_TOKENS_PER_S = 50.0


def check_bounds(counts: dict[str, int], prefix: str = "") -> str | None:
    """The sentence for the first count past MAX_COUNTS (`prefix`: "--" on a command line)."""
    for name, most in MAX_COUNTS.items():
        value = counts.get(name)
        if value is not None and value > most:
            return f"{prefix}{name} must be at most {most:,}, got {value:,}."
    return None


def plan_requests(rows: int, config: ProtocolConfig, prompts: int = 1) -> int:
    """About how many requests a run of `rows` settings (baseline included) over `prompts`
    makes: warm-ups, timed ones, traced ones and the quality check's references."""
    per_row = config.warmup + config.invocations * config.seeds
    per_row += config.seeds if config.traced else 0
    per_row += config.seeds if config.quality else 0
    return rows * prompts * per_row


def plan_sentence(requests: int, tokens: int) -> str:
    """A plan's size and its estimated time, in words."""
    total = requests * tokens
    hours = total / ESTIMATE_TOKENS_PER_S / 3600
    when = f"about {hours:,.1f} hours" if hours >= 1 else f"about {hours * 60:,.0f} minutes"
    return (f"This plan is {requests:,} requests of {tokens:,} tokens ({total:,} tokens: {when} "
            f"at {ESTIMATE_TOKENS_PER_S:g} tokens a second)")


def check_seeds(rows: Sequence[BenchSetting], seeds: int) -> None:
    """Seeds run seed .. seed + seeds - 1: refuse a row whose last seed would pass what
    mlx.random.key takes (a TypeError after the models loaded, before this check)."""
    from core.settings import MAX_SEED

    for b in rows:
        if b.settings.seed + seeds - 1 > MAX_SEED:
            raise BenchError(
                f"{b.name}: seed {b.settings.seed} with {seeds} seeds goes past the largest "
                f"seed, 2**64 - 1; use a seed of at most {MAX_SEED - seeds + 1}."
            )


@dataclass(frozen=True)
class ProtocolConfig:
    """What the protocol measures, and how much (a sweep passes one to every block; its
    `to_dict` is kept in the sweep's JSON). `compile_warmup`: None on GPU backends only, True
    always, False never (see run_protocol)."""

    tokens: int = 256
    seeds: int = 3
    invocations: int = 3
    warmup: int = 1
    traced: bool = True
    quality: bool = True
    predict: bool = True
    compile_warmup: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The knobs as set; a knob left to its backend's choice (None) is left out."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class ProtocolInputs:
    """What the caller plugs into a protocol run: where progress goes, how it is cancelled,
    how ids become text, a peer to time beside ours, the engine greedy rows are checked
    against (None: the same one), the machine's record (None: recorded here) and a
    checkable prompt's check of one output's ids with its description."""

    progress: Progress | None = None
    cancel: threading.Event | None = None
    decode: Callable[[list[int]], str] | None = None
    peer: Peer | None = None
    reference: Any | None = None
    environment: dict[str, Any] | None = None
    task: Callable[[list[int]], bool] | None = None
    task_name: str | None = None


_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(ProtocolConfig))
_INPUT_FIELDS = frozenset(f.name for f in dataclasses.fields(ProtocolInputs))


def run_protocol(
    engine: Any,
    prompt_ids: Sequence[int],
    settings_list: Sequence[SettingLike],
    config: ProtocolConfig | None = None,
    inputs: ProtocolInputs | None = None,
    **options: Any,
) -> BenchReport:
    """Run the seed's protocol on `engine` and return the report (no printing, no files).

    For each setting (a target-only baseline is added when none is given): `warmup` requests,
    then `invocations` x `seeds` timed untraced requests of exactly `tokens` tokens with EOS
    ignored (invocations outermost, then seeds, then settings, so a slow spell on a shared
    machine hits every setting),
    and, in the first invocation, a traced request right after each untraced one with the
    same seed: the pairs give the tracing overhead, the first the phase split. Seeds are
    settings.seed + 0..seeds-1, the same for every setting. Quality: target NLL of the first
    invocation's outputs against a target-only run with the same sampling parameters; greedy
    settings are checked token by token against target-only outputs of `reference` (default:
    the same engine). `peer` adds mlx-lm rows (and greedy rows of ours to compare them with,
    when none match); those rows of ours are timed request by request against mlx-lm's
    (ours, then the peer's, per seed), after the other rows, and each pair's ratio is kept.
    `task` (a checkable prompt's check of one output's token ids) marks each row's first
    invocation outputs passed or failed: task success beside NLL. `predict`: every
    speculative row also gets core.cost.prediction's speedup and its efficiency
    (core.bench.predicted), from the engine's calibration or one measured here first.
    Before all of it, on a GPU backend (always with `compile_warmup=True`, never with False),
    core.runtime.warmup runs every shape the rows and the calibration will use, so no calibration
    sample or timed request includes a kernel compile; its record is `environment["warmup"]`.
    Call on the engine's thread; `progress(done, total, label)` after every request.
    `options` name fields of either object (`tokens=4, progress=f`) on top of `config` and
    `inputs`, for a caller that sets a few (the tests, the app's `b`); an unknown one is a
    TypeError naming it.
    """
    config, inputs = _with_options(config, inputs, options)
    tokens, seeds, invocations = config.tokens, config.seeds, config.invocations
    warmup, traced, quality = config.warmup, config.traced, config.quality
    progress, cancel, decode = inputs.progress, inputs.cancel, inputs.decode
    peer, reference, environment = inputs.peer, inputs.reference, inputs.environment
    task, task_name = inputs.task, inputs.task_name
    if tokens < 1 or seeds < 1 or invocations < 1 or warmup < 0:
        raise BenchError("tokens, seeds and invocations must be at least 1 and warmup at least 0.")
    too_many = check_bounds({"seeds": seeds, "invocations": invocations, "warmup": warmup})
    if too_many:
        raise BenchError(too_many)
    if not prompt_ids:
        raise BenchError("The prompt is empty: there is nothing to benchmark.")
    rows = as_bench_settings(settings_list)
    if not rows:
        raise BenchError("There is no setting to benchmark.")
    check_seeds(rows, seeds)
    rows = _with_baseline(rows)
    if peer is not None:
        rows = with_peer_counterparts(rows, peer.k, peer.name)
    prepared = [
        BenchSetting(b.name, b.settings.replace(max_tokens=tokens, ignore_eos=True, traced=False))
        for b in rows
    ]
    seed_lists = {b.name: [b.settings.seed + j for j in range(seeds)] for b in prepared}
    results = {
        b.name: BenchResult(b.name, describe(b.settings), b.settings.to_dict()) for b in prepared
    }
    reference = engine if reference is None else reference
    plan = plan_references(prepared, reference is engine, quality)
    paired = paired_counterparts(prepared, peer) if peer is not None else {}
    paired_names = {b.name for b in paired.values()}
    calibrate_first = config.predict and needed_calibration(prepared) is not None

    total = len(prepared) * (warmup + invocations * seeds + (seeds if traced else 0))
    total += sum(seeds for _ in plan["nll"]) + sum(seeds for _ in plan["greedy"])
    if quality:
        total += len(prepared)
    if peer is not None:
        total += (2 if peer.draft is not None else 1) * (warmup + invocations * seeds)
    total += int(calibrate_first)
    done = 0

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, label)

    def check_cancel() -> None:
        if cancel is not None and cancel.is_set():
            raise BenchCancelled("The benchmark was cancelled before it finished.")

    # Kernels compiled before anything is timed, calibration included (seen, not silent).
    check_cancel()
    warmup_record = _compile_warmup(engine, prompt_ids, prepared, config.compile_warmup)

    # The calibration the predictions read, before any request: cost-aware rows price with it.
    curve, curve_from = None, None
    if calibrate_first:
        check_cancel()
        curve, curve_from = calibration_for(engine, prompt_ids, prepared)
        tick("calibrate verify cost")

    # Warm-up: every setting's shapes compiled and caches allocated before any timing.
    for b in prepared:
        for _ in range(warmup):
            check_cancel()
            run_request(engine, prompt_ids, b.settings.replace(seed=seed_lists[b.name][0]), cancel)
            tick(f"warm-up {b.name}")

    def timed(b: BenchSetting, seed: int, inv: int) -> float:
        check_cancel()
        req = run_request(engine, prompt_ids, b.settings.replace(seed=seed), cancel)
        record_timed(results[b.name], req, seed, keep_output=inv == 0, invocation=inv)
        tick(f"{b.name} invocation {inv + 1}/{invocations} seed {seed}")
        assert req.summary is not None
        return req.summary.e2e_s

    def traced_after(b: BenchSetting, seed: int, inv: int, e2e_s: float) -> None:
        if traced and inv == 0:
            check_cancel()
            s = b.settings.replace(seed=seed)
            record_traced(results[b.name], engine, prompt_ids, s, e2e_s, cancel)
            tick(f"traced {b.name} seed {seed}")

    # Timed: untraced, exactly N tokens, a fresh cache per request (rows paired with the
    # peer's requests are timed with them, below). Interleaved: each seed runs every row
    # before the next seed, so the rows' requests of one seed are paired in time too (a
    # host's slow spell hits all rows of a seed alike, not one row's seeds). Rotated: seed j
    # starts at row j, so no row always runs first or last in its seed (on the H200 the A/A
    # control, run last, read 0.91x of target-only, run first, over 7 benches at T = 0.7:
    # docs/benchmarks/archive/never-slower-runs.md, 2026-12-01).
    ours = [b for b in prepared if b.name not in paired_names]
    for inv in range(invocations):
        for j in range(seeds):
            for b in rotated(ours, j):
                seed = seed_lists[b.name][j]
                traced_after(b, seed, inv, timed(b, seed, inv))

    if peer is not None:
        rows_peer = run_peer(
            peer, prompt_ids, tokens, seeds, invocations, warmup, tick, check_cancel,
            paired=paired, ours=timed,
            after_pair=traced_after, seed_values=seed_lists,
        )
        for row in rows_peer:
            results[row.name] = row

    out = list(results.values())
    baseline = next(r for r in out if r.settings.get("mode") == "target-only")
    if quality:
        assess_quality(engine, reference, prompt_ids, prepared, results, seed_lists, plan, tick,
                       check_cancel, cancel)
        if peer is not None:
            peer_quality(engine, prompt_ids, results, prepared)
    base_med = baseline.median_e2e_s
    for r in out:
        med = r.median_e2e_s
        r.speedup_vs_target = base_med / med if base_med and med else None
        if decode is not None and r.outputs:
            _decode_texts(r, decode)
        if task is not None:
            r.task_passed = [bool(task(list(ids))) for ids in r.outputs.values()]
    link_peers(out)
    models = stamp_models(out, getattr(engine, "models", None))
    if curve is not None:
        attach_predictions(out, baseline, curve, engine)

    if environment is None:
        from core.profile import record_environment

        environment = record_environment()  # the same record profiles keep
    # Whether this machine compiled kernels first (a copy: the caller's record is shared).
    environment = {**environment, "warmup": warmup_record}
    protocol = {
        "tokens": tokens,
        "seeds": seeds,
        "invocations": invocations,
        "warmup": warmup,
        "traced": traced,
        "ignore_eos": True,
        "order": ("invocations outermost, then seeds, then settings, seed j's settings "
                  "rotated to start at the j-th; warm-up before all"),
        "seed_values": seed_lists[baseline.name],
        "prompt_tokens": len(prompt_ids),
        "baseline": baseline.name,
        "nll_basis": NLL_BASIS,
        "greedy_reference": "same engine" if reference is engine else "another engine",
        "peer": peer.name if peer is not None else None,
        "peer_order": (
            f"after the other rows: per invocation and seed, a request of ours then {peer.name}'s "
            "(ABAB...), each pair's ratio kept"
        )
        if peer is not None
        else None,
        "calibration": _calibration_summary(curve, curve_from),
        # the curve the rows ran with (the dense copy and CUDA's attention are chosen by it
        # per R), so a row that dispatched to "dense" says which times chose it
        "engine_curve": _calibration_summary(getattr(engine, "cost_curve", None),
                                             "the engine's: its rows dispatched and priced by it"),
        "task_check": task_name if task is not None else None,
    }
    if models is not None:
        protocol["models"] = models_protocol(models)
    return BenchReport(environment=environment, protocol=protocol, results=out)


def rotated(rows: Sequence[Any], j: int) -> list[Any]:
    """The rows in seed j's order: the same cycle, started at row j mod len(rows)."""
    if not rows:
        return []
    i = j % len(rows)
    return [*rows[i:], *rows[:i]]


def _with_options(
    config: ProtocolConfig | None, inputs: ProtocolInputs | None, options: dict[str, Any]
) -> tuple[ProtocolConfig, ProtocolInputs]:
    """`config` and `inputs` (defaults where None) with the keyword options on top."""
    unknown = sorted(set(options) - _CONFIG_FIELDS - _INPUT_FIELDS)
    if unknown:
        raise TypeError(f"run_protocol got unknown option(s): {', '.join(unknown)}.")
    config = dataclasses.replace(config or ProtocolConfig(),
                                 **{k: v for k, v in options.items() if k in _CONFIG_FIELDS})
    inputs = dataclasses.replace(inputs or ProtocolInputs(),
                                 **{k: v for k, v in options.items() if k in _INPUT_FIELDS})
    return config, inputs


def _compile_warmup(engine: Any, prompt_ids: Sequence[int], rows: list[BenchSetting],
                    force: bool | None) -> dict[str, Any]:
    """core.runtime.warmup over every row's shapes and the calibration's (rows and modes), at the
    prompt's length; the record the report keeps."""
    from core.runtime.warmup import WarmupRecord, verify_rows, warm_up_engine

    if force is False:
        return WarmupRecord(False, reason="turned off").to_dict()
    settings = [b.settings for b in rows]
    need = needed_calibration(rows)
    extra = need["rows"] if need is not None else 0
    modes = need["modes"] if need is not None else ("auto",)
    record = warm_up_engine(
        engine, settings, prompt_tokens=len(prompt_ids), rows=verify_rows(settings, extra),
        modes=modes, force=bool(force),
    )
    return record.to_dict()


def _calibration_summary(curve: Any, source: str | None) -> dict[str, Any] | None:
    """Where the predictions' curve came from and what it measured: seconds per verification
    of R rows per mode, and the draft step."""
    if curve is None:
        return None
    return {
        "from": source,
        "context": curve.context_len,
        "modes": list(curve.modes),
        "rows": max(curve.rows) if curve.rows else None,
        "repeats": curve.repeats,
        "draft_step_s": curve.draft_step_s,
        "draft_step_sampled_s": getattr(curve, "draft_step_sampled_s", None),
        "accept_s": {m: {str(r): t for r, t in sorted(tab.items())}
                     for m, tab in (getattr(curve, "accept_s", None) or {}).items()},
        "t_verify_s": {
            m: {str(r): t for r, t in sorted(tab.items())} for m, tab in curve.times.items()
        },
    }


def _decode_texts(r: BenchResult, decode: Callable[[list[int]], str]) -> None:
    """The row's first output, every timed text token by token, and its divergence tokens as
    text, for the side-by-side page (after the timing: decoding is not timed)."""
    r.sample_text = decode(next(iter(r.outputs.values())))
    r.texts.decode(decode)
    d = r.divergence
    if d is not None:
        r.divergence = Divergence(
            d.seed, d.position, d.target_only_token, d.speculative_token, d.logit_margin,
            decode([d.target_only_token]) if d.target_only_token >= 0 else "",
            decode([d.speculative_token]) if d.speculative_token >= 0 else "",
        )


def _with_baseline(rows: list[BenchSetting]) -> list[BenchSetting]:
    """The target-only baseline, first, derived from the first setting when none was given."""
    if any(b.settings.mode == "target-only" for b in rows):
        return rows
    base = rows[0].settings.replace(mode="target-only")
    name = "target-only"
    names = {b.name for b in rows}
    while name in names:
        name += "-baseline"
    return [BenchSetting(name, base), *rows]
