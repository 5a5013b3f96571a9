"""A traced run as a Chrome trace (the JSON that ui.perfetto.dev and chrome://tracing open).

Layout, per request (one process each): a `host` track holding the request, its rounds and the
host-side phases (sample, cache, other); a `draft` track for drafting; a `target` track for
prefill and verification. Each round is a slice on the host track; its phases are laid out back
to back inside it in the order draft, verify, sample, cache, comm, other (a sharded target's
named "verify (compute)" and "comm (priced)": its collectives are priced, not timed), with
the engine's own per-phase seconds (never re-measured): the engine charges the time, it does
not say when within the round it was spent, so the order is ours and the durations are its. Rounds follow each other
from the end of the prefill; the prefill is the time to the first token less the round that
made it. The first token is an instant event. Times are integer microseconds, cut from the
running sums (so nothing drifts and slices nest exactly); the round's args keep every phase in
ms, including those too short to draw.

The bench (`bench --trace`) and a saved profile (`profiles export NAME --trace`) both write
through `write_trace`, so the same rounds give the same file byte for byte.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.events import COMM_NOTE, ORIGINS, PHASES, RoundEvent, RunSummary, phase_label
from core.io import atomic
from core.profile.records import Profile, ProfileError
from core.version import version_text

# Track ids inside every request's process, and the order they are shown in.
HOST_TID, DRAFT_TID, TARGET_TID = 1, 2, 3
TRACKS = ((HOST_TID, "host"), (DRAFT_TID, "draft"), (TARGET_TID, "target"))
PHASE_TRACK = {
    "draft": DRAFT_TID,
    "verify": TARGET_TID,
    "sample": HOST_TID,
    "cache": HOST_TID,
    "comm": TARGET_TID,  # collectives of a sharded target, mostly inside its verification
    "other": HOST_TID,
}
GENERATOR = "specdec-tui"


class TraceError(UserError):
    """The trace cannot be written or has nothing to show; one sentence."""


@dataclass(frozen=True)
class TracedRequest:
    """One request of a traced run: what to call its process, its rounds and its summary."""

    name: str
    rounds: Sequence[RoundEvent]
    summary: RunSummary
    environment: dict[str, Any] | None = None  # where it ran and which code measured it


def profile_request(profile: Profile) -> TracedRequest:
    """A saved profile's recorded run as a request named after the profile."""
    if profile.run is None:
        raise ProfileError(
            f"Profile {profile.name!r} has no recorded run to export; record one from the app "
            "or the bench first."
        )
    run = profile.run
    return TracedRequest(profile.name, run.rounds, run.summary, dict(run.environment))


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _ms(seconds: float | None) -> float | None:
    if seconds is None or not math.isfinite(seconds):
        return None
    return round(seconds * 1e3, 4)


