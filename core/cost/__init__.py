"""What a round costs and what to do about it: the draft-length policies, the measured guard,
the speedup prediction, the step-cost probe.

Its modules are its API (`policy`, `guard`, `arm`, `prediction`, `stepcost`), imported by
their own names: nothing is re-exported, so a reader of `arm` or `prediction` does not load
the policies and MLX with them."""

__all__: list[str] = []
