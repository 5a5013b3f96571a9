"""A recorded run's numbers checked field by field before anything uses them.

A run file (NAME.run.json) is JSON someone may have edited or shared. Its rounds and summary
once reached `profiles export` with NaN, Infinity, -1e308 or null timings (the CSV was written,
then the trace step crashed), `profiles show` with a string `phase_s`, and the app with both
(a traceback screen, exit 0). Every field is checked here for its type and, for numbers,
finiteness and range, so a bad file is refused in one sentence naming the field, by every
reader alike (core/profile/files.py calls these).
"""

from __future__ import annotations

import math
from typing import Any

from core.events import PHASES

MAX_SECONDS = 1e7  # ~4 months: a time past it is an edit, and it overflows sums and traces
MAX_COUNT = 1 << 53  # counts, ids and positions: integers a float holds exactly

_TIMING_KEYS = (*PHASES, "total")
_ROUND_COUNTS = ("index", "proposed", "accepted", "rows", "context", "nodes")
_ROUND_STRINGS = ("kernel", "source")
_SUMMARY_COUNTS = ("tokens", "rounds", "prompt_tokens", "prefill_tokens", "proposed", "accepted")
_SUMMARY_SECONDS = ("e2e_s", "ttft_s")
_SUMMARY_STRINGS = ("mode", "stop_reason")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def count(value: Any, what: str) -> None:
    """A whole number in 0..2**53."""
    if not _is_int(value) or not 0 <= value <= MAX_COUNT:
        raise TypeError(f"{what} must be a whole number from 0 to 2**53, not {_shown(value)}")


def number(value: Any, what: str, lo: float = 0.0, hi: float = math.inf,
           optional: bool = False) -> None:
    """A finite number in [lo, hi] (None too when `optional`)."""
    if value is None and optional:
        return
    if not _is_number(value) or not math.isfinite(value) or not lo <= value <= hi:
        upper = "" if hi == math.inf else f" to {hi:g}"
        raise TypeError(f"{what} must be a finite number from {lo:g}{upper}, not {_shown(value)}")


