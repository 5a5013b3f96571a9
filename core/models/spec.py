"""Spec options: ``prefix:NAME,k=v,flag`` split apart, and each value checked in one sentence.

``self:`` and ``shape:`` specs share this small grammar and the quantization values they
accept (bits, group width), so a mistake reads the same whichever one the user typed.
"""

from __future__ import annotations

from core.models.loaded import ModelLoadError

QUANT_BITS = (2, 3, 4, 5, 6, 8)
QUANT_GROUPS = (32, 64, 128)


def parse_options(spec: str, prefix: str) -> tuple[str | None, dict[str, str]]:
    """Split ``prefix:NAME,k=v,flag`` into (NAME or None, {k: v, flag: ""})."""
    body = spec[len(prefix) :]
    head, *rest = body.split(",") if body else [""]
    options: dict[str, str] = {}
    name: str | None = None
    for i, part in enumerate([head, *rest]):
        part = part.strip()
        if not part:
            continue
        if "=" in part:
            k, v = part.split("=", 1)
            options[k.strip()] = v.strip()
        elif i == 0:
            name = part
        else:
            options[part] = ""
    return name, options


def int_option(
    spec: str, options: dict[str, str], key: str, default: int | None = None
) -> int | None:
    """``options[key]`` as an int (``default`` when absent); a non-integer is refused."""
    if key not in options:
        return default
    try:
        return int(options[key])
    except ValueError:
        raise ModelLoadError(
            f"In {spec!r}, {key} must be an integer, got {options[key]!r}."
        ) from None


def check_quantization(spec: str, bits: int | None, group: int) -> None:
    """Refuse bits mlx cannot quantize to and group widths it has no kernels for.

    ``bits=None`` (a dense model) checks the group only.
    """
    if bits is not None and bits not in QUANT_BITS:
        raise ModelLoadError(f"{spec} needs bits in {', '.join(map(str, QUANT_BITS))}.")
    if group not in QUANT_GROUPS:
        raise ModelLoadError(f"{spec} needs group 32, 64 or 128.")
