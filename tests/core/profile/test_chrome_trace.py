"""Chrome trace export (issue 16): the format's rules, the layout of rounds and phases, and the
same file from `bench --trace` and `profiles export --trace`.

No reader of Chrome JSON traces installs from PyPI and works offline: the `perfetto` package's
trace processor downloads its binary at run time, and the other packages write traces (or read
PyTorch-profiler traces only). So `check_trace` below checks the format's rules itself: what
ui.perfetto.dev's and chrome://tracing's JSON importers require of each event type, and what
makes them drop or misplace slices (partial overlaps on a track, time going backwards).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from core.events import ORIGINS, PHASES, CommittedToken, PhaseTimings, RoundEvent, RunSummary
from core.profile import (
    Profile,
    ProfileStore,
    RecordedRun,
    TracedRequest,
    TraceError,
    chrome_trace,
    profile_request,
    trace_json,
    write_trace,
)
from core.profile.chrome_trace import DRAFT_TID, HOST_TID, PHASE_TRACK, TARGET_TID
from core.settings import Settings

PHASE_TYPES = {"B", "E", "X", "i", "I", "C", "b", "e", "n", "s", "t", "f", "M", "P", "N", "O", "D"}
METADATA = {
    "process_name": "name",
    "process_labels": "labels",
    "process_sort_index": "sort_index",
    "thread_name": "name",
    "thread_sort_index": "sort_index",
}


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def check_trace(doc: Any) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Assert the Chrome trace event format's rules; returns the non-metadata events by track."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    named_processes, named_threads = set(), set()
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        for key in ("name", "ph", "ts", "pid", "tid"):
            assert key in e, f"{key} missing in {e}"
        assert isinstance(e["name"], str) and e["name"]
        assert e["ph"] in PHASE_TYPES
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["ts"], int | float) and math.isfinite(e["ts"]) and e["ts"] >= 0
        if "args" in e:
            assert isinstance(e["args"], dict)
        if e["ph"] == "M":
            assert e["name"] in METADATA, e
            assert METADATA[e["name"]] in e["args"], e
            if e["name"] == "process_name":
                named_processes.add(e["pid"])
            elif e["name"] == "thread_name":
                named_threads.add((e["pid"], e["tid"]))
            continue
        if e["ph"] == "X":
            assert isinstance(e["dur"], int | float) and e["dur"] >= 0, e
        if e["ph"] == "i":
            assert e.get("s", "t") in ("g", "p", "t")
        tracks[(e["pid"], e["tid"])].append(e)
    for (pid, tid), events in tracks.items():
        assert pid in named_processes, f"process {pid} has no process_name"
        assert (pid, tid) in named_threads, f"track {pid}/{tid} has no thread_name"
        stamps = [e["ts"] for e in events]
        assert stamps == sorted(stamps), f"time goes backwards on track {pid}/{tid}"
        open_ends: list[float] = []  # ends of the slices enclosing the current one
        for e in (e for e in events if e["ph"] == "X"):
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            end = e["ts"] + e["dur"]
            assert not open_ends or end <= open_ends[-1], (
                f"{e['name']} at {e['ts']} overlaps its enclosing slice on track {pid}/{tid}"
            )
            open_ends.append(end)
    return tracks


# --------------------------------------------------------------------------- a hand-made run


def spec_round(index: int, accepted: int, k: int = 4, *, traced: bool = True,
               source: str = "model") -> RoundEvent:
    toks = [CommittedToken(10 + j, "accepted") for j in range(accepted)]
    toks.append(CommittedToken(99, "bonus" if accepted == k else "corrected"))
    phases = {"draft": 0.0121, "verify": 0.0302, "sample": 0.0041, "cache": 0.0017,
              "other": 0.0003}
    total = sum(phases.values()) + 0.00001  # a little the timer charged to no phase
    timings = PhaseTimings(**phases, total=total) if traced else PhaseTimings(total=total)
    return RoundEvent(index, tuple(toks), rejected=tuple(range(k - accepted)), proposed=k,
                      accepted=accepted, rows=k + 1, timings=timings, kernel="qmv",
                      tv=0.1, context=20 + index, traced=traced, source=source,
                      copied_from=3 if source == "lookup" else None)


def summary_for(rounds: list[RoundEvent], ttft: float, e2e: float,
                mode: str = "speculative") -> RunSummary:
    proposed = sum(r.proposed for r in rounds)
    accepted = sum(r.accepted for r in rounds)
    return RunSummary(
        mode=mode, tokens=sum(len(r.tokens) for r in rounds), rounds=len(rounds),
        prompt_tokens=12, prefill_tokens=11, proposed=proposed, accepted=accepted,
        acceptance=accepted / proposed if proposed else None, per_position_acceptance=(),
        mean_accepted_length=None, e2e_s=e2e, ttft_s=ttft, decode_tok_s=50.0,
        phase_s={p: sum(getattr(r.timings, p) for r in rounds) for p in PHASES}, mean_tv=0.1,
        traced=True, stop_reason="length",
    )


@pytest.fixture
def request_() -> TracedRequest:
    rounds = [spec_round(0, 2), spec_round(1, 4, source="lookup"), spec_round(2, 0),
              spec_round(3, 1, traced=False)]
    ttft = 0.080 + rounds[0].timings.total  # 80 ms of prefill, then the first round
    return TracedRequest("fixed-4", rounds, summary_for(rounds, ttft, e2e=0.5))


def test_the_trace_follows_the_format_and_is_strict_json(request_: TracedRequest) -> None:
    text = trace_json([request_, TracedRequest("again", request_.rounds, request_.summary)])
    doc = _strict_json(text)
    tracks = check_trace(doc)
    assert doc == chrome_trace([request_, TracedRequest("again", request_.rounds,
                                                        request_.summary)])
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["name"] == "process_name"}
    assert names == {1: "fixed-4", 2: "again"}  # one process per request
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
               if e["name"] == "thread_name"}
    assert threads == {(p, t): n for p in (1, 2)
                       for t, n in ((1, "host"), (2, "draft"), (3, "target"))}
    assert {pid for pid, _ in tracks} == {1, 2}


def test_rounds_nest_their_phases_back_to_back_in_order(request_: TracedRequest) -> None:
    doc = chrome_trace([request_])
    events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    rounds = sorted((e for e in events if e["cat"] == "round"), key=lambda e: e["ts"])
    phases = [e for e in events if e["cat"] == "phase"]
    assert [e["args"]["index"] for e in rounds] == [0, 1, 2, 3]
    assert all(e["tid"] == HOST_TID for e in rounds)
    for prev, nxt in zip(rounds, rounds[1:], strict=False):
        assert prev["ts"] + prev["dur"] == nxt["ts"]  # rounds follow each other
    for ev, r in zip(request_.rounds, rounds, strict=True):
        args = r["args"]
        assert (args["k"], args["accepted"], args["rows"], args["kernel"], args["source"]) == (
            ev.proposed, ev.accepted, ev.rows, ev.kernel, ev.source)
        assert args["token_origins"] == [t.origin for t in ev.tokens]
        assert set(args["origins"]) <= set(ORIGINS)
        assert sum(args["origins"].values()) == len(ev.tokens)
        mine = sorted((p for p in phases if p["args"]["round"] == ev.index), key=lambda e: e["ts"])
        if not ev.traced:
            assert mine == [] and args["phase_ms"] is None  # only the total is known
            assert r["dur"] == round(ev.timings.total * 1e6)
            continue
        assert [p["name"] for p in mine] == [p for p in PHASES if getattr(ev.timings, p) > 0]
        assert mine[0]["ts"] == r["ts"]
        for a, b in zip(mine, mine[1:], strict=False):
            assert a["ts"] + a["dur"] == b["ts"]  # back to back
        for p in mine:
            assert p["tid"] == PHASE_TRACK[p["name"]]
            assert abs(p["dur"] - getattr(ev.timings, p["name"]) * 1e6) <= 1  # the engine's µs
            assert r["ts"] <= p["ts"] and p["ts"] + p["dur"] <= r["ts"] + r["dur"]
        verify = next(p for p in mine if p["name"] == "verify")
        assert verify["tid"] == TARGET_TID
        assert (verify["args"]["rows"], verify["args"]["kernel"]) == (ev.rows, ev.kernel)
        draft = next(p for p in mine if p["name"] == "draft")
        assert draft["tid"] == DRAFT_TID and draft["args"]["k"] == ev.proposed
    lookup = rounds[1]["args"]
    assert (lookup["source"], lookup["copied_from"]) == ("lookup", 3)


def test_prefill_request_and_first_token_are_marked(request_: TracedRequest) -> None:
    doc = chrome_trace([request_])
    events = {e["name"]: e for e in doc["traceEvents"] if e["ph"] != "M"}
    prefill, first, req = events["prefill"], events["first token"], events["request"]
    assert prefill["tid"] == TARGET_TID and prefill["ts"] == 0 and prefill["dur"] == 80_000
    assert events["round 0"]["ts"] == prefill["dur"]
    assert first["ph"] == "i" and first["ts"] == round(request_.summary.ttft_s * 1e6)
    assert first["args"]["ttft_ms"] == pytest.approx(request_.summary.ttft_s * 1e3)
    assert req["tid"] == HOST_TID and req["ts"] == 0 and req["dur"] == 500_000  # E2E
    assert req["args"]["tokens"] == request_.summary.tokens


def test_a_draft_only_run_prefills_the_draft() -> None:
    rounds = [RoundEvent(i, (CommittedToken(i, "draft"),), rows=1, context=i,
                         timings=PhaseTimings(draft=0.009, total=0.009), traced=True)
              for i in range(3)]
    doc = chrome_trace([TracedRequest("d", rounds, summary_for(rounds, 0.05, 0.1, "draft-only"))])
    check_trace(doc)
    prefill = next(e for e in doc["traceEvents"] if e["name"] == "prefill")
    assert prefill["tid"] == DRAFT_TID


def test_a_sharded_request_names_its_verification_compute_and_its_comm_priced(
    request_: TracedRequest,
) -> None:
    """With comm in its rounds (a sharded target) the slices say what they hold, as the
    Rounds panel and the bench do: verification less the collectives, and their price."""
    rounds = [dataclasses.replace(ev, timings=dataclasses.replace(ev.timings, comm=0.004))
              if ev.traced else ev for ev in request_.rounds]
    doc = chrome_trace([TracedRequest("tp2", rounds, request_.summary)])
    check_trace(doc)
    names = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "phase"]
    assert "verify" not in names and "comm" not in names
    comm = [e for e in doc["traceEvents"] if e["name"] == "comm (priced)"]
    assert len(comm) == 3 and all(e["tid"] == TARGET_TID for e in comm)
    assert all("charged what a probe of its size measured" in e["args"]["priced"] for e in comm)
    assert sum(e["name"] == "verify (compute)" for e in doc["traceEvents"]) == 3
    plain = chrome_trace([request_])  # one process: the phases keep their names
    assert "verify" in {e["name"] for e in plain["traceEvents"]}


seconds = st.floats(min_value=0.0, max_value=0.05, allow_nan=False, allow_infinity=False)


@st.composite
def any_round(draw: Any, index: int = 0) -> RoundEvent:
    phases = {p: draw(seconds | st.sampled_from([0.0, 1e-7, 4.9e-7, 5e-7])) for p in PHASES}
    # The timer's total is about the phases' sum, a little over or (float error) under.
    total = max(sum(phases.values()) + draw(st.floats(-1e-9, 1e-3)), 0.0)
    traced = draw(st.booleans())
    timings = PhaseTimings(**phases, total=total) if traced else PhaseTimings(total=total)
    n = draw(st.integers(0, 5))
    return RoundEvent(index, tuple(CommittedToken(i, draw(st.sampled_from(ORIGINS)))
                                   for i in range(n)),
                      proposed=draw(st.integers(0, 8)), rows=draw(st.integers(1, 9)),
                      timings=timings, traced=traced)


@given(rounds=st.lists(any_round(), max_size=12), ttft=seconds, e2e=seconds)
@hsettings(max_examples=150, deadline=None)
def test_any_run_gives_a_well_formed_trace(rounds: list[RoundEvent], ttft: float,
                                           e2e: float) -> None:
    rounds = [RoundEvent(**{**r.__dict__, "index": i}) for i, r in enumerate(rounds)]
    doc = _strict_json(trace_json([TracedRequest("r", rounds, summary_for(rounds, ttft, e2e))]))
    tracks = check_trace(doc)
    host = tracks[(1, HOST_TID)]
    request = next(e for e in host if e["name"] == "request")
    for e in host:  # every round and host phase lies inside the request
        if e["ph"] == "X":
            assert e["ts"] + e["dur"] <= request["ts"] + request["dur"]
    assert sum(1 for e in host if e.get("cat") == "round") == len(rounds)


# --------------------------------------------------------------------------- writing and the CLIs


def test_write_trace_is_atomic_and_errors_are_one_sentence(request_: TracedRequest,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    assert write_trace(path, [request_]) == 1
    assert path.read_text() == trace_json([request_])
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temp file left
    missing = tmp_path / "missing" / "t.json"
    with pytest.raises(TraceError) as info:
        write_trace(missing, [request_])
    assert str(info.value) == (
        f"Could not write the trace {missing}: no such file or directory; nothing was changed."
    )
    with pytest.raises(TraceError, match="is a folder; give a file name"):
        write_trace(tmp_path, [request_])
    with pytest.raises(TraceError, match="no traced request"):
        write_trace(path, [])


@pytest.fixture
def cli(tmp_path: Path):
    from core.cli import main

    store = ProfileStore(tmp_path / "profiles", presets=None)

    def run(*argv: str) -> int:
        return main(["--profiles-dir", str(store.directory), "profiles", *argv])

    run.store = store  # type: ignore[attr-defined]
    return run


def test_profiles_export_trace_and_its_errors(cli, capsys, request_: TracedRequest,
                                              tmp_path: Path) -> None:
    run = RecordedRun({"backend": "cpu"}, tuple(request_.rounds), request_.summary)
    cli.store.save(Profile("fixed-4", Settings(k=4), "", run))
    cli.store.save(Profile("no-run", Settings()))
    out = tmp_path / "trace.json"
    assert cli("export", "fixed-4", "--trace", str(out)) == 0
    assert "ui.perfetto.dev" in capsys.readouterr().out
    assert out.read_text() == trace_json([request_])  # the run survived the disk unchanged

    assert cli("export", "fixed-4") == 2
    assert capsys.readouterr().err.strip() == (
        "specdec-tui: profiles export needs --csv PATH or --trace PATH (or both).")
    assert cli("export", "no-run", "--trace", str(tmp_path / "x.json")) == 2
    assert "has no recorded run to export" in capsys.readouterr().err
    bad = tmp_path / "nowhere" / "t.json"
    assert cli("export", "fixed-4", "--trace", str(bad)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # checked before the profile is read, by the rule every output shares (core/io/atomic.py)
    assert err == [f"specdec-tui: --trace {bad}: the folder {bad.parent} does not exist."]
    with pytest.raises(Exception, match="no recorded run"):
        profile_request(cli.store.load("no-run"))


TINY = ("shape:tiny", "shape:tiny-draft")


class RecordingEngine:
    """Passes an Engine through, keeping every traced request's stream as the app records it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.vocab_size = inner.vocab_size
        self.traced: list[tuple[Settings, list[Any]]] = []

    @property
    def target_model(self) -> Any:
        return self.inner.target_model

    def reset(self) -> None:
        self.inner.reset()

    def generate(self, prompt_ids, settings, cancel=None):  # noqa: ANN001, ANN201
        items: list[Any] = []
        for item in self.inner.generate(prompt_ids, settings, cancel=cancel):
            items.append(item)
            yield item
        if settings.traced:
            self.traced.append((settings, items))


