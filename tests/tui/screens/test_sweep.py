"""Issue 30 in the app: `w` shows the last sweep's frontier (core/sweep/last.py) as a table
with the Pareto rows marked, and `a` applies its recommended setting; no sweep is a sentence."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from core.settings import Settings
from core.sweep.frontier import frontier_summary
from core.sweep.last import last_sweep_path, remember
from tests.helpers.app import ready
from tui.screens.sweep import SweepScreen
from tui.widgets.composer import Composer

SIZE = (160, 45)


def _sweep() -> dict:
    def cell(name, speed, nll, **apply):
        return {"id": f"T=0.7 {name}", "name": name, "temperature": 0.7, "speedup": speed,
                "speedup_min": speed * 0.9, "speedup_max": speed * 1.1, "nll_delta": nll,
                "kind": apply.get("mode", "speculative"),
                "apply": {"mode": "speculative", "rule": "mentored", "temperature": 0.7,
                          "draft_source": "model", "policy": "fixed", **apply}}

    cells = [cell("target-only", 1.0, 0.0, mode="target-only"),
             cell("fixed-8 TV=0.5", 0.9, 0.05, k=8, tv_budget=0.5),
             cell("fixed-8 TV=1", 1.4, 0.2, k=8, tv_budget=1.0)]
    front = frontier_summary(cells, max_nll_delta=0.3)
    for c in cells:
        c["on_front"] = c["id"] in front["groups"]["0.7"]["front"]
    return {"kind": "specdec-tui sweep", "complete": True, "cells": cells, "frontier": front,
            "models": {"target": "t"}}


async def test_w_shows_the_frontier_and_a_applies_the_recommendation(make_app) -> None:
    remember(_sweep())
    app = make_app(Settings(k=4, tv_budget=0.0))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("escape")
        assert not app.query_one("#prompt", Composer).has_focus
        await pilot.press("w")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        table = screen.query_one("#sweep-cells", DataTable)
        marks = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert marks == ["*", "", "R*"]  # TV=0.5 is dominated by target-only
        assert table.cursor_row == 2  # on the recommendation
        await pilot.press("a")
        await pilot.pause()
        assert not isinstance(app.screen, SweepScreen)
        s = app.settings
        assert (s.k, s.tv_budget, s.policy, s.temperature) == (8, 1.0, "fixed", 0.7)


async def test_no_sweep_yet_is_a_sentence(make_app) -> None:
    last_sweep_path().unlink(missing_ok=True)
    app = make_app(Settings())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("escape")
        await pilot.press("w")
        await pilot.pause()
        assert not isinstance(app.screen, SweepScreen)
        assert any("run `specdec-tui sweep` first" in str(n.message)
                   for n in app._notifications)


async def test_a_hostile_last_sweep_is_one_notification_and_set_aside(make_app) -> None:
    """A FIFO, a /dev/zero link or NaN cells as the last sweep's copy: `w` says so once and
    moves it aside (the next sweep writes it again), never a hang or a crash."""
    import os

    from tests.helpers.kept_faults import FAULTS, spoil

    path = last_sweep_path()
    good = __import__("json").dumps(_sweep())
    for fault in FAULTS:
        spoil(path, fault, good)
        app = make_app(Settings())
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press("escape")
            await pilot.press("w")
            await pilot.pause()
            assert not isinstance(app.screen, SweepScreen), fault
            said = [str(n.message) for n in app._notifications]
            assert any(str(path) in m and "set aside" in m for m in said), (fault, said)
        assert not os.path.lexists(path), fault


async def test_at_80_columns_the_frontier_table_shows_its_task_column(make_app) -> None:
    """At 80x24 the table's last columns (task) were off the screen."""
    data = _sweep()
    data["cells"][1]["name"] = "hybrid cost-aware-32 TV=0.75 (a long name)"
    remember(data)
    app = make_app(Settings())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("escape")
        await pilot.press("w")
        await pilot.pause()
        table = app.screen.query_one("#sweep-cells", DataTable)
        labels = [str(c.label) for c in table.ordered_columns]
        assert labels[-1] == "task" and "cell" in labels
        assert table.virtual_size.width <= table.size.width, (table.virtual_size, table.size)
        assert str(table.get_row_at(1)[1]).endswith("…")


async def test_a_copying_row_shows_its_measures_and_why_it_was_passed_over(make_app) -> None:
    """The fastest cell copies the prompt back: the table shows its copied share and its NLL
    marked "!", and the cursor on it (an arrow key, as the terminal sends it) says why the
    recommendation passed it over."""
    from tests.helpers.terminal import send

    data = _sweep()
    base, half, fast = data["cells"]
    base.update(copied=0.1, repetition=0.05, task_success=1.0)
    half.update(copied=0.12, repetition=0.05, task_success=1.0, tv_per_token=0.02)
    fast.update(copied=0.91, repetition=0.05, task_success=0.0, nll_delta=-0.2,
                tv_per_token=0.3)
    data["frontier"] = frontier_summary(data["cells"])
    remember(data)
    app = make_app(Settings())
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot)
        await pilot.press("escape")
        await pilot.press("w")
        await pilot.pause()
        table = app.screen.query_one("#sweep-cells", DataTable)
        labels = [str(c.label) for c in table.ordered_columns]
        row = {label: str(v) for label, v in zip(labels, table.get_row_at(2), strict=True)}
        assert (row["copied"], row["NLL given up"], row["task"]) == ("91.0%", "-0.200 !", "0.0%")
        assert row["TV/token"] == "0.300"
        await send(pilot, "\x1b[A\x1b[B\x1b[B")  # up, down, down: onto the copying row
        await pilot.pause()
        assert table.cursor_row == 2
        why = str(app.screen.query_one("#sweep-why", Static).render())
        assert "not recommended" in why and "copies the prompt: 91%" in why, why
        await send(pilot, "\x1b[A")  # up: an honest row says nothing
        await pilot.pause()
        assert str(app.screen.query_one("#sweep-why", Static).render()) == ""
