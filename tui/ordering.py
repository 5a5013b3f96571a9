"""RunSequencer: a run's messages handed on in the order the engine posted them, whatever order
they arrive in.

The engine thread numbers each message of a run (`seq` 0, 1, 2, ...) and its RunFinished
carries the number of messages posted before it, so the finish is last by construction. The app
feeds every run message through one sequencer: a round that arrives after its run's finish,
or a run's messages interleaved with the next run's, are held until the gap before them fills.
So a run is never finished, recorded or compared before every one of its rounds was counted.
Pure Python (no Textual) so it can be tested with adversarial orders directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class RunMessage(Protocol):
    """Any message of a run: its run id and its place in the run's sequence."""

    run_id: int
    seq: int


@dataclass
class _Pending:
    next_seq: int = 0
    held: dict[int, tuple[RunMessage, bool]] = field(default_factory=dict)


class RunSequencer:
    """Releases each run's messages in `seq` order; a run's state is dropped once it ends."""

    def __init__(self) -> None:
        self._runs: dict[int, _Pending] = {}
        self._ended: set[int] = set()

    def push(self, message: RunMessage, ends_run: bool = False) -> list[RunMessage]:
        """Take one message; return those now due, in order (maybe none, maybe several).

        `ends_run` marks the message that ends its run (RunFinished): the run's state is freed
        once it is released. A message delivered twice, or of a run that ended, is dropped;
        one without a place (seq < 0: not posted by the engine thread) passes straight on."""
        if message.seq < 0:
            return [message]
        if message.run_id in self._ended:
            return []
        run = self._runs.setdefault(message.run_id, _Pending())
        if message.seq < run.next_seq or message.seq in run.held:
            return []
        run.held[message.seq] = (message, ends_run)
        out: list[RunMessage] = []
        while run.next_seq in run.held:
            item, ends = run.held.pop(run.next_seq)
            run.next_seq += 1
            out.append(item)
            if ends:
                self._end(message.run_id)
                break
        return out

    def waiting(self, run_id: int) -> int:
        """How many of `run_id`'s messages are held for an earlier one (0 when none)."""
        run = self._runs.get(run_id)
        return len(run.held) if run else 0

    def _end(self, run_id: int) -> None:
        self._runs.pop(run_id, None)
        self._ended.add(run_id)
        if len(self._ended) > 10_000:  # run ids only grow: remember the latest thousand
            self._ended = set(sorted(self._ended)[-1_000:])
