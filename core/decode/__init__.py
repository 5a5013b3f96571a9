"""The decode loop: the engine, its speculative and single-model rounds, the run's totals, per-round timers (what a step is made of is core/primitives/)."""
