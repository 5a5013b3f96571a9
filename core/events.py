"""What the decode loop emits: one RoundEvent per round, one RunSummary per run.

The TUI, the benchmark and the profile writer are three listeners of the same stream;
these types are their whole contract, and they round-trip through plain dicts (JSON).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.identity import identities_from_dict, identities_to_dict

# Where a committed token came from: a model draft the target accepted, a copied (looked-up)
# draft it accepted, its correction after a rejection, its bonus after a full acceptance, or
# one model alone.
ORIGINS = ("accepted", "copied", "corrected", "bonus", "target", "draft")
# "comm": the collectives of a sharded target (core/runtime/distributed.py), traced rounds only:
# priced (each charged the probed cost of its size), not timed, and carved out of its phase.
PHASES = ("draft", "verify", "sample", "cache", "comm", "other")
# How a sharded run's phases are named wherever they are shown (the Rounds panel, the bench's
# phase split, the Chrome trace): its verification is then compute alone, and its comm a price.
SHARDED_LABELS = {"verify": "verify (compute)", "comm": "comm (priced)"}
COMM_NOTE = ("comm (priced): each collective of the sharded target is charged what a probe of "
             "its size measured, not waited for, and carved out of the phase that queued it "
             "(mostly the verification, which is then compute alone)")


def phase_label(phase: str, sharded: bool) -> str:
    """`phase` as shown: in a sharded run (one with comm) verify and comm say what they are."""
    return SHARDED_LABELS.get(phase, phase) if sharded else phase


def phase_shares(phase_s: Mapping[str, float], traced: bool = True) -> dict[str, float] | None:
    """Each phase's share of the traced time, in PHASES order; None when the run split no
    phases (untraced, or no time at all). The one computation: `chat`'s summary, the Rounds
    and Profile panels and the compare screen all read it (four copies had drifted: one
    divided by 1 when nothing was timed, one counted keys beyond PHASES). A negative time
    (a hand-edited run file) counts as none."""
    if not traced:
        return None
    times = {p: max(float(phase_s.get(p, 0.0)), 0.0) for p in PHASES}
    total = sum(times.values())
    if total <= 0:
        return None
    return {p: t / total for p, t in times.items()}


@dataclass(frozen=True)
class CommittedToken:
    """A token that is now part of the output, and which model decided it."""

    id: int
    origin: str


@dataclass(frozen=True)
class PhaseTimings:
    """Seconds per phase of one round. Untraced rounds know only `total`. `comm` is carved
    out of the phase it happened in (verify, mostly); 0.0 in runs recorded before it existed,
    and last, so positional construction keeps its meaning."""

    draft: float = 0.0
    verify: float = 0.0
    sample: float = 0.0
    cache: float = 0.0
    other: float = 0.0
    total: float = 0.0
    comm: float = 0.0

    def as_ms(self) -> dict[str, float]:
        return {p: getattr(self, p) * 1e3 for p in (*PHASES, "total")}


@dataclass(frozen=True)
class RoundEvent:
    """One round of the decode loop: what was proposed, kept, thrown away, and what it cost."""

    index: int
    tokens: tuple[CommittedToken, ...]
    rejected: tuple[int, ...] = ()
    proposed: int = 0  # draft tokens proposed this round (k)
    accepted: int = 0  # of them, accepted by the target
    rows: int = 1  # rows the target forwarded (k + 1 in speculative rounds)
    timings: PhaseTimings = field(default_factory=PhaseTimings)
    kernel: str = ""  # predicted kernel family of the target's forward for `rows`
    tv: float | None = None  # realised mean TV(pi, p) over the decided positions
    context: int = 0  # committed sequence length after the round
    traced: bool = False
    source: str = ""  # the draft source that proposed ("model", "lookup", ...); "" for none
    copied_from: int | None = None  # a lookup's proposal: where in the conversation it copied
    nodes: int = 0  # a tree round's verified nodes (0: a chain); `accepted` its path's depth
    # a tree round's branches turned down where its path stopped (`rejected` is the first)
    branches: tuple[tuple[int, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["tokens"] = [[t.id, t.origin] for t in self.tokens]
        d["rejected"] = list(self.rejected)
        d["branches"] = [list(b) for b in self.branches]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RoundEvent:
        d = dict(d)
        d["tokens"] = tuple(CommittedToken(int(i), str(o)) for i, o in d["tokens"])
        d["rejected"] = tuple(int(x) for x in d.get("rejected", ()))
        d["branches"] = tuple(tuple(int(x) for x in b) for b in d.get("branches", ()))
        d["timings"] = PhaseTimings(**d.get("timings", {}))
        return cls(**d)


@dataclass(frozen=True)
class RunSummary:
    """The whole run in numbers; acceptance fields are None outside speculative mode."""

    mode: str
    tokens: int
    rounds: int
    prompt_tokens: int
    prefill_tokens: int  # tokens actually prefilled (prompt minus the reused cache prefix)
    proposed: int
    accepted: int
    acceptance: float | None
    per_position_acceptance: tuple[float, ...]  # P(draft i accepted | drafts before it were)
    mean_accepted_length: float | None
    e2e_s: float
    ttft_s: float
    decode_tok_s: float
    phase_s: dict[str, float]  # summed per-phase seconds (zeros when untraced)
    mean_tv: float | None
    traced: bool
    stop_reason: str  # "length", "eos", "cancelled"
    token_ids: tuple[int, ...] = ()
    tracing_overhead: float | None = None  # filled by the bench (traced vs untraced E2E)
    fallback_reason: str | None = None  # why speculation fell back to target-only, if it did
    # Per draft source: rounds, proposed, accepted, per-position acceptance, mean accepted
    # length; "none" counts the speculative-mode rounds with nothing proposed (target steps).
    per_source: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The models that ran: {"target": ModelIdentity, "draft": ModelIdentity or None (none ran,
    # as in target-only)} (core/models/identify.py); None when the engine was not told (an
    # Engine built from bare modules) or the record predates identities: shown as unknown.
    models: dict[str, Any] | None = None
    # The forward the models ran ("eager" | "compiled", core/primitives/compiled.py), the graphs
    # their compiled forwards had traced by the run's end, and why a model ran eager under the
    # compiled step (its layout), per role.
    step: str = "eager"
    graphs: int = 0
    eager_because: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(dataclasses.replace(self, models=None))
        d["per_position_acceptance"] = list(self.per_position_acceptance)
        d["token_ids"] = list(self.token_ids)
        d["models"] = identities_to_dict(self.models)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSummary:
        d = dict(d)
        d["per_position_acceptance"] = tuple(d.get("per_position_acceptance", ()))
        d["token_ids"] = tuple(d.get("token_ids", ()))
        d["models"] = identities_from_dict(d.get("models"))
        return cls(**d)


def time_accounting(summary: RunSummary, rounds: Sequence[RoundEvent]) -> dict[str, float]:
    """A run's E2E as parts that add up to it: before its first round (the prefill, and what
    the run waited on before it), its rounds (their own clocks: the phases), and the named
    remainder, the time between rounds (the loop's host work, whoever consumes the rounds, a
    garbage collection, another thread holding the CPU). A profiler that left 40% of a run
    in no phase could not say where the time went; this one says how much fell between."""
    first = next((i for i, ev in enumerate(rounds) if ev.tokens), len(rounds) - 1)
    to_first = sum(ev.timings.total for ev in rounds[: first + 1])
    in_rounds = sum(ev.timings.total for ev in rounds)
    ttft = min(summary.ttft_s, summary.e2e_s)
    before = max(ttft - to_first, 0.0)
    return {"before the first round": before, "rounds": in_rounds,
            "between rounds": max(summary.e2e_s - before - in_rounds, 0.0)}
