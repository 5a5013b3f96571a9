"""The decode loop: the engine, the pair's caches and draft sources it keeps, its speculative
and single-model rounds, the run's state and totals, per-round timers (what a step is made
of is core/primitives/).

Its modules are its API (`engine.Engine` above all), imported by their own names: nothing is
re-exported, so importing the timers does not load the engine."""

__all__: list[str] = []
