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
