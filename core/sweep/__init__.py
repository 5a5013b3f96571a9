"""The sweep: the seed's question (how much faster does a TV budget make speculative decoding,
and what does the text give up for it?) as a grid of bench runs, its frontier and its answer.

Modules: grid (the cells), run (one bench protocol per prompt and temperature, the cells'
summaries), frontier (Pareto front and the fastest cell that reads right: pure, on recorded
cells), judge (copied, repeated, task: again from a saved file), report (table, CSV, Markdown,
SVG, terminal plot), cli (`specdec-tui sweep`), last (the copy of the last sweep the app
shows). Its protocol knobs are the bench's
(`ProtocolConfig`, core/bench/protocol.py).
"""

from __future__ import annotations

from core.bench.protocol import ProtocolConfig  # the bench's, which every block runs
from core.sweep.frontier import (
    dominates,
    exclusion,
    feasible,
    frontier_summary,
    pareto_front,
    recommend,
)
from core.sweep.grid import Cell, SweepError, SweepGrid, parse_policy
from core.sweep.judge import rejudge
from core.sweep.run import SweepPrompt, SweepRun, run_sweep, summarise_cell

__all__ = [
    "Cell",
    "ProtocolConfig",
    "SweepError",
    "SweepGrid",
    "SweepPrompt",
    "SweepRun",
    "dominates",
    "exclusion",
    "feasible",
    "frontier_summary",
    "pareto_front",
    "parse_policy",
    "recommend",
    "rejudge",
    "run_sweep",
    "summarise_cell",
]
