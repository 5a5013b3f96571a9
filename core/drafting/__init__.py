"""Draft sources (the drafter seam): the protocol, the registry, the per-source plan, the
model and lookup drafters.

Its modules are its API (`base`, `registry`, `plan`, `model`, `lookup`), imported by their
own names: the settings read the registry, and re-exporting the drafters here would load MLX
with it."""

__all__: list[str] = []
