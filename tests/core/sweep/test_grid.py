"""The sweep's grid (core/sweep/grid.py): a fixed k past the base k_max raises k_max with it
(issue 32)."""

from __future__ import annotations

import pytest


@pytest.mark.usefixtures("wide_console")
def test_a_sweep_of_a_fixed_k_past_the_base_k_max_raises_k_max_with_it() -> None:
    from core.sweep.grid import SweepGrid

    cells = [c for c in SweepGrid(tvs=(1.0,), policies=("fixed-16",), draft_only=False)
             .cells(0.7) if c.settings.mode == "speculative"]
    assert cells and all((c.settings.k, c.settings.k_max) == (16, 16) for c in cells)


def test_a_grid_past_its_bound_is_refused_before_its_cells_are_built() -> None:
    """A 9,698-cell sweep started with no bound (its --tv held thousands of budgets)."""
    import time

    from core.sweep.grid import MAX_CELLS, SweepError, SweepGrid

    tvs = tuple(i / 10_000 for i in range(10_001))
    start = time.perf_counter()
    with pytest.raises(SweepError, match=f"at most {MAX_CELLS:,}"):
        SweepGrid(tvs=tvs)
    assert time.perf_counter() - start < 1.0


def test_minus_zero_names_a_cell_tv_0() -> None:
    from core.sweep.grid import SweepGrid, parse_floats

    grid = SweepGrid(tvs=parse_floats("--tv", "-0,0.5"))
    names = [c.name for c in grid.cells(0.7)]
    assert "fixed-4 TV=0" in names and not any("-0" in n for n in names), names
    assert parse_floats("--temperatures", "-0") == (0.0,)
