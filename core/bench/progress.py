"""The progress bars of `bench` and `sweep` on a terminal: what they show before the first step
is counted, and how long is left.

Why a module of its own: both commands drew `{task.completed}/{task.total}`, which read `0/None`
for the ~20 s a bench warms up and calibrates before it knows its step count.
"""

from __future__ import annotations

from typing import Any

from rich.progress import ProgressColumn, Task
from rich.text import Text


class StepsColumn(ProgressColumn):
    """`done/total` once the total is known; until then what the run is doing instead."""

    def __init__(self, before: str = "preparing") -> None:
        super().__init__()
        self.before = before

    def render(self, task: Task) -> Text:
        if task.total is None:
            return Text(self.before, style="dim")
        return Text(f"{int(task.completed)}/{int(task.total)}")


def steps_text(task: Any, before: str = "preparing") -> str:
    """What StepsColumn shows for `task`, as plain text (the tests read it)."""
    return StepsColumn(before).render(task).plain


def time_left(done: int, total: int | None, elapsed_s: float) -> str:
    """The time left at the pace so far, from the first step on: rich's own column said
    `-:--:--` until it had 30 s of steps, for the first half of a CPU sweep."""
    if not total or done <= 0:
        return "left: after the first step"
    return f"left ~{duration(elapsed_s / done * max(total - done, 0))}"


class LeftColumn(ProgressColumn):
    """The task's `left` field (time_left), dim; empty until it is set."""

    def render(self, task: Task) -> Text:
        return Text(str(task.fields.get("left", "")), style="dim")


def duration(seconds: float) -> str:
    """12 s, 4 min 10 s, 3 h 20 min."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
