"""Issue 16 in the app: the plots in the Kernels and Acceptance panels (and `v` back to their
numbers), and the screen that sets any two runs side by side."""

from __future__ import annotations

from textual.widgets import DataTable, Select

from core.profile import Profile
from core.settings import Settings
from tests.helpers.app import blur_input, chat, ready, wait_for
from tests.helpers.app_turns import calibrated_kernels
from tui.engine_info import CurveInfo
from tui.screens.compare import (
    ComparedRun,
    CompareScreen,
    phase_shares,
    result_rows,
    settings_rows,
)
from tui.stats import RoundStats
from tui.widgets.acceptance import AcceptancePanel
from tui.widgets.composer import Composer
from tui.widgets.curve_plot import CurvePlot, curve_series
from tui.widgets.kernels import KernelsPanel
from tui.widgets.plot_base import StaticPlot
from tui.widgets.position_plot import PositionPlot, position_series

SIZE = (160, 45)


# ---------------------------------------------------------------------------------- plots


def test_curve_series_marks_the_boundaries_and_this_rounds_rows() -> None:
    curve = CurveInfo(t_verify={1: 0.010, 2: 0.020, 4: 0.030, 8: 0.032}, boundary=4,
                      predicted_boundary=8)
    s = curve_series(curve, 4)
    assert s.rows == (1, 2, 4, 8) and s.ms == (10.0, 20.0, 30.0, 32.0)
    assert (s.boundary, s.predicted_boundary, s.current, s.current_ms) == (4, 8, 4, 30.0)
    missing = curve_series(curve, 5)  # rows the calibration did not measure
    assert missing.current is None and missing.unmeasured_current == 5


def test_position_series_keeps_positions_never_reached() -> None:
    from core.events import CommittedToken, RoundEvent

    stats = RoundStats()
    stats.add(RoundEvent(0, (CommittedToken(1, "accepted"), CommittedToken(2, "corrected")),
                         proposed=4, accepted=1, rows=5, source="model"))
    s = position_series(stats)
    assert s.positions == (1, 2, 3, 4)
    assert s.rates == (1.0, 0.0, 0.0, 0.0) and s.reached == (1, 1, 0, 0)


async def test_plots_by_default_and_v_shows_the_numbers(make_app) -> None:
    app = make_app(Settings(k=4))
    async with app.run_test(size=SIZE) as pilot:
        await calibrated_kernels(pilot)
        kernels = app.query_one(KernelsPanel)
        plot = kernels.query_one(CurvePlot)
        table = kernels.query_one("#curve-table", DataTable)
        assert plot.display and not table.display
        series = plot.series
        assert series is not None and series.rows == tuple(range(1, 10))
        assert series.current == app.runs_state.stats.last.rows == 5  # k + 1 rows this round
        assert series.boundary == 8
        assert not plot.query_one(StaticPlot).can_focus  # + - r and arrows stay the app's

        await blur_input(pilot)
        await pilot.press("v")
        assert not plot.display and table.display and table.row_count == 9
        app.show_panel("acceptance")
        await pilot.pause()
        acceptance = app.query_one(AcceptancePanel)
        assert acceptance.query_one("#acc-positions").display
        assert not acceptance.query_one(PositionPlot).display
        app.query_one("#prompt", Composer).focus()
        await pilot.press("alt+v")  # the while-typing form
        assert acceptance.query_one(PositionPlot).display
        assert not acceptance.query_one("#acc-positions").display
        positions = acceptance.query_one(PositionPlot).series
        assert positions is not None
        assert positions.positions == (1, 2, 3, 4)
        assert list(positions.rates) == [r or 0.0 for r in app.runs_state.stats.per_position]
        assert plot.display and not table.display


async def test_plot_follows_the_rows_of_the_latest_round(make_app) -> None:
    app = make_app(Settings(k=2))
    async with app.run_test(size=SIZE) as pilot:
        await calibrated_kernels(pilot)
        assert app.query_one(CurvePlot).series.current == 3
        app.apply(k=6)
        await chat(pilot, "again")
        await pilot.pause()
        assert app.query_one(CurvePlot).series.current == 7


