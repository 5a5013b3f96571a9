"""A sharded target's collectives in the trace: priced, not waited for.

Waiting around every collective (two a
layer) serialised what an untraced round overlaps: a traced TP = 2 round of a 72B shape cut to
40 layers took 48 ms on two H200s against 14.4 ms untraced. So in traced rounds each
`mx.distributed.all_sum` (which the sharded layers look up at call time) is queued as it
comes, with no sync, and charged a price: the seconds one collective of its size class (its
bytes rounded up to a power of two, at least 4 KiB) costs, probed once per process and carved
out of the phase it was queued in as "comm" (core/decode/trace.py). Untraced rounds pass
straight through.

How a price is probed, and why so:
- After the round that first queued a size class, once its clock has stopped (never in the middle
  of the graph a round is building, nor inside any phase): every rank reaches that point with
  the same sizes in the same order, as they run the same loop on the same shapes, so the
  probe's collectives pair up across ranks like every other collective.
- A burst of PROBE_CHAIN chained collectives queued at once and timed with one sync, per
  collective, the fastest of PROBE_BURSTS, each burst after one untimed collective where the
  ranks meet: that is how a round queues them, and the fastest burst is the one least
  disturbed by whatever else the machine ran. Single collectives timed with a sync each (the
  first design, 0b626bd, reverted by 487c547) priced the ranks' rendezvous instead: on a busy
  2-core machine tens of ms for an all_sum of a few floats (40-325 ms a round), more than the
  phase it was carved out of, which then read 0 (the flaky ring test's `verify` 0.0: a 20-run
  loop of that code here read it in its first run, on both ranks).
- The least of the ranks' prices, shared (one all_gather more): a collective ends on every
  rank at once, so they charge it alike, and every rank's trace prices the same rounds the
  same. The least, not the mean: a rank that set off first waits in its burst for the other
  to arrive, so its time holds a rendezvous the rounds do not pay; a mean of three bursts
  priced a whole verification as comm on a loaded 2-core machine (`verify` 0.0, comm 32 ms).

The SPMD wrapper installs the meter (core/runtime/distributed.py, `Spmd.install`); the round's
timer reads the prices once its clock stops (core/decode/trace.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import mlx.core as mx

_plain_all_sum: Callable[..., mx.array] | None = None
_prices: dict[int, float] = {}  # size class (bytes) -> seconds, shared by the ranks
PROBE_CHAIN = 4  # collectives per timed burst
PROBE_BURSTS = 5  # timed bursts per size class (the fastest is the price)
SMALLEST_CLASS = 4096  # bytes: below this a collective costs its latency (NCCL and ring alike)


def size_class(shape: tuple[int, ...], dtype: mx.Dtype) -> int:
    """The bytes a collective of `shape` and `dtype` is priced at: its size rounded up to a
    power of two, at least SMALLEST_CLASS. One probe per class, not per shape: a round's
    collectives come in many shapes (every row count, every agreed vector) that cost alike,
    and each probe is a dozen collectives every rank must run."""
    n = dtype.size
    for d in shape:
        n *= int(d)
    return max(SMALLEST_CLASS, 1 << max(n - 1, 0).bit_length())


def collective_price(shape: tuple[int, ...], dtype: mx.Dtype, group: Any = None) -> float:
    """Seconds one all_sum of `shape` and `dtype` costs over `group`, the same on every rank:
    its size class probed the first time (collectives of its own: every rank must ask for the
    same sizes in the same order, as the traced rounds do), then remembered for the process."""
    key = size_class(shape, dtype)
    if key not in _prices:
        _prices[key] = _probe(key, group)
    return _prices[key]


def _probe(nbytes: int, group: Any) -> float:
    """Seconds per all_sum of `nbytes` (float32): on each rank the fastest of PROBE_BURSTS
    bursts, each after a meeting collective; the least over the ranks."""
    assert _plain_all_sum is not None, "the collectives' meter is not installed"
    plain = _plain_all_sum
    kw = {} if group is None else {"group": group}
    z = mx.zeros((nbytes // 4,), dtype=mx.float32)

    def burst() -> mx.array:
        y = z
        for _ in range(PROBE_CHAIN):  # each waits for the last, as a forward's do
            y = plain(y, **kw)
        return y

    mx.eval(z)
    times = []
    for _ in range(PROBE_BURSTS):
        mx.eval(plain(z, **kw))  # untimed: the ranks meet here, wherever each was
        mx.synchronize()
        t0 = time.perf_counter()
        mx.eval(burst())
        times.append((time.perf_counter() - t0) / PROBE_CHAIN)
    every = mx.distributed.all_gather(mx.array([min(times)], dtype=mx.float32), **kw)
    return float(mx.min(every).item())


def comm_prices() -> dict[int, float]:
    """The prices probed so far: size class (bytes) -> seconds (a bench's `sharded` record)."""
    return dict(_prices)


def reset_comm_prices() -> None:
    """Forget every probed price: the next traced round probes again, as a new process
    would (tests; every rank must reset at the same point of the loop)."""
    _prices.clear()


def install_comm_meter() -> None:
    """Price `mx.distributed.all_sum` in traced rounds (once per process; see the module
    docstring). It never syncs: a traced round gets a price to read when it finishes, an
    untraced one nothing but one Python call more."""
    global _plain_all_sum
    if _plain_all_sum is not None:
        return
    from core.decode.trace import active_timer

    plain = _plain_all_sum = mx.distributed.all_sum

    @functools.wraps(plain)
    def all_sum(x: mx.array, *args: Any, **kwargs: Any) -> mx.array:
        timer = active_timer()
        if timer is not None:
            shape, dtype, group = tuple(x.shape), x.dtype, kwargs.get("group")
            timer.add_comm(lambda: collective_price(shape, dtype, group))
        return plain(x, *args, **kwargs)

    mx.distributed.all_sum = all_sum


def uninstall_comm_meter() -> None:
    """Put MLX's own all_sum back and forget the prices (tests)."""
    global _plain_all_sum
    if _plain_all_sum is not None:
        mx.distributed.all_sum = _plain_all_sum
        _plain_all_sum = None
    _prices.clear()
