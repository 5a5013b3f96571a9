"""What every model source produces and shares: LoadedModel, ModelPair, their errors, dtype, cache.

Each loader (GGUF, mlx-lm folder, self-draft, shape, the fetched default) returns a
`LoadedModel`; everything a user can get wrong ends in a `ModelLoadError` of one sentence.
The few helpers here are the ones more than one loader needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from core.errors import UserError
from core.io.kept import CACHE_ENV, cache_dir  # noqa: F401 (where fetched models live)
from core.primitives.introspect import output_rows


class ModelLoadError(UserError):
    """A model spec that cannot be loaded; the message is one sentence naming the spec."""


class FetchError(ModelLoadError):
    """The embedded default could not be fetched (index unreachable, corrupt download)."""


class IncompatiblePairError(ModelLoadError):
    """Target and draft cannot work together; the message names both models."""


@dataclass
class LoadedModel:
    """One ready-to-run model: an mlx-lm module, its tokenizer, and what the user called it."""

    model: nn.Module
    tokenizer: Any  # mlx_lm.tokenizer_utils.TokenizerWrapper, chat template set
    spec: str
    name: str
    random_weights: bool = False
    kind: str = "mlx"  # "gguf", "mlx", "self", "shape"
    config: dict[str, Any] = field(default_factory=dict)  # an mlx-lm config.json dict
    source: str | None = None  # the folder the weights were read from (a Hub model's snapshot)

    @property
    def vocab_rows(self) -> int:
        """Rows of the output layer: the logits' last dimension (may exceed the tokenizer)."""
        return output_rows(self.model)

    @property
    def num_layers(self) -> int:
        return len(self.model.layers)


@dataclass
class ModelPair:
    """A target and an optional draft that share a tokenizer, with the checks' verdict."""

    target: LoadedModel
    draft: LoadedModel | None
    vocab_size: int  # common vocab: logits of both are sliced to it
    eos_ids: frozenset[int]
    speculation_ok: bool
    speculation_reason: str | None = None  # why speculation is refused, when it is


def compute_dtype(own: mx.Dtype = mx.bfloat16) -> mx.Dtype:
    """The activation dtype: float32 on the CPU backend, else the model's own (bf16/fp16).

    On the CPU backend half precision is both slower (no native kernels) and wrong for
    SmolLM2 (activations reach ~25,000 and fp16 output turns to garbage).
    """
    if mx.default_device().type == mx.DeviceType.cpu:
        return mx.float32
    return own


def quantization_config(model: nn.Module) -> dict[str, Any]:
    """mlx-lm's ``quantization`` config entry: the commonest params plus per-module overrides."""
    per: dict[str, dict[str, Any]] = {}
    for path, m in model.named_modules():
        if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
            per[path] = {"group_size": m.group_size, "bits": m.bits, "mode": m.mode}
    if not per:
        return {}
    counts: dict[tuple[int, int, str], int] = {}
    for p in per.values():
        k = (p["group_size"], p["bits"], p["mode"])
        counts[k] = counts.get(k, 0) + 1
    group, bits, mode = max(counts, key=lambda k: counts[k])
    config: dict[str, Any] = {"group_size": group, "bits": bits, "mode": mode}
    for path, p in sorted(per.items()):
        if (p["group_size"], p["bits"], p["mode"]) != (group, bits, mode):
            config[path] = p
    return config


def wrap_tokenizer(hf: Any, *, byte_level: bool) -> Any:
    """An HF tokenizer as mlx-lm's TokenizerWrapper, the type `LoadedModel.tokenizer` holds."""
    from mlx_lm.tokenizer_utils import (
        BPEStreamingDetokenizer,
        NaiveStreamingDetokenizer,
        TokenizerWrapper,
    )

    detok = BPEStreamingDetokenizer if byte_level else NaiveStreamingDetokenizer
    return TokenizerWrapper(hf, detok)


def first_line(exc: BaseException) -> str:
    """An exception's first line without its full stop, to fit inside our one sentence."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__).rstrip(".")