# ---------------------------------------------------------------------------------- compare


def _run(label: str, settings: Settings, summary) -> ComparedRun:  # noqa: ANN001
    return ComparedRun(f"live:{label}", label, settings, summary, {"backend": "cpu",
                                                                   "device_name": "x"})


def test_settings_and_results_highlight_what_differs() -> None:
    from tests.helpers.app import FakeSession, Script, summarize

    session = FakeSession(Script(rounds=4), "t", "d")
    ids = iter(range(1, 1000))
    rounds_a = [session._round(i, Settings(k=4), lambda: next(ids)) for i in range(4)]
    rounds_b = [session._round(i, Settings(k=6), lambda: next(ids)) for i in range(4)]
    a = _run("a", Settings(k=4), summarize(rounds_a, Settings(k=4), "length", 3))
    b = _run("b", Settings(k=6, tv_budget=0.5), summarize(rounds_b, Settings(k=6), "length", 3))
    rows = {str(r[0]).strip("≠ "): r for r in settings_rows(a, b)}
    assert str(rows["k"][0]).startswith("≠") and (str(rows["k"][1]), str(rows["k"][2])) == ("4",
                                                                                            "6")
    assert str(rows["tv_budget"][0]).startswith("≠")
    assert not str(rows["mode"][0]).startswith("≠")
    assert rows["k"][1].style == "bold yellow" and rows["mode"][1].style == ""
    results = {str(r[0]): r for r in result_rows(a, b)}
    assert str(results["tokens"][1]) == str(a.summary.tokens)
    assert str(results["tokens"][2]) == str(b.summary.tokens)
    assert str(results["acceptance"][3]).endswith("x")
    shares = phase_shares(a.summary)
    assert shares is not None and abs(sum(shares.values()) - 1.0) < 1e-9
    assert shares["verify"] > shares["draft"] > shares["sample"]
    assert phase_shares(None) is None


async def test_compare_screen_from_key_panel_and_palette(make_app, profiles) -> None:
    app = make_app(Settings(k=4))
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot, "first")
        assert app.save_profile("tight") == "tight"
        app.apply(k=6, tv_budget=0.5)
        await chat(pilot, "second")
        await blur_input(pilot)
        await pilot.press("x")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        a, b = screen.pair
        assert (a.label, b.label) == ("run 1 (this session)", "run 2 (this session)")
        assert (a.settings.k, b.settings.k) == (4, 6)
        settings = screen.query_one("#cmp-settings", DataTable)
        assert settings.row_count > 20
        differing = [str(settings.get_row_at(i)[0]) for i in range(settings.row_count)
                     if str(settings.get_row_at(i)[0]).startswith("≠")]
        assert differing == ["≠ tv_budget", "≠ k"]
        assert screen.query_one("#cmp-phases", DataTable).row_count == 5

        # B: the saved profile instead of the second run
        screen.query_one("#pick-b", Select).value = "profile:tight"
        await pilot.pause()
        assert screen.pair[1].label == "tight" and screen.pair[1].settings.k == 4
        assert screen.pair[1].summary is not None  # its recorded run
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)

        app.show_panel("profile")
        await pilot.pause()
        await pilot.click("#open-compare")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        await pilot.press("escape")

        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        commands["Compare two runs side by side (this session's and saved profiles)"].callback()
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)


async def test_compare_a_profile_with_the_live_run_and_nothing_yet(make_app, profiles) -> None:
    from core.profile import ProfileStore

    ProfileStore(profiles, presets=None).save(Profile("plain", Settings(k=3)))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        app.action_compare_runs()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        # one profile, no run: A and B are the same profile, its numbers "-", no crash
        assert screen.pair is not None and screen.pair[0].summary is None
        note = str(screen.query_one("#compare-note").render())
        assert "plain has no recorded run" in note
        await pilot.press("escape")
        await chat(pilot)
        app.action_compare_runs()
        await pilot.pause()
        a, b = app.screen.pair
        assert (a.label, b.label) == ("plain", "run 1 (this session)")


