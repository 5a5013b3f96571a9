"""Make the README screenshot: a real chat on the default pair, saved as SVG by Textual.

`python -m tui.screenshot docs/screenshot.svg` drives the app headless (App.run_test) with
the real engine, so the picture shows real rounds, timings and acceptance, not a mock-up.
`python -m tui.screenshot --set docs/screenshots` writes the README's set: every panel, the
numbers behind the plots, and two runs side by side (two chats and a calibration first).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from core.settings import Settings

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from tui.app import SpecDecApp


async def _until(pilot: Pilot, cond: Callable[[], bool], timeout: float) -> None:
    """Poll until `cond` holds: a real pair loads and answers in seconds to minutes."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not get there in time")
        await pilot.pause(0.1)


async def _loaded(app: SpecDecApp, pilot: Pilot) -> None:
    """Wait for the pair (a load error ends the command); no blinking cursor in the pictures."""
    await _until(pilot, lambda: app.info is not None or bool(app._notifications), 600)
    if app.info is None:
        raise SystemExit("; ".join(n.message for n in app._notifications))
    for box in [*app.query("Input"), *app.query("TextArea")]:
        box.cursor_blink = False  # type: ignore[attr-defined]


async def _send(app: SpecDecApp, pilot: Pilot, text: str) -> None:
    """Ask `text` in the chat and wait for its run to finish."""
    before = len(app.runs_state.runs)
    app.query_one("#prompt").value = text  # type: ignore[attr-defined]
    await pilot.press("enter")
    await _until(pilot, lambda: app.run_id is None and len(app.runs_state.runs) == before + 1, 900)


async def _save(app: SpecDecApp, pilot: Pilot, path: Path) -> None:
    """Let the view settle and the notifications go, then write the SVG."""
    await pilot.pause(0.3)
    app.clear_notifications()
    await pilot.pause(0.3)
    app.save_screenshot(filename=path.name, path=str(path.parent))


async def _shoot(path: Path, prompt: str, settings: Settings, panel: str, size: tuple[int, int],
                 show_rejected: bool) -> None:
    from tui.app import SpecDecApp

    app = SpecDecApp(settings)
    async with app.run_test(size=size) as pilot:
        await _loaded(app, pilot)
        await _send(app, pilot, prompt)
        app.show_rejected = show_rejected
        app.show_panel(panel)
        await _save(app, pilot, path)


SET_SECOND_K = 8  # the second run of the set, so the two runs side by side differ


async def _shoot_set(directory: Path, prompt: str, settings: Settings,
                     size: tuple[int, int]) -> list[Path]:
    """One chat, a calibration, a second chat with another k; then one SVG per view."""
    from tui.app import SpecDecApp

    app = SpecDecApp(settings)
    written: list[Path] = []

    async def shoot(name: str) -> None:
        await _save(app, pilot, directory / f"{name}.svg")
        written.append(directory / f"{name}.svg")

    async with app.run_test(size=size) as pilot:
        await _loaded(app, pilot)
        await _send(app, pilot, prompt)
        app.action_calibrate()
        await _until(pilot, lambda: app.curve is not None and not app.calibrating, 900)
        app.apply(k=SET_SECOND_K)
        await _send(app, pilot, prompt)  # the same question again, drafting twice as far
        for panel in ("rounds", "acceptance", "kernels", "profile"):
            app.show_panel(panel)
            await shoot(panel)
        app.action_toggle_plots()
        for panel in ("acceptance", "kernels"):
            app.show_panel(panel)
            await shoot(f"{panel}-numbers")
        app.action_toggle_plots()
        app.action_compare_runs()
        await shoot("compare")
    return written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", nargs="?", default="docs/screenshot.svg")
    p.add_argument("--prompt", default="Write two sentences about a greenhouse on the Moon.")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--rule", default="greedy", help="greedy keeps the text readable")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--tv", type=float, default=0.0)
    p.add_argument("--panel", default="rounds")
    p.add_argument("--width", type=int, default=160)
    p.add_argument("--height", type=int, default=45)
    p.add_argument("--show-rejected", action="store_true", help="rejected drafts struck through")
    p.add_argument("--set", dest="set_dir", default=None, metavar="DIR",
                   help="write the README's set of screenshots into DIR instead")
    args = p.parse_args()
    settings = Settings(max_tokens=args.max_tokens, tv_budget=args.tv, rule=args.rule, k=4,
                        temperature=args.temperature, seed=1)
    if args.set_dir is not None:
        directory = Path(args.set_dir)
        directory.mkdir(parents=True, exist_ok=True)
        size = (args.width, args.height)
        for written in asyncio.run(_shoot_set(directory, args.prompt, settings, size)):
            print(f"wrote {written}")
        return
    path = Path(args.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_shoot(path, args.prompt, settings, args.panel, (args.width, args.height),
                       args.show_rejected))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
