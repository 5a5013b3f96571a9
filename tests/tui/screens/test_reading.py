"""The sweep view's enter (tui/screens/reading.py): a frontier row's texts beside
target-only's for the same seeds, sent as the bytes a terminal sends (tests/helpers/
terminal.py). At 200x50 the two columns of each passage stand side by side in one scroll, so
they scroll together; at 80x24 one shows at a time and ←/→ switch it; `s` still applies the
row and esc goes back."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from core.settings import Settings
from core.sweep.last import remember
from tests.helpers.app import ready
from tests.helpers.reading import sample_sweep
from tests.helpers.terminal import ESC, send
from tui.screens.reading import ReadingScreen
from tui.screens.sweep import SweepScreen

DOWN, RIGHT, LEFT, PAGE_DOWN = f"{ESC}[B", f"{ESC}[C", f"{ESC}[D", f"{ESC}[6~"


async def _open(pilot, row: int) -> ReadingScreen:
    """esc out of the message box, `w`, the cursor to `row`, enter: the reading screen."""
    await send(pilot, ESC)
    await send(pilot, "w")
    screen = pilot.app.screen
    assert isinstance(screen, SweepScreen)
    table = screen.query_one("#sweep-cells", DataTable)
    while table.cursor_row < row:
        await send(pilot, DOWN)
    while table.cursor_row > row:
        await send(pilot, f"{ESC}[A")
    await send(pilot, "\r")
    reading = pilot.app.screen
    assert isinstance(reading, ReadingScreen)
    return reading


def _shown(screen: ReadingScreen, j: int) -> list[Static]:
    return [w for w in screen.query(f".col-{j}") if w.display]


async def test_enter_on_a_row_opens_its_texts_side_by_side_at_200x50(make_app) -> None:
    remember(sample_sweep(lines=40))  # taller than the screen
    app = make_app(Settings())
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        screen = await _open(pilot, 3)  # the cells in order: T=0.7 cost-aware TV=1
        assert screen.cell_id == "T=0.7 cost-aware TV=1"
        left, right = _shown(screen, 0), _shown(screen, 1)
        assert len(left) == len(right) == 2  # two seeds, both columns shown
        a, b = left[0].region, right[0].region
        assert a.y == b.y and a.x < b.x and a.width > 60 and b.width > 60  # side by side
        text = str(right[0].render())
        assert "▶3" in text and "leaves target-only's text at token 3" in text
        assert "<script>alert('x')</script>" in text  # shown as written, not interpreted
        assert "▶" not in str(left[0].render())
        scroll = screen.query_one("#reading-texts", VerticalScroll)
        await send(pilot, PAGE_DOWN)
        await send(pilot, PAGE_DOWN)
        assert scroll.scroll_y > 0  # one scroll moves both columns:
        assert left[1].region.y == right[1].region.y
        await send(pilot, ESC)
        assert isinstance(app.screen, SweepScreen)


async def test_at_80x24_one_column_shows_and_the_arrows_switch_it(make_app) -> None:
    remember(sample_sweep())
    app = make_app(Settings())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        screen = await _open(pilot, 4)  # fixed-8 TV=1: seed 1 has no text
        assert not _shown(screen, 0) and len(_shown(screen, 1)) == 2  # the cell's first
        assert _shown(screen, 1)[0].region.width > 70
        await send(pilot, LEFT)
        assert len(_shown(screen, 0)) == 2 and not _shown(screen, 1)
        assert "the reference" in str(_shown(screen, 0)[0].render())
        await send(pilot, RIGHT)
        assert "no text for this seed" in str(_shown(screen, 1)[1].render())
        await send(pilot, "c")
        assert _shown(screen, 0) and not _shown(screen, 1)
        await send(pilot, ESC)
        await send(pilot, "s")  # the row's setting, as enter used to
        assert not isinstance(app.screen, SweepScreen)
        assert (app.settings.tv_budget, app.settings.k) == (1.0, 8)
