"""ModelIdentity: which models a record ran, as plain data any layer can read and write.

Built from a loaded model by core/models/identify.py (which needs MLX); here only the value,
its text and its JSON, so core.events and the readers of saved runs stay below core.models.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

KINDS = ("default", "gguf", "folder", "hub", "self", "shape", "unknown")
UNKNOWN = "unknown"


@dataclass(frozen=True)
class ModelIdentity:
    """A model as it ran: spec, kind, architecture, size, quantization, and its bytes' origin.

    `sha256` is the weights file's digest (for a folder of several files: the digest of their
    `sha256sum` listing, sorted by name); a self-draft carries its target's, with `base`
    naming that target's spec; a shape has none, its `shape` and `seed` draw the same weights.
    `tensor_bits` counts weight matrices (linear layers and embeddings) per bit width,
    "dense" for unquantized ones: more than one key means mixed precision.
    """

    spec: str
    kind: str = UNKNOWN
    name: str = ""
    architecture: str | None = None
    parameters: int | None = None
    layers: int | None = None
    bits: int | None = None  # the commonest bit width of the quantized matrices; None: dense
    group_size: int | None = None
    tensor_bits: tuple[tuple[str, int], ...] = ()
    sha256: str | None = None
    revision: str | None = None  # a Hub model's commit
    base: str | None = None  # a self-draft's target spec
    shape: str | None = None
    seed: int | None = None
    random_weights: bool = False

    # -- reading ----------------------------------------------------------------------------

    @property
    def quantization(self) -> str:
        """'4-bit g64', 'dense', or the commonest width with the others: '4-bit g32 + 8-bit x1'."""
        counts = dict(self.tensor_bits)
        if self.bits is None:
            main = "dense" if counts or self.kind != UNKNOWN else UNKNOWN
        else:
            main = f"{self.bits}-bit g{self.group_size}" if self.group_size else f"{self.bits}-bit"
        others = [
            (k, n) for k, n in self.tensor_bits if k != (str(self.bits) if self.bits else "dense")
        ]
        if not others:
            return main
        return main + "".join(f" + {k if k == 'dense' else k + '-bit'} x{n}" for k, n in others)

    @property
    def origin(self) -> str:
        """What pins the weights: the sha256, the shape and seed, or the target derived from."""
        if self.shape is not None:
            pins = f"shape {self.shape}, seed {self.seed}"
        elif self.sha256:
            pins = f"sha256 {self.sha256[:12]}"
            if self.revision:
                pins += f", revision {self.revision[:12]}"
        else:
            pins = "sha256 unknown"
        return f"derived from {self.base}: {pins}" if self.base is not None else pins

    def summary(self) -> str:
        """One line: 'shape:tiny (shape, llama, 107k parameters, 2 layers, 4-bit g64, shape
        tiny, seed 0)'."""
        if self.kind == UNKNOWN:
            return f"{self.spec} (unknown)"
        parts = [self.kind, self.architecture or "architecture unknown",
                 f"{human_count(self.parameters)} parameters",
                 "? layers" if self.layers is None
                 else f"{self.layers} layer{'' if self.layers == 1 else 's'}",
                 self.quantization, self.origin]
        return f"{self.spec} ({', '.join(parts)})"

    # -- (de)serialising ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tensor_bits"] = dict(self.tensor_bits)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelIdentity:
        """Tolerant: keys it does not know are ignored, missing ones read as unknown."""
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in d.items() if k in known}
        kept["spec"] = str(kept.get("spec", UNKNOWN))
        tb = kept.get("tensor_bits") or {}
        kept["tensor_bits"] = tuple((str(k), int(v)) for k, v in dict(tb).items())
        return cls(**kept)


def human_count(n: int | None) -> str:
    """107k, 135M, 72.7B; '?' when unknown."""
    if n is None:
        return "?"
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            value = n / div
            return f"{value:.3g}{unit}"
    return str(n)


def identities_from_dict(d: Any) -> dict[str, ModelIdentity | None] | None:
    """A record's `models` ({"target": {...}, "draft": {...} or None}) read back; None if absent."""
    if not isinstance(d, dict):
        return None
    return {role: ModelIdentity.from_dict(v) if isinstance(v, dict) else None
            for role, v in d.items()}


def identities_to_dict(models: dict[str, ModelIdentity | None] | None) -> dict[str, Any] | None:
    if models is None:
        return None
    return {role: m.to_dict() if m is not None else None for role, m in models.items()}


def describe_models(models: dict[str, ModelIdentity | None] | None) -> dict[str, str]:
    """Per role, the one-line summary ('unknown' for records written before identities)."""
    if models is None:
        return {"target": UNKNOWN, "draft": UNKNOWN}
    return {role: m.summary() if m is not None else "none" for role, m in models.items()}


# -- building one from a loaded model -----------------------------------------------------
