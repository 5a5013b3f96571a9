"""A scripted engine session for UI tests: fixed rounds and numbers, no MLX.

The app itself always runs the real engine (tui.session.MLXSession); tests inject this
through the bridge's session factory so that panels, keys and snapshots see known numbers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from core.events import CommittedToken, PhaseTimings, RoundEvent, RunSummary
from core.identity import ModelIdentity
from core.primitives.acceptance import PositionTally
from core.settings import Settings
from tui.app import SpecDecApp
from tui.engine_info import CurveInfo, PairInfo, ShapeKernel
from tui.widgets.composer import Composer

EOS = 0
WORDS = (
    "<eos>", " The", " lunar", " greenhouse", " glowed", " under", " a", " thin", " dome",
    ",", " and", " Mira", " checked", " the", " tomato", " vines", " while", " Oren",
    " read", " the", " sensors", ".", " Earth", " hung", " blue", " above", " them",
)
# Accepted drafts per round, cycled: a mix of partial, full and no acceptance.
ACCEPT_PATTERN = (2, 4, 0, 3, 4, 1, 2, 4)
# draft_source lookup / hybrid: rounds i % 4 in (0, 1) find a repeat to copy; these are the
# copies the target keeps there (the other rounds: a target step, or the model under hybrid).
LOOKUP_ACCEPT = (4, 3, 0, 0, 1, 4, 0, 0)


FAKE_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fake_models(target: str, draft: str | None) -> dict[str, ModelIdentity | None]:
    """Identities as a real session names them (core/models/identify.py), made up per spec:
    a SmolLM2-like target whose sha256 follows its spec, and a 4-bit self-draft of it."""
    sha = hashlib.sha256(target.encode()).hexdigest()
    kind = "default" if target == "default" else "gguf"
    t = ModelIdentity(target, kind, "SmolLM2-135M (fake)", "llama", 134_515_008, 30, 4, 32,
                      (("4", 210), ("8", 1)), sha)
    d = None
    if draft:
        d = ModelIdentity(draft, "self", "self:bits=3 (fake)", "llama", 134_515_008, 30, 4, 32,
                          (("4", 211),), sha, base=target)
    return {"target": t, "draft": d}


@dataclass
class Script:
    """What the fake engine does: how many rounds, how fast, and whether it fails."""

    rounds: int = 8
    delay_s: float = 0.0
    fail_after: int | None = None  # raise after this many rounds
    fail_load: bool = False
    # Set: loading (calibrating) holds until the test sets it, so a state that lasts as long as
    # the load (the calibration) is seen on a machine of any speed, instead of racing a delay.
    load_gate: threading.Event | None = None
    fallback_reason: str | None = None  # the summary says speculation fell back
    random_weights: bool = False
    speculation_ok: bool = True
    backend: str = "metal"  # "cpu": the app says speculation cannot pay there
    needs_curve: bool = False  # the engine would calibrate before its first cost-aware run
    calibrate_gate: threading.Event | None = None  # holds calibration after its first step
    prefill_gate: threading.Event | None = None  # holds a run before its first round
    prefill_ignores_cancel: bool = False  # the gate holds through a cancel: a chunk under way
    bench_gate: threading.Event | None = None  # holds the bench after its second request
    seen: list[Settings] = field(default_factory=list)  # settings read per round
    calls: list[str] = field(default_factory=list)
    prompts: list[list[dict[str, str]]] = field(default_factory=list)
    cancels: list[threading.Event] = field(default_factory=list)  # each generate's cancel
    loads: list[tuple[str, str | None]] = field(default_factory=list)  # every pair loaded


GATE_S = 120.0  # a gate the test never opens fails the test instead of hanging the suite


def hold(gate: threading.Event | None, cancel: threading.Event | None = None) -> None:
    """Wait on the engine thread until the test opens `gate` (None: go on at once), or, with
    `cancel`, until it is set (the engine's prefill stops between its chunks)."""
    if gate is None:
        return
    deadline = time.monotonic() + GATE_S
    while not gate.wait(0.01):
        if cancel is not None and cancel.is_set():
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the test never opened the scripted engine's gate")


class FakeSession:
    """Implements the EngineSession protocol with deterministic rounds."""

    context_window: int | None = None  # a test that trims a chat sets one

    def __init__(self, script: Script, target: str, draft: str | None) -> None:
        hold(script.load_gate)
        script.loads.append((target, draft))
        if script.fail_load:
            raise FileNotFoundError(f"no model at {target}")
        self.script = script
        self.thread = threading.current_thread().name
        kernels = {
            r: (ShapeKernel("q_proj", "576x576 4b", "qmv" if r < 8 else "qmm", 30),
                ShapeKernel("up_proj", "576x1536 4b", "qmv" if r < 8 else "qmm", 30))
            for r in range(1, 18)
        }
        self.info = PairInfo(
            target_spec=target, draft_spec=draft,
            target_name="SmolLM2-135M (fake)", draft_name="self:bits=3 (fake)",
            backend=script.backend, device="scripted", random_weights=script.random_weights,
            speculation_ok=script.speculation_ok,
            speculation_reason=None if script.speculation_ok else "a cache cannot be rewound",
            eos_ids=frozenset({EOS}), kernels=kernels,
            families={r: "qmv" if r < 8 else "qmm" for r in range(1, 18)},
            predicted_boundary=8,
            environment={"backend": script.backend, "device_name": "scripted",
                         "specdec_tui": "0.1.0", "specdec_tui_commit": FAKE_COMMIT,
                         "specdec_tui_dirty": False},
            models=fake_models(target, draft),
        )

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        self.script.prompts.append([dict(m) for m in messages])
        return [1 + (len(m["content"]) % 20) for m in messages]

    def message_spans(self, messages: list[dict[str, str]]) -> list[tuple[int, int]]:
        return [(i, i + 1) for i in range(len(messages))]  # one prompt id per message

    def cached_tokens(self, prompt_ids: list[int], settings: Settings) -> int:
        """As the engine's cache: the previous turn's prompt, as far as this one repeats it."""
        if len(self.script.prompts) < 2:
            return 0
        before = [1 + (len(m["content"]) % 20) for m in self.script.prompts[-2]]
        n = min(len(before), len(prompt_ids) - 1)
        return next((i for i in range(n) if before[i] != prompt_ids[i]), n)

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(WORDS[i % len(WORDS)] for i in ids)

    def _lookup_round(self, i: int, s: Settings, next_id: Callable[[], int], t: PhaseTimings,
                      n_prompt: int) -> RoundEvent | None:
        """A round of a lookup-drafting source: a copy, a target step, or None (the model's)."""
        if s.draft_source not in ("lookup", "hybrid"):
            return None
        if i % 4 >= 2:
            if s.draft_source == "hybrid":
                return None
            step = 0.030 + 0.002 * (i % 3)
            t = PhaseTimings(verify=step, sample=0.002, other=0.001, total=step + 0.003)
            return RoundEvent(i, (CommittedToken(next_id(), "target"),), rows=1, timings=t,
                              kernel="qmv", context=n_prompt + i, traced=True)
        k = s.k
        acc = min(LOOKUP_ACCEPT[i % len(LOOKUP_ACCEPT)], k)
        toks = [CommittedToken(next_id(), "copied") for _ in range(acc)]
        rejected = tuple(next_id() for _ in range(k - acc))
        toks.append(CommittedToken(next_id(), "corrected" if acc < k else "bonus"))
        # even rounds copy from the last user message, odd ones from this answer's 2nd token
        copied_from = n_prompt - 1 if i % 2 == 0 else n_prompt + 1
        t = dataclasses.replace(t, draft=0.0001, total=t.total - t.draft + 0.0001)
        return RoundEvent(i, tuple(toks), rejected=rejected, proposed=k, accepted=acc,
                          rows=k + 1, timings=t, kernel="qmv" if k + 1 < 8 else "qmm",
                          context=n_prompt + i, traced=True, source="lookup",
                          copied_from=copied_from)

    def _round(self, i: int, s: Settings, next_id: Callable[[], int],
               n_prompt: int = 1) -> RoundEvent:
        t = PhaseTimings(draft=0.012, verify=0.030 + 0.002 * (i % 3), sample=0.004,
                         cache=0.002, other=0.001)
        t = PhaseTimings(t.draft, t.verify, t.sample, t.cache, t.other,
                         total=t.draft + t.verify + t.sample + t.cache + t.other)
        if s.mode != "speculative":
            origin = "target" if s.mode == "target-only" else "draft"
            step = 0.009 if s.mode == "draft-only" else 0.030 + 0.002 * (i % 3)
            t = PhaseTimings(draft=step if s.mode == "draft-only" else 0.0,
                             verify=0.0 if s.mode == "draft-only" else step,
                             sample=0.002, cache=0.0, other=0.001, total=step + 0.003)
            return RoundEvent(i, (CommittedToken(next_id(), origin),), rows=1, timings=t,
                              kernel="qmv", context=10 + i, traced=True)
        looked_up = self._lookup_round(i, s, next_id, t, n_prompt)
        if looked_up is not None:
            return looked_up
        k = s.k
        acc = min(ACCEPT_PATTERN[i % len(ACCEPT_PATTERN)], k)
        toks = [CommittedToken(next_id(), "accepted") for _ in range(acc)]
        rejected: tuple[int, ...] = ()
        if acc < k:
            rejected = tuple(next_id() for _ in range(k - acc))
            toks.append(CommittedToken(next_id(), "corrected"))
        else:
            toks.append(CommittedToken(next_id(), "bonus"))
        return RoundEvent(i, tuple(toks), rejected=rejected, proposed=k, accepted=acc,
                          rows=k + 1, timings=t, kernel="qmv" if k + 1 < 8 else "qmm",
                          tv=0.05 * (i % 4), context=10 + i, traced=True, source="model")

    def generate(
        self,
        prompt_ids: list[int],
        settings: Settings,
        cancel: threading.Event,
        settings_source: Callable[[], Settings],
    ) -> Iterator[RoundEvent | RunSummary]:
        self.script.calls.append("generate")
        self.script.cancels.append(cancel)
        counter = iter(range(1, 10_000))

        def next_id() -> int:
            return 1 + (next(counter) % (len(WORDS) - 1))

        events: list[RoundEvent] = []
        stop = "length"
        # the prefill, as long as the test wants (or until a cancel, between its chunks)
        hold(self.script.prefill_gate, None if self.script.prefill_ignores_cancel else cancel)
        for i in range(self.script.rounds):
            if cancel.is_set():
                stop = "cancelled"
                break
            if self.script.fail_after is not None and i == self.script.fail_after:
                raise RuntimeError("scripted engine failure")
            s = settings_source()
            if (taken := getattr(settings_source, "taken", None)) is not None:
                taken(s)  # as the engine: the settings this round runs with
            self.script.seen.append(s)
            ev = self._round(i, s, next_id, len(prompt_ids))
            events.append(ev)
            if self.script.delay_s:
                cancel.wait(self.script.delay_s)  # a cancel ends the wait, as a round would
            yield ev
        summary = summarize(events, settings_source(), stop, len(prompt_ids))
        models = self.info.models
        if summary.mode == "target-only":  # as the engine: a target-only run ran no draft
            models = {**models, "draft": None}
        yield dataclasses.replace(summary, fallback_reason=self.script.fallback_reason,
                                  models=models)

    def needs_curve(self, settings: Settings) -> bool:
        return self.script.needs_curve and settings.policy == "cost-aware"

    def kept_curve(self, settings: Settings) -> tuple[CurveInfo | None, tuple[str, ...]]:
        return None, ()  # nothing kept: a turn that needs a curve calibrates first

    def warm_idle_next(self, settings: Settings) -> Any:
        return None  # nothing to warm: the scripted engine compiles nothing

    def warm_idle(self, settings: Settings) -> Any:
        return None

    def calibrate(self, settings: Settings, progress, cancel=None) -> CurveInfo:  # noqa: ANN001
        self.script.calls.append("calibrate")
        for r in range(1, 10):
            if cancel is not None and cancel.is_set():  # as core.dispatch.calibrate: per forward
                from core.dispatch.curve import CalibrationCancelled

                raise CalibrationCancelled("The calibration was cancelled.")
            progress(r / 9, f"auto: {r} rows")
            if r == 1:
                hold(self.script.calibrate_gate)
        t = {r: 0.09 * r if r < 8 else 0.09 * 8 for r in range(1, 10)}
        return CurveInfo(t_verify=t, draft_step_s=0.085, boundary=8, predicted_boundary=8,
                         kernels={r: "qmv" if r < 8 else "qmm_sm80" for r in range(1, 10)})

    def bench(self, prompt_ids, settings, progress, cancel):  # noqa: ANN001 - protocol shape
        self.script.calls.append("bench")
        for i in range(4):
            if cancel.is_set():
                return None
            progress(i / 4, f"request {i + 1}/4")
            if i == 1:
                hold(self.script.bench_gate)
            cancel.wait(self.script.delay_s)  # a cancel ends the wait: checked above
        rows = [
            SimpleNamespace(name="Target-only", acceptance=None, median_e2e_s=2.0,
                            speedup_vs_target=1.0, mean_tv=None),
            SimpleNamespace(name="Fixed-4, TV=0", acceptance=0.62, median_e2e_s=1.6,
                            speedup_vs_target=1.25, mean_tv=0.0, predicted_speedup=1.5,
                            efficiency=0.9),
        ]
        return SimpleNamespace(results=rows)


def summarize(events: list[RoundEvent], s: Settings, stop: str, prompt: int) -> RunSummary:
    """A RunSummary with the numbers a real engine would compute from these rounds."""
    proposed = sum(e.proposed for e in events)
    accepted = sum(e.accepted for e in events)
    tokens = sum(len(e.tokens) for e in events)
    spec = [e for e in events if e.proposed]
    phase = {p: sum(getattr(e.timings, p) for e in events)
             for p in ("draft", "verify", "sample", "cache", "other")}
    e2e = sum(e.timings.total for e in events) + 0.25
    tvs = [e.tv for e in events if e.tv is not None]
    tallies: dict[str, PositionTally] = {}
    for e in events:
        if e.source:
            tallies.setdefault(e.source, PositionTally()).observe(e.proposed, e.accepted)
    per_source: dict[str, dict] = {
        name: {"rounds": t.rounds, "proposed": t.proposed, "accepted": t.accepted,
               "acceptance": t.acceptance, "mean_accepted_length": t.mean_accepted_length,
               "per_position_acceptance": list(t.reached_rates())}
        for name, t in tallies.items()
    }
    steps = sum(1 for e in events if not e.source) if s.mode == "speculative" else 0
    if per_source or steps:
        per_source["none"] = {"rounds": steps}
    return RunSummary(
        mode=s.mode, tokens=tokens, rounds=len(events), prompt_tokens=prompt,
        prefill_tokens=prompt, proposed=proposed, accepted=accepted,
        acceptance=accepted / proposed if proposed else None,
        per_position_acceptance=(), mean_accepted_length=accepted / len(spec) if spec else None,
        e2e_s=e2e, ttft_s=0.25, decode_tok_s=tokens / (e2e - 0.25) if tokens else 0.0,
        phase_s=phase, mean_tv=sum(tvs) / len(tvs) if tvs else None, traced=True,
        stop_reason=stop, token_ids=tuple(t.id for e in events for t in e.tokens),
        per_source=per_source,
    )


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 30.0) -> None:  # noqa: ANN001
    """Let the app process messages until `condition` holds (the engine runs on a thread).

    The timeout only bounds a failure: a loaded 2-core CI machine takes seconds to start an app.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.02)
    await pilot.pause()


async def ready(pilot) -> SpecDecApp:  # noqa: ANN001
    app = pilot.app
    await wait_for(pilot, lambda: app.info is not None)
    return app


async def chat(pilot, text: str = "Write a scene.") -> SpecDecApp:  # noqa: ANN001
    """Type a message, send it, and wait until the run finished.

    Until this turn's run is in `app.runs_state.runs`: on a loaded machine the enter key may still be
    queued when `press` returns, and the previous turn's run must not pass for this one."""
    app = await ready(pilot)
    before = app.runs_state.runs[-1] if app.runs_state.runs else None
    app.query_one("#prompt").value = text
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.run_id is None and bool(app.runs_state.runs)
                   and app.runs_state.runs[-1] is not before)
    return app


