"""The sweep's grid (core/sweep/grid.py): a fixed k past the base k_max raises k_max with it
(issue 32)."""

from __future__ import annotations

import pytest


@pytest.mark.usefixtures("wide_console")
def test_a_sweep_of_a_fixed_k_past_the_base_k_max_raises_k_max_with_it() -> None:
    from core.sweep.grid import SweepGrid

    cells = [c for c in SweepGrid(tvs=(1.0,), policies=("fixed-16",), draft_only=False)
             .cells(0.7) if c.settings.mode == "speculative"]  # fmt: skip
    assert cells and all((c.settings.k, c.settings.k_max) == (16, 16) for c in cells)
