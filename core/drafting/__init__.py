"""Draft sources (the drafter seam): the protocol, the registry, the per-source plan, the model and lookup drafters."""