async def blur_input(pilot) -> None:  # noqa: ANN001
    """Esc outside a run leaves the input box, so single keys act."""
    await pilot.press("escape")
    assert not pilot.app.query_one("#prompt", Composer).has_focus


# A pasted 40-line function and the request typed after it (the paste tests and a snapshot).
FUNCTION = "\n".join(
    ["def summarize(xs):", '    """Count, mean, min and max of xs."""', "    total = 0",
     "    count = 0", "    for x in xs:"]
    + [f"        total += x * {i}  # step {i}" for i in range(34)]
    + ["    return count, total / max(count, 1), min(xs), max(xs)"]
)


REQUEST = "Rename xs to values; return only the code."


def scripted_app(script: Script, profiles: Path, settings: Settings | None = None,
                 **kw: object) -> SpecDecApp:
    """An app on the scripted engine, saving profiles into `profiles` (tests/tui/conftest.py's
    make_app, and the module-wide app of tests/tui/test_keys.py)."""
    from core.profile import ProfileStore

    def factory(target: str, draft: str | None) -> FakeSession:
        return FakeSession(script, target, draft)

    # No shipped presets: the picker and the snapshots see only this test's profiles.
    store = ProfileStore(profiles, presets=None)
    app = SpecDecApp(settings or Settings(), factory, profiles_dir=profiles,
                     profile_store=store, **kw)
    # "From Enter" on a clock that stands still: the queue's real milliseconds would
    # move a message's TTFT in every snapshot (a test that times a wait sets its own).
    app.bridge.clock = lambda: 0.0
    return app
