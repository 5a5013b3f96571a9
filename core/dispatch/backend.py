"""Which machine MLX runs on: backend, Metal generation and size, CUDA capability.

The dispatch rules, the profiles and the bench all read this one record, so a run is never
described two ways; `backend_info(query=...)` fakes the hardware in tests, never the rules.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

METAL_ARCH_ENV = "MLX_METAL_GPU_ARCH"


@dataclass(frozen=True)
class BackendInfo:
    """The hardware facts MLX's dispatch reads: backend, Metal generation/size, CUDA capability."""

    backend: str  # "metal" | "cuda" | "cpu"
    device_name: str = ""
    architecture: str = ""  # "applegpu_g15s", "sm_90", "x86_64"
    metal_generation: int | None = None  # 13 = M1 ... 17 = M5
    # MLX's own comment on the size letter (mlx/backend/metal/device.cpp): p phone, g base/pro,
    # s max, d ultra. Only 'd' (limits table), 'p' (NAX) and 's'/'d' (dense split-K) matter here.
    metal_size: str | None = None  # "p" | "g" | "s" | "d"
    cuda_capability: tuple[int, int] | None = None
    os_version: str = ""  # macOS version on Metal: NAX kernels need 26.2 or later
    # The device's memory in bytes (CUDA total_memory; Metal's recommended working set, else
    # its memory size; None on the CPU or when unknown): whether a dequantized copy of the
    # target's weights may be kept for the verification (core/dispatch/patches.py dense_fits)
    memory_bytes: int | None = None

    @classmethod
    def metal(cls, architecture: str, device_name: str = "", os_version: str = "") -> BackendInfo:
        """Parse an architecture like "applegpu_g15s" exactly as MLX's Device() does."""
        gen, size = _parse_metal_arch(architecture)
        return cls("metal", device_name, architecture, gen, size, None, os_version)

    @classmethod
    def cuda(cls, capability: tuple[int, int] | str, device_name: str = "") -> BackendInfo:
        """From (major, minor) or an architecture string like "sm_90"."""
        if isinstance(capability, str):
            arch = capability
            digits = "".join(ch for ch in capability if ch.isdigit())
            cap = (int(digits[:-1] or 0), int(digits[-1])) if digits else (0, 0)
        else:
            cap = (int(capability[0]), int(capability[1]))
            arch = f"sm_{cap[0]}{cap[1]}"
        return cls("cuda", device_name, arch, None, None, cap)

    @classmethod
    def cpu(cls, device_name: str = "", architecture: str = "") -> BackendInfo:
        return cls("cpu", device_name, architecture)

    @property
    def nax_available(self) -> bool:
        """MLX's is_nax_available(): macOS >= 26.2 and gen >= 17 (>= 18 for phones)."""
        if self.backend != "metal" or self.metal_generation is None:
            return False
        need = 18 if self.metal_size == "p" else 17
        return self.metal_generation >= need and _version_tuple(self.os_version) >= (26, 2)


def _parse_metal_arch(arch: str) -> tuple[int, str | None]:
    """Generation from the two characters before the last, size from the last (as MLX does)."""
    if len(arch) < 3:
        return 0, arch[-1:] or None
    tens, ones = arch[-3], arch[-2]
    gen = (int(tens) if tens.isdigit() else 0) * 10 + (int(ones) if ones.isdigit() else 0)
    return gen, arch[-1]


def _version_tuple(v: str) -> tuple[int, ...]:
    parts = []
    for p in v.split("."):
        if not p.isdigit():
            break
        parts.append(int(p))
    return tuple(parts)


def mlx_device_query() -> tuple[str, dict[str, Any]]:
    """The running backend and mx.device_info() (the real query that tests replace)."""
    dev = mx.default_device()
    info: dict[str, Any] = dict(mx.device_info())
    if dev.type == mx.DeviceType.cpu:
        return "cpu", info
    if mx.cuda.is_available():
        return "cuda", info
    info.setdefault("os_version", platform.mac_ver()[0])
    return "metal", info


def backend_info(
    query: Callable[[], tuple[str, Mapping[str, Any]]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BackendInfo:
    """What this process runs on; `query` fakes the hardware in tests (the rules stay real).

    On Metal, MLX_METAL_GPU_ARCH overrides the architecture, as it does inside MLX.
    """
    kind, info = (query or mlx_device_query)()
    env = os.environ if environ is None else environ
    name = str(info.get("device_name", ""))
    arch = str(info.get("architecture", ""))
    if kind == "metal":
        arch = env.get(METAL_ARCH_ENV) or arch
        b = BackendInfo.metal(arch, name, str(info.get("os_version", "")))
        memory = _bytes(info.get("max_recommended_working_set_size") or info.get("memory_size"))
        return dataclasses.replace(b, memory_bytes=memory)
    if kind == "cuda":
        major = info.get("compute_capability_major")
        minor = info.get("compute_capability_minor")
        memory = _bytes(info.get("total_memory"))
        if major is not None:
            b = BackendInfo.cuda((int(major), int(minor or 0)), name)
            return BackendInfo("cuda", name, arch or b.architecture, None, None, b.cuda_capability,
                               memory_bytes=memory)
        return dataclasses.replace(BackendInfo.cuda(arch or "sm_00", name), memory_bytes=memory)
    if kind == "cpu":
        return BackendInfo.cpu(name, arch)
    raise ValueError(f"unknown backend {kind!r}")


def _bytes(value: Any) -> int | None:
    """A memory size from mx.device_info() (an int, or absent), None where it is not one."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


@functools.lru_cache(maxsize=1)
def current_backend() -> BackendInfo:
    """backend_info() of this process, asked once (the device does not change under us)."""
    return backend_info()


def backend_name() -> str:
    """The backend's name ("metal", "cuda", "cpu"), as profiles, bench reports and the app show it."""
    return current_backend().backend