def test_a_saved_profile_exports_the_trace_the_bench_wrote(cli, tmp_path: Path) -> None:
    """One real traced request: the bench writes it; saved as a profile, it exports the same."""
    from core import bench
    from core.bench.cli import traced_requests
    from core.decode.engine import Engine
    from core.models import load_pair
    from core.profile import ProfileRecorder

    pair = load_pair(*TINY)
    engine = RecordingEngine(Engine.from_pair(pair))
    spec = Settings(k=3, tv_budget=0.5, temperature=0.7)
    report = bench.run_protocol(engine, list(range(3, 40)), [("spec", spec)], tokens=10,
                                seeds=1, invocations=1, warmup=0, quality=False)
    bench_path = tmp_path / "bench.json"
    write_trace(bench_path, traced_requests(report))  # what `bench --trace` writes
    doc = _strict_json(bench_path.read_text())
    check_trace(doc)
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert names == ["target-only", "spec"]

    # The same run, recorded from the engine's stream as the app records it, saved and exported.
    settings, items = next((s, i) for s, i in engine.traced if s.mode == "speculative")
    rec = ProfileRecorder("spec", settings)
    for item in items:
        rec.add(item)
    cli.store.save(rec.profile(environment={"backend": "cpu"}))
    profile_path = tmp_path / "profile.json"
    assert cli("export", "spec", "--trace", str(profile_path)) == 0
    alone = tmp_path / "bench-spec.json"
    write_trace(alone, [r for r in traced_requests(report) if r.name == "spec"])
    assert profile_path.read_bytes() == alone.read_bytes()

    # ... and it is the bench file's second process, event for event (but for its number).
    def numbered_out(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**e, "pid": 0, "args": {"sort_index": 0}} if e["name"] == "process_sort_index"
                else {**e, "pid": 0} for e in events]

    exported = _strict_json(profile_path.read_text())["traceEvents"]
    assert numbered_out(exported) == numbered_out([e for e in doc["traceEvents"] if e["pid"] == 2])
    phases = {e["name"] for e in exported if e.get("cat") == "phase"}
    assert {"draft", "verify"} <= phases