def text(value: Any, what: str, optional: bool = False) -> None:
    """A string (None too when `optional`)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {_shown(value)}")


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string" if len(value) > 20 else repr(value)
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def check_round(r: dict[str, Any], i: int) -> None:
    """Round `i` of a run: every field its type, every number finite and in range."""
    where = f"round {i}'s"
    for key in _ROUND_COUNTS:
        if key in r:
            count(r[key], f"{where} {key}")
    for key in _ROUND_STRINGS:
        if key in r:
            text(r[key], f"{where} {key}")
    if "traced" in r and not isinstance(r["traced"], bool):
        raise TypeError(f"{where} traced must be true or false, not {_shown(r['traced'])}")
    if "tv" in r:
        number(r["tv"], f"{where} tv", 0.0, 1.0, optional=True)
    if r.get("copied_from") is not None:
        count(r["copied_from"], f"{where} copied_from")
    rejected = r.get("rejected", [])
    if not isinstance(rejected, list):
        raise TypeError(f"{where} rejected must be a list of token ids")
    for t in rejected:
        count(t, f"{where} rejected token")
    branches = r.get("branches", [])
    if not isinstance(branches, list) or not all(isinstance(b, list) for b in branches):
        raise TypeError(f"{where} branches must be a list of lists of token ids")
    for b in branches:
        for t in b:
            count(t, f"{where} branch token")
    for t in r.get("tokens", []):
        count(t[0], f"{where} token id")
    timings = r.get("timings", {})
    if not isinstance(timings, dict):
        raise TypeError(f"{where} timings must be an object")
    unknown = sorted(set(timings) - set(_TIMING_KEYS))
    if unknown:
        raise TypeError(f"{where} timings have unknown key(s) {', '.join(map(str, unknown))}")
    for key, value in timings.items():
        number(value, f"{where} {key} time", 0.0, MAX_SECONDS)


def check_summary(s: dict[str, Any]) -> None:
    """A run's summary: every field its type, every number finite and in range."""
    for key in _SUMMARY_COUNTS:
        count(s.get(key), f"the summary's {key}")
    for key in _SUMMARY_SECONDS:
        number(s.get(key), f"the summary's {key}", 0.0, MAX_SECONDS)
    number(s.get("decode_tok_s"), "the summary's decode_tok_s", 0.0, 1e12)
    for key in _SUMMARY_STRINGS:
        text(s.get(key), f"the summary's {key}")
    if not isinstance(s.get("traced"), bool):
        raise TypeError(f"the summary's traced must be true or false, not {_shown(s.get('traced'))}")
    number(s.get("acceptance"), "the summary's acceptance", 0.0, 1.0, optional=True)
    number(s.get("mean_tv"), "the summary's mean_tv", 0.0, 1.0, optional=True)
    number(s.get("mean_accepted_length"), "the summary's mean_accepted_length", 0.0, 1e6,
           optional=True)
    number(s.get("tracing_overhead"), "the summary's tracing_overhead", -1e6, 1e6, optional=True)
    text(s.get("fallback_reason"), "the summary's fallback_reason", optional=True)
    ppa = s.get("per_position_acceptance", [])
    if not isinstance(ppa, list):
        raise TypeError("the summary's per_position_acceptance must be a list of numbers")
    for x in ppa:
        number(x, "the summary's per_position_acceptance", 0.0, 1.0)
    ids = s.get("token_ids", [])
    if not isinstance(ids, list):
        raise TypeError("the summary's token_ids must be a list of token ids")
    for t in ids:
        count(t, "the summary's token id")
    phase_s = s.get("phase_s")
    if not isinstance(phase_s, dict):
        raise TypeError(f"the summary's phase_s must be an object, not {_shown(phase_s)}")
    for key, value in phase_s.items():
        number(value, f"the summary's {key} time", 0.0, MAX_SECONDS)
    per_source = s.get("per_source", {})
    if not isinstance(per_source, dict) or not all(
        isinstance(v, dict) for v in per_source.values()
    ):
        raise TypeError("the summary's per_source must be an object of objects")
    for source, stats in per_source.items():
        _source_stats(stats, f"the summary's per_source {source}")
    models = s.get("models")
    if models is not None and not isinstance(models, dict):
        raise TypeError(f"the summary's models must be an object, not {_shown(models)}")
    for role, identity in (models or {}).items():
        check_identity(identity, f"the summary's {role} model")


_IDENTITY_COUNTS = ("parameters", "layers", "bits", "group_size", "seed")
_IDENTITY_STRINGS = ("kind", "name", "architecture", "sha256", "revision", "base", "shape")


def check_identity(d: Any, what: str) -> None:
    """A recorded ModelIdentity (core/identity.py): its counts whole numbers, its names strings."""
    if d is None:
        return
    if not isinstance(d, dict):
        raise TypeError(f"{what} must be an object, not {_shown(d)}")
    for key in _IDENTITY_COUNTS:
        value = d.get(key)
        if value is not None and (not _is_int(value) or not 0 <= value < 1 << 64):
            raise TypeError(f"{what}'s {key} must be a whole number, not {_shown(value)}")
    for key in _IDENTITY_STRINGS:
        text(d.get(key), f"{what}'s {key}", optional=True)
    if "spec" in d:
        text(d["spec"], f"{what}'s spec")
    if "random_weights" in d and not isinstance(d["random_weights"], bool):
        raise TypeError(f"{what}'s random_weights must be true or false")
    bits = d.get("tensor_bits") or {}
    if not isinstance(bits, dict) or not all(_is_int(v) and v >= 0 for v in bits.values()):
        raise TypeError(f"{what}'s tensor_bits must map widths to counts")


def _source_stats(stats: dict[str, Any], what: str) -> None:
    """One source's stats (core/primitives/acceptance.py `summary()`): counts, rates, a list of
    rates; each value None, a finite number, or a list of finite numbers."""
    for key, value in stats.items():
        where = f"{what} {key}"
        if key in ("rounds", "proposed", "accepted", "measured_rounds", "earlier_rounds",
                   "plan_rounds", "stops", "refused"):
            count(value, where)
        elif key in ("guard", "basis"):  # the measured guard's decision in words
            text(value, where)
        elif isinstance(value, list):
            for x in value:
                number(x, where, 0.0, 1e6)
        else:
            number(value, where, 0.0, 1e6, optional=True)
