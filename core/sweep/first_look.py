"""What a plain `specdec-tui sweep` runs: a first look that ends in minutes on a CPU, and how
long the full default grid would take at the pace it measured.

Why a module of its own: the full default grid (five TV budgets x four policies, draft-only,
target-only; 3 seeds x 3 invocations of 256 tokens) is hours on a CPU, and a 32-token,
1-seed, 2-TV sweep took 10 min on a busy 2-core one with nothing said of the rest. Without a
grid or count flag (or with --full) the sweep is a first look; any flag given means the user
chose, and the full defaults fill what they did not.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from core.bench.progress import duration
from core.sweep.grid import DEFAULT_POLICIES, DEFAULT_TVS

GRID_DESTS = ("tv", "policy", "k", "draft_source", "temperature", "mode")
COUNTS = {"tokens": 256, "seeds": 3, "invocations": 3, "warmup": 1}  # the full protocol's
# The first look: target-only against one fixed k at the two ends of the TV budget, once.
LOOK_GRID = {"tv": "0,1", "policy": "fixed-4", "mode": "speculative"}
LOOK_COUNTS = {"tokens": 32, "seeds": 1, "invocations": 1, "warmup": 0}


@dataclass(frozen=True)
class FirstLook:
    """The first look's size (cells, requests a cell, tokens a request) against the full
    default grid's, for the estimate of the full one."""

    cells: int = 3  # target-only, fixed-4 TV=0, fixed-4 TV=1
    requests: int = 1
    tokens: int = LOOK_COUNTS["tokens"]
    full_cells: int = 2 + len(DEFAULT_TVS) * len(DEFAULT_POLICIES)
    full_requests: int = COUNTS["warmup"] + COUNTS["seeds"] * COUNTS["invocations"]
    full_tokens: int = COUNTS["tokens"]

    def text(self) -> str:
        return (f"a first look: {self.cells} cells, {self.requests} request of {self.tokens} "
                f"tokens each; --full runs the default grid ({self.full_cells} cells, "
                f"{self.full_requests} requests of {self.full_tokens} tokens each)")

    def full_estimate(self, took_s: float) -> str:
        """How long the full default grid would take at the pace this first look ran."""
        scale = (self.full_cells * self.full_requests * self.full_tokens) / (
            self.cells * self.requests * self.tokens)
        return (f"the first look took {duration(took_s)}; the full default grid (--full) would "
                f"take about {duration(took_s * scale)} at this pace")


def resolve(args: argparse.Namespace) -> FirstLook | None:
    """Fill the protocol counts left out; a first look (returned) when no grid or count flag
    was given and not --full, else None (the full defaults fill what was not given)."""
    given = [d for d in (*GRID_DESTS, *COUNTS) if getattr(args, d, None) is not None]
    look = not given and not getattr(args, "full", False)
    for dest, value in {**COUNTS, **(LOOK_COUNTS if look else {})}.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, value)
    if look:
        for dest, value in LOOK_GRID.items():
            setattr(args, dest, value)
    return FirstLook() if look else None
