"""Comparing and exporting profiles: which settings differ, the metrics runs are judged by,
how a value reads in a table, CSV.

`profiles show`, `profiles diff`, `profiles export` and the app's compare screen all read runs
through these, so two runs are always set side by side by the same numbers, written alike.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from typing import Any

from core.events import PHASES
from core.io.user_text import shown
from core.profile.files import write_atomic
from core.profile.records import Profile, ProfileError, RecordedRun
from core.settings import Settings

CSV_COLUMNS = (
    "index",
    "tokens",
    "proposed",
    "accepted",
    "rows",
    "kernel",
    # where the round's drafts came from (model, lookup; empty: a plain target step), and
    # the copies it kept (tokens of origin "copied"): a hybrid run's rounds apart by source
    "source",
    "copied",
    *(f"{p}_ms" for p in PHASES),
    "total_ms",
    "tv",
    "traced",
)


def diff_settings(a: Settings, b: Settings) -> list[tuple[str, Any, Any]]:
    """(field, a's value, b's value) for the fields that differ, in declaration order."""
    return [
        (f.name, getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(Settings)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


def value_text(value: Any) -> str:
    """A setting's or a record's value as a table cell, one way for `profiles show/diff` and
    the app's compare screen (two copies had drifted: the screen printed 1e-05 and 12345):
    "-" for none, true/false, a number by plain_number, anything else as text without
    terminal escapes (it may come from a file someone else wrote)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return plain_number(value)
    return shown(value)


def plain_number(value: float) -> str:
    """A number as people read it, never in exponent form (`profiles diff` printed a run's
    1.246e+05 tokens/s and 1e-05 s): thousands grouped, four significant digits below."""
    size = abs(value)
    if size >= 1000:
        return f"{value:,.0f}"
    if size >= 1 or size == 0:
        return f"{value:.4g}"
    text = f"{value:.{max(4, 3 - math.floor(math.log10(size)))}f}"
    return text.rstrip("0").rstrip(".")


def summary_metrics(run: RecordedRun) -> list[tuple[str, float | None]]:
    """The numbers people compare runs by; phase rows are per request, None when untraced."""
    s = run.summary
    rows: list[tuple[str, float | None]] = [
        ("E2E s", s.e2e_s),
        ("TTFT s", s.ttft_s),
        ("decode tok/s", s.decode_tok_s),
        ("acceptance", s.acceptance),
        ("mean accepted length", s.mean_accepted_length),
        ("rounds", float(s.rounds)),
        ("tokens", float(s.tokens)),
        ("mean TV", s.mean_tv),
    ]
    for phase in PHASES:
        value = s.phase_s.get(phase) if s.traced else None
        if phase == "comm" and not value:
            continue  # collectives: only runs of a sharded target have them
        rows.append((f"{phase} ms", None if value is None else value * 1e3))
    return rows


def rounds_csv(run: RecordedRun) -> str:
    """One row per round: what was proposed and kept, the kernel, and the phase split in ms."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in run.rounds:
        ms = r.timings.as_ms()
        writer.writerow(
            [
                r.index,
                len(r.tokens),
                r.proposed,
                r.accepted,
                r.rows,
                r.kernel,
                r.source or "",
                sum(t.origin == "copied" for t in r.tokens),
                *(f"{ms[p]:.4f}" for p in (*PHASES, "total")),
                "" if r.tv is None else f"{r.tv:.6g}",
                int(r.traced),
            ]
        )
    return buf.getvalue()


def export_csv(profile: Profile, path: str | os.PathLike[str]) -> int:
    """Write the recorded rounds as CSV (atomically); returns how many rounds were written."""
    if profile.run is None:
        raise ProfileError(
            f"Profile {profile.name!r} has no recorded run to export; record one from the app "
            "or the bench first."
        )
    write_atomic(path, rounds_csv(profile.run).encode("utf-8"))
    return len(profile.run.rounds)