def test_bench_cli_writes_the_trace_and_refuses_it_without_tracing(tmp_path: Path) -> None:
    from core import bench
    from core.cli import build_parser
    from core.errors import UserError

    def run(*argv: str) -> int:
        return bench.run_bench_cli(build_parser().parse_args(["bench", *argv]))

    out = tmp_path / "bench.json"
    common = ("--target", TINY[0], "--draft", TINY[1], "--tokens", "6", "--seeds", "1",
              "--invocations", "1", "--warmup", "0", "--no-quality", "--prompt", "one two three")
    assert run(*common, "--k", "2", "--trace", str(out)) == 0
    doc = _strict_json(out.read_text())
    check_trace(doc)
    assert len({e["pid"] for e in doc["traceEvents"]}) == 2  # target-only and the setting
    with pytest.raises(UserError, match="--trace needs the traced requests"):
        run(*common, "--no-traced", "--trace", str(out))
    with pytest.raises(UserError, match="does not exist"):
        run(*common, "--trace", str(tmp_path / "missing" / "t.json"))


def test_the_checker_refuses_what_viewers_refuse(request_: TracedRequest) -> None:
    """The rules above must bite: each broken copy of a good trace is refused."""
    good = chrome_trace([request_])
    check_trace(good)

    def broken(change: Any) -> dict[str, Any]:
        doc = json.loads(json.dumps(good))
        change(doc["traceEvents"])
        return doc

    def first(events: list[dict[str, Any]], name: str) -> dict[str, Any]:
        return next(e for e in events if e["name"] == name)

    cases = [
        lambda ev: first(ev, "verify").pop("dur"),  # an X event without its duration
        lambda ev: first(ev, "round 1").pop("tid"),
        lambda ev: first(ev, "sample").update(dur=first(ev, "round 0")["dur"]),  # overlaps out
        lambda ev: first(ev, "round 2").update(ts=0),  # time goes backwards on the host track
        lambda ev: ev.remove(first(ev, "thread_name")),  # an unnamed track
        lambda ev: ev.remove(first(ev, "process_name")),
    ]
    for case in cases:
        with pytest.raises((AssertionError, KeyError)):
            check_trace(broken(case))