async def test_compare_highlights_runs_of_different_models(make_app, profiles) -> None:
    """A run, then a profile with another target and a run on it: the compare screen says they
    ran different models and highlights which; the Profile panel names the loaded pair."""
    from core.profile import ProfileStore
    from tui.screens.compare import DIFF_STYLE
    from tui.widgets.profile_panel import ProfilePanel

    ProfileStore(profiles, presets=None).save(Profile("other", Settings(target="other.gguf")))
    app = make_app(Settings())
    async with app.run_test(size=SIZE) as pilot:
        await chat(pilot, "first")
        app.show_panel("profile")
        await pilot.pause()
        shown = " ".join(str(app.query_one("#profile-models").render()).split())
        assert ("target default (default, llama, 135M parameters, 30 layers, 4-bit g32 + "
                "8-bit x1, sha256 37a8eec1ce19)") in shown
        assert "draft self:bits=4 (self, llama" in shown and "specdec-tui 0.1.0 at 0123456789ab" in shown
        app.switch_profile("other")
        await pilot.pause()
        await pilot.press("enter")  # it names other models: load them (issue 29 asks first)
        await wait_for(pilot, lambda: app.info is not None and app.info.target_spec == "other.gguf")
        await chat(pilot, "second")
        assert "target other.gguf (gguf, llama" in str(app.query_one(ProfilePanel)
                                                        .query_one("#profile-models").render())
        app.action_compare_runs()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        a, b = screen.pair
        assert (a.summary.models["target"].spec, b.summary.models["target"].spec) == (
            "default", "other.gguf")
        note = " ".join(str(screen.query_one("#compare-note").render()).split())
        assert "they ran different models (target and draft)" in note
        table = screen.query_one("#cmp-results", DataTable)
        rows = {str(table.get_row_at(i)[0]): table.get_row_at(i) for i in range(table.row_count)}
        target = rows["≠ target"]
        assert (str(target[1]), str(target[2])) == ("default (default)", "other.gguf (gguf)")
        assert target[1].style == target[2].style == DIFF_STYLE
        assert "≠ target weights" in rows and "target size" in rows  # same shape, not same bytes
        assert rows["measured by"][1].style == ""


def test_runs_recorded_before_identities_compare_as_unknown_not_different() -> None:
    from tui.screens.compare import model_rows, models_differ

    a = _run("a", Settings(), None)
    b = _run("b", Settings(), None)
    assert models_differ(a, b) == []
    assert all(not str(r[0]).startswith("≠") for r in model_rows(a, b))


async def test_at_80_columns_the_compare_view_stacks_a_b_and_the_ratio(make_app) -> None:
    """Below 100 columns A, B and B/A stack in one cell and the sections one under another:
    at 80x24 the view showed run A alone, B and B/A only by scrolling sideways."""
    app = make_app(Settings(k=4))
    async with app.run_test(size=(80, 24)) as pilot:
        await chat(pilot, "first")
        app.apply(k=6, tv_budget=0.5)
        await chat(pilot, "second")
        await blur_input(pilot)
        await pilot.press("x")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen) and screen.narrow
        for name in ("#cmp-settings", "#cmp-results", "#cmp-phases"):
            table = screen.query_one(name, DataTable)
            assert table.virtual_size.width <= table.size.width, (name, table.virtual_size)
        body = screen.query_one("#compare-body")
        assert body.max_scroll_x == 0 and body.virtual_size.width <= 80
        results = screen.query_one("#cmp-results", DataTable)
        cells = [results.get_row_at(i)[1].plain for i in range(results.row_count)]
        tokens = next(c for c in cells if "B/A" in c)
        assert tokens.startswith("A ") and "\nB " in tokens
        settings = screen.query_one("#cmp-settings", DataTable)
        k_row = next(settings.get_row_at(i) for i in range(settings.row_count)
                     if settings.get_row_at(i)[0].plain.strip("≠ ") == "k")
        assert k_row[1].plain == "A 4\nB 6"
        await pilot.resize_terminal(200, 50)
        await pilot.pause()
        assert not screen.narrow and screen.query_one("#cmp-results", DataTable).ordered_columns[3]
