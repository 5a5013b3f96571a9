"""A faked GPU whose quantized-GEMM kernels are not compiled yet, and a recorder of the rows
each forward runs: shared by the narrow start's core and app tests (issue 31).

Only the machine is faked (the backend query and MLX's kernel cache folder); the forwards run
for real on the tiny random-weight pair.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.dispatch.backend import BackendInfo, backend_info

A100 = backend_info(query=lambda: ("cuda", {"device_name": "NVIDIA A100",
                                            "compute_capability_major": 8,
                                            "compute_capability_minor": 0}))


def record_rows(monkeypatch: pytest.MonkeyPatch, cls: type) -> list[int]:
    """The row count of every forward of models of class `cls`, in order."""
    rows: list[int] = []
    original = cls.__call__

    def recording(self, inputs, *args, **kw):  # noqa: ANN001, ANN002, ANN003
        rows.append(int(inputs.shape[-1]))
        return original(self, inputs, *args, **kw)

    monkeypatch.setattr(cls, "__call__", recording)
    return rows


def cold_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
             backend: BackendInfo = A100) -> list[int]:
    """This process on `backend` with an empty kernel cache and curve folder; the rows of
    every llama forward from now on."""
    from mlx_lm.models import llama

    import core.dispatch.backend as backend_module

    monkeypatch.setattr(backend_module, "current_backend", lambda: backend)
    monkeypatch.setenv("MLX_PTX_CACHE_DIR", str(tmp_path / "ptx"))
    monkeypatch.setenv("SPECDEC_TUI_CURVES", str(tmp_path / "curves"))
    return record_rows(monkeypatch, llama.Model)
