"""A plain `specdec-tui sweep` is a first look that ends in minutes on a CPU and says how long
the full default grid would take (core/sweep/first_look.py); the bar's time left is there
from the first step on (core/bench/progress.py)."""

from __future__ import annotations

from core.bench.progress import duration, time_left
from core.cli import build_parser
from core.sweep.cli import grid_from_args
from core.sweep.first_look import FirstLook, resolve


def test_a_plain_sweep_is_a_first_look_of_three_cells() -> None:
    args = build_parser().parse_args(["sweep"])
    look = resolve(args)
    assert look is not None and (args.tokens, args.seeds, args.invocations, args.warmup) == (
        32, 1, 1, 0)
    cells = grid_from_args(args).all_cells()
    assert [c.name for c in cells] == ["target-only", "fixed-4 TV=0", "fixed-4 TV=1"]
    assert look.cells == len(cells)
    assert "--full runs the default grid (22 cells" in look.text()


def test_any_grid_or_count_flag_or_full_means_the_users_own_sweep() -> None:
    for argv in (["sweep", "--full"], ["sweep", "--seeds", "2"], ["sweep", "--tv", "0.5"]):
        args = build_parser().parse_args(argv)
        assert resolve(args) is None, argv
        assert args.tokens == 256 and args.invocations == 3
    args = build_parser().parse_args(["sweep", "--full"])
    resolve(args)
    assert len(grid_from_args(args).all_cells()) == FirstLook().full_cells


def test_the_full_grids_time_is_estimated_from_the_first_looks() -> None:
    # 22 cells x 10 requests x 256 tokens against 3 x 1 x 32: 586.7 times the first look
    assert FirstLook().full_estimate(180.0).endswith("would take about 29 h 20 min at this pace")
    assert duration(59) == "59 s" and duration(250) == "4 min 10 s"


def test_time_left_is_known_from_the_first_step_on() -> None:
    assert time_left(0, 10, 3.0) == "left: after the first step"
    assert time_left(1, 10, 5.0) == "left ~45 s"
    assert time_left(10, 10, 50.0) == "left ~0 s"