def _num(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _round_length(ev: RoundEvent) -> float:
    """Seconds the round takes on the timeline: its total, or its phases if they add up to more."""
    if not ev.traced:
        return max(ev.timings.total, 0.0)
    return max(ev.timings.total, sum(max(getattr(ev.timings, p), 0.0) for p in PHASES))


def _slice(name: str, cat: str, pid: int, tid: int, ts: int, dur: int,
           args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}


def _metadata(pid: int, tid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def _round_args(ev: RoundEvent) -> dict[str, Any]:
    origins = Counter(t.origin for t in ev.tokens)
    return {
        "index": ev.index,
        "k": ev.proposed,
        "accepted": ev.accepted,
        "rows": ev.rows,
        "kernel": ev.kernel,
        "source": ev.source,
        "copied_from": ev.copied_from,
        "tokens": len(ev.tokens),
        "origins": {o: origins[o] for o in ORIGINS if origins[o]},
        "token_origins": [t.origin for t in ev.tokens],
        "rejected": len(ev.rejected),
        "tv": _num(ev.tv, 6),
        "context": ev.context,
        "traced": ev.traced,
        "total_ms": _ms(ev.timings.total),
        "phase_ms": {p: _ms(getattr(ev.timings, p)) for p in PHASES} if ev.traced else None,
    }


def _phase_args(ev: RoundEvent, phase: str) -> dict[str, Any]:
    args: dict[str, Any] = {"round": ev.index, "ms": _ms(getattr(ev.timings, phase))}
    if phase == "draft":
        args.update(k=ev.proposed, source=ev.source)
    elif phase == "verify":
        args.update(rows=ev.rows, kernel=ev.kernel)
    elif phase == "sample":
        args.update(k=ev.proposed, accepted=ev.accepted)
    elif phase == "cache":
        args.update(rewound=ev.proposed - ev.accepted)
    elif phase == "comm":
        args.update(priced=COMM_NOTE)
    return args


def request_events(pid: int, request: TracedRequest) -> list[dict[str, Any]]:
    """The events of one request (process `pid`), metadata first, then by track and time."""
    from core.identity import describe_models, identities_to_dict
    s = request.summary
    rounds = list(request.rounds)
    lengths = [_round_length(ev) for ev in rounds]
    first = next((i for i, ev in enumerate(rounds) if ev.tokens), None)
    to_first = sum(lengths[: first + 1]) if first is not None else sum(lengths)
    prefill = max(s.ttft_s - to_first, 0.0) if first is not None else 0.0
    prefill_track = DRAFT_TID if s.mode == "draft-only" else TARGET_TID

    models = s.models or {}
    ran = ", ".join(f"{role} {m.spec}" for role, m in models.items() if m is not None)
    meta = [
        _metadata(pid, 0, "process_name", {"name": request.name}),
        _metadata(pid, 0, "process_sort_index", {"sort_index": pid}),
        _metadata(pid, 0, "process_labels", {
            "labels": f"{s.mode}, {s.tokens} tokens, {ran or 'models unknown'}"}),
    ]
    for order, (tid, track) in enumerate(TRACKS):
        meta.append(_metadata(pid, tid, "thread_name", {"name": track}))
        meta.append(_metadata(pid, tid, "thread_sort_index", {"sort_index": order}))

    events: list[dict[str, Any]] = []
    prefill_us = _us(prefill)
    if prefill_us > 0:
        events.append(_slice("prefill", "prefill", pid, prefill_track, 0, prefill_us, {
            "prompt_tokens": s.prompt_tokens,
            "prefill_tokens": s.prefill_tokens,
            "ms": _ms(prefill),
        }))

    # A sharded target's request (comm in some round): its slices say verify is compute alone
    # and comm a price (core.events.SHARDED_LABELS), as the Rounds panel and the bench do.
    sharded = any(ev.traced and ev.timings.comm > 0 for ev in rounds)
    cursor = prefill  # seconds, summed as floats and cut to microseconds at every boundary
    first_token_us: int | None = None
    for i, ev in enumerate(rounds):
        start_us, end_us = _us(cursor), _us(cursor + lengths[i])
        events.append(_slice(f"round {ev.index}", "round", pid, HOST_TID, start_us,
                             end_us - start_us, _round_args(ev)))
        if ev.traced:
            inside = cursor
            for phase in PHASES:
                secs = max(getattr(ev.timings, phase), 0.0)
                a, b = _us(inside), min(_us(inside + secs), end_us)
                inside += secs
                if b > a:
                    events.append(_slice(phase_label(phase, sharded), "phase", pid,
                                         PHASE_TRACK[phase], a, b - a,
                                         _phase_args(ev, phase)))
        cursor += lengths[i]
        if i == first:
            first_token_us = end_us
    end_us = _us(cursor)

    events.append(_slice("request", "request", pid, HOST_TID, 0, max(_us(s.e2e_s), end_us), {
        "mode": s.mode,
        "tokens": s.tokens,
        "rounds": s.rounds,
        "prompt_tokens": s.prompt_tokens,
        "prefill_tokens": s.prefill_tokens,
        "proposed": s.proposed,
        "accepted": s.accepted,
        "acceptance": _num(s.acceptance),
        "mean_accepted_length": _num(s.mean_accepted_length),
        "ttft_ms": _ms(s.ttft_s),
        "e2e_ms": _ms(s.e2e_s),
        "decode_tok_s": _num(s.decode_tok_s, 2),
        "mean_tv": _num(s.mean_tv, 6),
        "stop_reason": s.stop_reason,
        "traced": s.traced,
        "fallback_reason": s.fallback_reason,
        "outside_rounds_ms": _ms(max(s.e2e_s - sum(lengths), 0.0)),
        # Which models ran (core/models/identify.py) and which code measured them.
        "models": describe_models(s.models),
        "model_identities": identities_to_dict(s.models),
        "measured_by": version_text(request.environment or {}),
    }))
    if first_token_us is not None:
        events.append({"name": "first token", "cat": "token", "ph": "i", "s": "t",
                       "ts": first_token_us, "pid": pid, "tid": HOST_TID,
                       "args": {"ttft_ms": _ms(s.ttft_s)}})
    # Per track by time; at one instant the longer slice first, so parents precede children.
    events.sort(key=lambda e: (e["tid"], e["ts"], -e.get("dur", 0), e["ph"] == "i"))
    return meta + events


def chrome_trace(requests: Iterable[TracedRequest]) -> dict[str, Any]:
    """The trace as a JSON object: one process per request, in the order given."""
    events: list[dict[str, Any]] = []
    for pid, request in enumerate(requests, start=1):
        events.extend(request_events(pid, request))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": GENERATOR,
            "layout": "one process per request; tracks host, draft, target; each round's "
            "phases back to back in the order draft, verify, sample, cache, comm, other",
        },
    }


def trace_json(requests: Iterable[TracedRequest]) -> str:
    """The file's text: one event per line, so it reads and diffs well."""
    doc = chrome_trace(requests)
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = [json.dumps(e, separators=(",", ":"), allow_nan=False) for e in doc["traceEvents"]]
    body = ",\n".join(lines)
    tail = json.dumps(head, separators=(",", ":"), allow_nan=False)[1:-1]
    return '{"traceEvents":[\n' + body + "\n]," + tail + "}\n"


def write_trace(path: str | os.PathLike[str], requests: Iterable[TracedRequest]) -> int:
    """Write the trace atomically; returns how many requests it holds (at least one)."""
    requests = list(requests)
    if not requests:
        raise TraceError("There is no traced request to write as a trace.")
    dest = Path(path).expanduser()
    if dest.is_dir():
        raise TraceError(f"The trace path {dest} is a folder; give a file name such as "
                         f"{dest / 'trace.json'}.")
    text = trace_json(requests)
    try:
        atomic.write_atomic(dest, text)
    except OSError as exc:
        from core.io.atomic import reason

        raise TraceError(f"Could not write the trace {dest}: {reason(exc)}; nothing was "
                         "changed.") from None
    return len(requests)
