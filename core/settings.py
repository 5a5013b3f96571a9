"""Settings: everything that decides how one generation runs, validated once, frozen.

The engine, the benchmark, the profiles on disk and the TUI keys all speak this one
type; `replace()` makes the next value when a key moves a knob. The command line's flags
reach it through one table (`FLAG_FIELDS`, `flag_changes`, `with_flags`) that `bench`,
`chat` and the app share.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.drafting import registry
from core.errors import UserError, lower_first

MODES = ("target-only", "draft-only", "speculative")
RULES = ("greedy", "lossless", "mentored")
POLICIES = ("fixed", "acceptance-rate", "accepted-length", "heuristic", "cost-aware")
# "fastest": per verification, the cheaper of MLX's own choice and the padded matrix kernel,
# read off a calibration that measured both (on the H200, padding wins from 4 rows).
DISPATCH = ("auto", "gemv", "gemm", "dense", "fastest")
VERIFY_ATTENTION = ("auto", "fused", "plain")
# The forward each model runs (core/primitives/compiled.py): the model's own call, the compiled
# one for every row count up to its widest bucket, or "auto": the compiled one where this pair's
# calibration on this machine measured it no slower (core/dispatch/curve.py `compiled_pays`).
STEPS = ("eager", "compiled", "auto")
MAX_K = 32  # long proposals pay where drafts are near-always accepted (TV = 1 on CUDA)
MAX_SEED = 2**64 - 1  # mlx.random.key takes an unsigned 64-bit seed; -1 or 2**64 raised TypeError
# Upper bounds of the integer knobs: MLX slices with 32-bit indices, so 2**31 was a traceback
# after a timed request. A million tokens is past every context window a model here has; a
# prefill chunk past 65536 rows only costs memory, never time.
MAX_TOKENS = 2**20
MAX_REPETITION_CONTEXT = 2**20
MAX_PREFILL_CHUNK = 2**16

# Switches whose A/B is done and whose code path left, with the behaviour that stayed and the
# record of the decision. A profile or a bench record written while one existed still loads
# where it holds the value that stayed; any other value is refused, since it no longer runs.
RETIRED: dict[str, tuple[Any, str]] = {
    "overlap_round": (False, "docs/decisions/0001-overlap-round.md"),
    "price_buckets": (False, "docs/decisions/0002-price-buckets.md"),
    "lookup_min_match_after_round": (0, "docs/decisions/0003-lookup-min-match-after-round.md"),
    "probe_at_observed_cost": (True, "docs/decisions/0004-probe-at-observed-cost.md"),
    "cost_scale_clip": (5.0, "docs/decisions/0005-cost-scale-clip.md"),
    "fused_draft": (False, "docs/decisions/0007-fused-draft-became-step.md"),
    "tree_keep": ("refeed", "docs/decisions/0009-tree-keep-refeed.md"),
}


class SettingsError(UserError, ValueError):
    """A setting a user gave is out of range; the message is one sentence naming it."""


@dataclass(frozen=True)
class Settings:
    """How one generation runs (docs/ARCHITECTURE.md, "How a round flows")."""

    target: str = "default"
    draft: str = "self:bits=4"  # best expected speedup of the self-drafts: docs/self-drafts.md
    mode: str = "speculative"
    draft_source: str = "model"  # where drafts come from: core.drafting.registry
    lookup_min_match: int = 2  # the shortest earlier repeat a lookup copies from
    rule: str = "mentored"
    tv_budget: float = 0.0
    policy: str = "fixed"
    k: int = 4  # fixed k, and the starting k of adaptive policies
    k_min: int = 1
    k_max: int = 8
    accept_lo: float = 0.4  # acceptance-rate policy: shrink below
    accept_hi: float = 0.8  # acceptance-rate policy: grow above
    ema_alpha: float = 0.2  # accepted-length policy
    temperature: float = 0.7
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    repetition_context: int = 20
    seed: int = 0
    max_tokens: int = 256
    ignore_eos: bool = False
    traced: bool = True
    bonus: bool = True
    dispatch: str = "auto"
    verify_attention: str = "auto"
    # eager | compiled | auto; compiled lost on CUDA, a run on Metal decides it there:
    # docs/decisions/0008-compiled-step.md
    step: str = "eager"
    prefill_chunk: int = 512

    def __post_init__(self) -> None:
        _check_types(self)
        _check_choice("mode", self.mode, MODES)
        _check_choice("draft_source", self.draft_source, registry.names())
        _check_choice("rule", self.rule, RULES)
        _check_choice("policy", self.policy, POLICIES)
        _check_choice("dispatch", self.dispatch, DISPATCH)
        _check_choice("verify_attention", self.verify_attention, VERIFY_ATTENTION)
        _check_choice("step", self.step, STEPS)
        _check_range("tv_budget", self.tv_budget, 0.0, 1.0)
        _check_range("temperature", self.temperature, 0.0, 10.0)
        _check_range("top_p", self.top_p, 1e-6, 1.0)
        _check_range("repetition_penalty", self.repetition_penalty, 1e-6, 10.0)
        _check_range("accept_lo", self.accept_lo, 0.0, 1.0)
        _check_range("accept_hi", self.accept_hi, 0.0, 1.0)
        _check_range("ema_alpha", self.ema_alpha, 1e-6, 1.0)
        for name in ("k", "k_min", "k_max"):
            _check_range(name, getattr(self, name), 0, MAX_K)
        if self.k_min > self.k_max:
            raise SettingsError(f"k_min ({self.k_min}) must not exceed k_max ({self.k_max}).")
        if self.k > self.k_max:  # a fixed policy would draft k whatever k_max says
            raise SettingsError(
                f"k ({self.k}) must not exceed k_max ({self.k_max}); raise k_max too."
            )
        if not 0 <= self.seed <= MAX_SEED:
            raise SettingsError(f"seed must be between 0 and 2**64 - 1; got {self.seed!r}.")
        _check_range("max_tokens", self.max_tokens, 1, MAX_TOKENS)
        _check_range("repetition_context", self.repetition_context, 1, MAX_REPETITION_CONTEXT)
        _check_range("lookup_min_match", self.lookup_min_match, 1, 64)
        _check_range("prefill_chunk", self.prefill_chunk, 1, MAX_PREFILL_CHUNK)
        if self.accept_lo > self.accept_hi:
            raise SettingsError("accept_lo must not exceed accept_hi.")

    @property
    def greedy(self) -> bool:
        """Temperature 0 means argmax for both models, whatever the rule says."""
        return self.temperature == 0.0 or self.rule == "greedy"

    @property
    def longest_proposal(self) -> int:
        """The most drafts one round of these settings can propose: k under a fixed policy,
        else up to k_max (what a calibration and a warm-up must cover: that plus one row)."""
        return min(self.k if self.policy == "fixed" else max(self.k, self.k_max), MAX_K)

    @property
    def effective_rule(self) -> str:
        return "greedy" if self.greedy else self.rule

    def replace(self, **changes: Any) -> Settings:
        """A new validated Settings with some fields changed (raises SettingsError).

        Only declared fields: `greedy=` or `replace=` would reach dataclasses as a TypeError
        traceback."""
        unknown = sorted(set(changes) - set(field_names()))
        _refuse_retired({n: changes[n] for n in unknown if n in RETIRED}, keep_stayed=False)
        if unknown:
            raise SettingsError(
                f"Unknown setting(s): {', '.join(unknown)}; the settings are "
                f"{', '.join(field_names())}."
            )
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        """Build from a mapping, refusing unknown keys with one sentence. A retired switch
        (RETIRED) at the value that stayed is dropped: that file describes what runs now."""
        names = set(field_names())
        _refuse_retired({n: v for n, v in data.items() if n in RETIRED}, keep_stayed=True)
        data = {n: v for n, v in data.items() if n not in RETIRED}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SettingsError(f"Unknown setting(s): {', '.join(unknown)}.")
        k, k_max = data.get("k"), data.get("k_max", _DEFAULTS.k_max)
        if _is_type(k, int) and _is_type(k_max, int) and k > k_max:
            # Written before k was bounded by k_max: a fixed policy drafted k whatever k_max
            # said, so k is the k_max that describes what ran.
            data["k_max"] = k
        typed: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            want = type(getattr(cls(), f.name))
            typed[f.name] = _coerce(f.name, value, want)
        return cls(**typed)


def field_names() -> tuple[str, ...]:
    """The declared settings, in order: the only names an override or a file may set."""
    return tuple(f.name for f in dataclasses.fields(Settings))


def field_type(name: str) -> type:
    """The type a declared setting holds (bool, int, float or str)."""
    return type(getattr(_DEFAULTS, name))


def _refuse_retired(found: Mapping[str, Any], keep_stayed: bool) -> None:
    """A SettingsError naming the first retired switch in `found` and its decision record,
    unless `keep_stayed` and it holds the value that stayed (then it describes this code)."""
    for name, value in found.items():
        stayed, record = RETIRED[name]
        if keep_stayed and _is_type(value, type(stayed)) and value == stayed:
            continue
        raise SettingsError(
            f"Setting {name} was removed after its A/B ({record}); what runs now is "
            f"{name} = {str(stayed).lower() if isinstance(stayed, bool) else stayed}."
        )


def _check_types(s: Settings) -> None:
    """Each field holds its declared type (an int may stand for a float), so a comparison
    below is never a TypeError traceback and a bool is never taken for a number."""
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        want = type(f.default)
        if not _is_type(value, want):
            raise SettingsError(f"Setting {f.name} must be {type_words(want)}, got {shown(value)}.")


def _is_type(value: Any, want: type) -> bool:
    if want is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if want is float:
        return isinstance(value, int | float)
    return isinstance(value, want)


_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def type_words(want: type) -> str:
    """A field's type as a user reads it: "an integer", not "a int"."""
    return _TYPE_WORDS.get(want, f"of type {want.__name__}")


