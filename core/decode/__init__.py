"""The decode loop: the engine, its speculative and single-model rounds, the run's totals,
per-round timers (what a step is made of is core/primitives/).

Its modules are its API (`engine.Engine` above all), imported by their own names: nothing is
re-exported, so importing the timers does not load the engine."""

__all__: list[str] = []
