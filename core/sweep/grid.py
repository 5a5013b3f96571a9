"""The sweep's grid: which settings one `specdec-tui sweep` runs, and the names of its cells.

Why a module of its own: the grid is the seed's question made explicit (TV budgets x how many
drafts a round x where drafts come from x temperature), and the CLI, the tests and the GPU
scripts must agree on what one cell is. A cell is one bench row; at temperature 0 the rule is
greedy whatever the TV budget says (core.settings.Settings.greedy), so the TV axis collapses
to one greedy cell per policy there instead of five identical rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from core.bench.errors import BenchError
from core.settings import MAX_K, Settings, SettingsError

DEFAULT_TVS = (0.0, 0.25, 0.5, 0.75, 1.0)
DEFAULT_POLICIES = ("fixed-4", "fixed-6", "fixed-8", "cost-aware")
DEFAULT_SOURCES = ("model",)
DEFAULT_TEMPERATURES = (0.7,)
# The most cells one sweep runs, counted from its lists before any cell is built: a --tv of
# thousands of budgets started a 9,698-cell sweep with no bound (the default grid is 22).
MAX_CELLS = 1_000
# The Settings fields a cell varies: what the app applies when it takes a sweep's recommendation.
APPLIED_FIELDS = ("mode", "rule", "tv_budget", "policy", "k", "k_max", "draft_source",
                  "temperature")


class SweepError(BenchError):
    """A sweep that cannot run as asked (a bad grid, a bad bound, an output in the way)."""


@dataclass(frozen=True)
class Cell:
    """One setting of the grid: the bench row it runs and the axes that name it."""

    name: str  # unique within its temperature: the bench row's name
    settings: Settings
    kind: str  # "target-only", "draft-only" or "speculative"
    policy: str | None = None  # "fixed-8", "cost-aware" (speculative cells)
    tv: float | None = None  # None: target-only, draft-only, or greedy
    source: str | None = None

    @property
    def temperature(self) -> float:
        return self.settings.temperature

    @property
    def id(self) -> str:
        """Unique over the whole sweep: the temperature and the row's name."""
        return f"T={self.temperature:g} {self.name}"

    def axes(self) -> dict[str, Any]:
        return {"kind": self.kind, "policy": self.policy, "tv": self.tv, "source": self.source,
                "temperature": self.temperature}


def parse_policy(text: str) -> dict[str, Any]:
    """'fixed-8' -> policy fixed, k 8; 'cost-aware' (k up to 8) or 'cost-aware-32' (up to 32).

    Other policies of core.settings.POLICIES are 'NAME' or 'NAME-KMAX' alike; one sentence for
    anything else."""
    text = text.strip()
    from core.settings import POLICIES

    for name in sorted(POLICIES, key=len, reverse=True):
        if text == name:
            return {"policy": name} if name != "fixed" else _bad_policy(text)
        if text.startswith(name + "-") and text[len(name) + 1 :].isdigit():
            n = int(text[len(name) + 1 :])
            if not 1 <= n <= MAX_K:
                raise SweepError(f"--policies {text}: k must be between 1 and {MAX_K}.")
            if name == "fixed":
                return {"policy": "fixed", "k": n}
            return {"policy": name, "k_max": n, "k": min(Settings.k, n)}
    return _bad_policy(text)


def _bad_policy(text: str) -> dict[str, Any]:
    raise SweepError(
        f"--policies: {text!r} is not a policy; write fixed-K (K drafts a round), cost-aware, "
        "or cost-aware-KMAX (and likewise acceptance-rate, accepted-length, heuristic)."
    )