def _coerce(name: str, value: Any, want: type) -> Any:
    """Accept a value only if it already is the field's type (ints may stand for floats)."""
    if not _is_type(value, want):
        raise SettingsError(f"Setting {name} must be {type_words(want)}, got {shown(value)}.")
    return want(value)


def shown(value: Any) -> str:
    """A value a user wrote, as they wrote it: a TOML date is 1979-05-27, not
    datetime.date(1979, 5, 27); strings keep their quotes so an empty one is seen."""
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else type(value).__name__


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)}; got {value!r}.")


def _check_range(name: str, value: float, lo: float, hi: float) -> None:
    if not (lo <= value <= hi):
        raise SettingsError(f"{name} must be between {_num(lo)} and {_num(hi)}; got {value!r}.")


def _num(x: float) -> str:
    """A bound as a user reads it: 1,048,576 for an integer, 1e-06 for a float."""
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def first_run_settings() -> Settings:
    """What the app and `specdec-tui chat` start from without --profile (README, "One
    default"): hybrid drafting (free copies of whatever the chat repeats, the draft model
    elsewhere) with the cost-aware k, which drafts only where a measured verify cost says
    drafting pays, at the rule and TV budget Settings() names (mentored, TV 0). `bench`
    keeps the seed protocol's rows.

    k reaches 32 (Settings' own k_max stays 8): the cost-aware k at 1..32 beat the same at
    1..8 on every copy prompt on the H200 (rewrite greedy 4.88x against 2.06x, a pasted
    refactor 1.38x against 0.73x) and held the floor as often (docs/benchmarks/never-slower.md,
    finding 7). The CPU's calibration times a plan of rows (core/dispatch/row_plan.py), 10 row
    counts for k_max = 32; a GPU times all 33, which costs little there."""
    return Settings(draft_source="hybrid", policy="cost-aware", k_max=32)


