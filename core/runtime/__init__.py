"""The machine around the loop: GPU compile warm-up (all first, or in the order of need) and
its watch, a run's calibration curve (kept or measured after a warm-up), the sharded (SPMD)
target and its collectives' meter.

Its modules are its API, imported by their own names: nothing is re-exported, so a caller of
the compile watch does not load the warm-up and the engine behind it."""

__all__: list[str] = []
