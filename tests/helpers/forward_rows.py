"""A faked H200 and CPU (the hardware query, never the maths), and a recorder of the rows each
forward of a given model runs: the warm-up and warmer tests count what a warm-up compiles by
the row counts its forwards ran, per model of the tiny random-weight pair."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator

from core.dispatch.backend import backend_info

H200 = backend_info(query=lambda: ("cuda", {"device_name": "NVIDIA H200",
                                            "compute_capability_major": 9,
                                            "compute_capability_minor": 0}))
CPU = backend_info(query=lambda: ("cpu", {}))


@contextlib.contextmanager
def forward_rows(**models: object) -> Iterator[defaultdict[str, list[int]]]:
    """While the block runs, the row count of every forward of each model, under its keyword
    (`forward_rows(target=t, draft=d)`: rows["target"], rows["draft"]).

    Each model instance's class is swapped for a recording subclass and restored after, so
    two models of one class (a self-draft's) are told apart, and no other instance records."""
    rows: defaultdict[str, list[int]] = defaultdict(list)
    classes = {}
    for role, model in models.items():
        cls = classes[role] = type(model)

        def call(self, inputs, *a, _role=role, _cls=cls, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
            rows[_role].append(int(inputs.shape[1]))
            return _cls.__call__(self, inputs, *a, **kw)

        model.__class__ = type(f"Recording{cls.__name__}", (cls,), {"__call__": call})
    try:
        yield rows
    finally:
        for role, model in models.items():
            model.__class__ = classes[role]