@dataclass(frozen=True)
class SweepGrid:
    """TV budgets x policies x draft sources x temperatures, plus target-only and draft-only.

    Target-only is every temperature's baseline (the bench adds it); draft-only is the other
    end of the frontier (the draft's own text, as fast as the draft)."""

    tvs: tuple[float, ...] = DEFAULT_TVS
    policies: tuple[str, ...] = DEFAULT_POLICIES
    sources: tuple[str, ...] = DEFAULT_SOURCES
    temperatures: tuple[float, ...] = DEFAULT_TEMPERATURES
    draft_only: bool = True
    base: Settings = field(default_factory=Settings)

    def __post_init__(self) -> None:
        if not self.tvs or not self.policies or not self.sources or not self.temperatures:
            raise SweepError("The grid is empty: give at least one TV budget, policy, draft "
                             "source and temperature.")
        n = len(self.temperatures) * (1 + int(self.draft_only)
                                      + len(self.sources) * len(self.policies) * len(self.tvs))
        if n > MAX_CELLS:
            raise SweepError(
                f"This grid is {n:,} cells ({len(self.temperatures)} temperatures x "
                f"{len(self.sources)} sources x {len(self.policies)} policies x "
                f"{len(self.tvs)} TV budgets, with the baselines); a sweep takes at most "
                f"{MAX_CELLS:,}: split it over several runs."
            )
        for tv in self.tvs:
            if not 0.0 <= tv <= 1.0:
                raise SweepError(f"--tv {tv:g}: a TV budget is between 0 and 1.")
        for t in self.temperatures:
            if t < 0:
                raise SweepError(f"--temperatures {t:g}: a temperature is at least 0.")
        for p in self.policies:
            parse_policy(p)
        from core.drafting import registry

        for s in self.sources:
            if s not in registry.names():
                raise SweepError(f"--sources {s}: not a draft source; known: "
                                 f"{', '.join(registry.names())}.")

    def cells(self, temperature: float) -> list[Cell]:
        """The rows of one temperature's block, target-only first (the bench's baseline)."""
        base = self.base.replace(temperature=temperature)
        out = [Cell("target-only", base.replace(mode="target-only"), "target-only")]
        if self.draft_only:
            out.append(Cell("draft-only", base.replace(mode="draft-only"), "draft-only"))
        # The TV axis is the mentored rule's: under another (greedy at T = 0, or a --rule
        # given) one cell per policy, named by its rule.
        rule = base.replace(mode="speculative").effective_rule
        for source in self.sources:
            for pol in self.policies:
                fields = parse_policy(pol)
                if fields.get("k", 0) > base.k_max:  # k may not exceed k_max
                    fields["k_max"] = fields["k"]
                prefix = "" if source == "model" else f"{source} "
                tvs: tuple[float | None, ...] = self.tvs if rule == "mentored" else (None,)
                for tv in tvs:
                    extra: dict[str, Any] = {"mode": "speculative", "draft_source": source,
                                             **fields}
                    if tv is None:
                        name = f"{prefix}{pol} {rule}"
                    else:
                        extra.update(rule="mentored", tv_budget=tv)
                        name = f"{prefix}{pol} TV={tv:g}"
                    try:
                        s = base.replace(**extra)
                    except SettingsError as exc:
                        raise SweepError(f"{name}: {exc}") from None
                    out.append(Cell(name, s, "speculative", pol, tv, source))
        return out

    def all_cells(self) -> list[Cell]:
        return [c for t in self.temperatures for c in self.cells(t)]

    def to_dict(self) -> dict[str, Any]:
        return {"tvs": list(self.tvs), "policies": list(self.policies),
                "sources": list(self.sources), "temperatures": list(self.temperatures),
                "draft_only": self.draft_only}


def parse_floats(flag: str, text: str) -> tuple[float, ...]:
    """'0,0.25,0.5' -> (0.0, 0.25, 0.5); a bad item is one sentence naming the flag."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            value = float(part)
        except ValueError:
            raise SweepError(f"{flag}: {part!r} is not a number.") from None
        if not math.isfinite(value):
            raise SweepError(f"{flag}: {part!r} is not a finite number.")
        out.append(value + 0.0)  # -0 is 0: a cell named "TV=-0" is TV=0
    if not out:
        raise SweepError(f"{flag} names no value.")
    return tuple(dict.fromkeys(out))


def parse_names(flag: str, text: str) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not out:
        raise SweepError(f"{flag} names no value.")
    return out