_DEFAULTS = Settings()


# --------------------------------------------------------------------------- command-line flags

# Every flag that sets one Settings field, by its argparse dest: the one table of `bench`,
# `chat` and the app (each parser adds the flags it offers; a flag means one field everywhere).
# They were mapped three times and had begun to differ (chat's skipped "" values, the bench's
# named the flag in its errors, the app's knew only --target and --draft).
FLAG_FIELDS: dict[str, str] = {
    "target": "target",
    "draft": "draft",
    "mode": "mode",
    "rule": "rule",
    "tv": "tv_budget",
    "k": "k",
    "draft_source": "draft_source",
    "policy": "policy",
    "temperature": "temperature",
    "top_p": "top_p",
    "repetition_penalty": "repetition_penalty",
    "dispatch": "dispatch",
    "verify_attention": "verify_attention",
    "step": "step",
    "seed": "seed",
    "max_tokens": "max_tokens",
}


def flag_changes(args: Any, skip: Iterable[str] = ()) -> dict[str, Any]:
    """The Settings fields a command line's flags set (FLAG_FIELDS): a flag left out (not in
    the namespace, None, or "") sets nothing; `--no-bonus` sets bonus False. `skip` names
    fields a command applies itself (the bench puts the loaded pair on every row)."""
    skipped = set(skip)
    out: dict[str, Any] = {}
    for dest, name in FLAG_FIELDS.items():
        value = getattr(args, dest, None)
        if name not in skipped and value is not None and value != "":
            out[name] = value
    if getattr(args, "no_bonus", False) and "bonus" not in skipped:
        out["bonus"] = False
    return out


def with_flags(base: Settings, changes: Mapping[str, Any]) -> Settings:
    """`base` with the flags' `changes` (flag_changes) on top. A value out of range is a
    SettingsError that names the flag it came from ("--tv: tv_budget must be between 0 and
    1; got 2.0."), so the user knows which word of the command to fix."""
    try:
        return base.replace(**changes)
    except SettingsError as exc:
        text = str(exc)
        named = re.match(r"(?:Setting )?(\w+)", text)
        flag = _flag_of(named.group(1)) if named and named.group(1) in changes else None
        if flag is None:
            raise
        raise SettingsError(f"{flag}: {lower_first(text)}") from None


def _flag_of(name: str) -> str | None:
    """The flag that sets field `name` (None: no flag does)."""
    if name == "bonus":
        return "--no-bonus"
    dest = next((d for d, f in FLAG_FIELDS.items() if f == name), None)
    return None if dest is None else f"--{dest.replace('_', '-')}"
