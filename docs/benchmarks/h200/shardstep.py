"""`specdec-tui bench` on one rank's shard of the target, alone: the compute of a TP = 2 step
with no communication (issue 33's "TP = 1 step of the same shard").

A TP = 2 step costs its shard's compute plus its collectives; the untraced difference between
the TP = 2 step and this one is what sharding adds, which the traced TP = 2 run's priced comm
should match (docs/benchmarks/h200/tp_report.py checks it). Here the target is sharded as
rank RANK (default 0) of SHARDS (default 2) with mlx-lm's own shard(), in one process, and
every all_sum returns its input: the same matmuls on the same shapes as that rank runs, no
collective (the text is noise: each layer adds half its sums; only the times count).

Usage (one GPU, from the repo root, PYTHONPATH=/tmp/site:$PWD on the device):
  python3 docs/benchmarks/h200/shardstep.py bench --target shape:qwen2.5-72b,layers=40 \
      --draft shape:qwen2.5-0.5b --profile target-only --json shard.json ...
Only target-only rows mean anything: a speculative row would verify the draft against noise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repo root, for `core`

import mlx.core as mx  # noqa: E402


class OneRankOf:
    """What mlx-lm's shard() asks of a group (its size and this rank), without joining one."""

    def __init__(self, size: int, rank: int) -> None:
        self._size, self._rank = size, rank

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank


def alone(x: mx.array, *args: Any, **kwargs: Any) -> mx.array:
    """An all_sum with no peers: this rank's partial sums stand in for the total."""
    return x


def main(argv: list[str]) -> int:
    from core.decode.engine import Engine
    from core.runtime.distributed import shard_model

    shards, rank = int(os.environ.get("SHARDS", "2")), int(os.environ.get("RANK", "0"))
    group = OneRankOf(shards, rank)
    mx.distributed.all_sum = alone  # the sharded layers look it up at call time
    plain = Engine.from_pair.__func__  # type: ignore[attr-defined]

    def from_pair(cls: type[Engine], pair: Any) -> Engine:
        shard_model(pair.target.model, group, pair.target.name)
        print(f"shardstep: the target sharded as rank {rank} of {shards}, no collectives",
              file=sys.stderr)
        return plain(cls, pair)

    Engine.from_pair = classmethod(from_pair)  # type: ignore[method-assign,assignment]
    from core.cli import main as cli

    return cli(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
