"""Self-drafts: a draft derived from the loaded target, so one checkpoint gives a real pair.

``self:layers=N`` keeps the target's first N decoder layers (weights shared, not copied);
``self:bits=B[,group=G]`` requantizes the target's matrices to fewer bits. Either shares the
target's tokenizer, so it is only valid as the draft of a pair.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_unflatten

from core.models.loaded import LoadedModel, ModelLoadError, quantization_config
from core.models.spec import check_quantization, int_option, parse_options
from core.primitives.introspect import body

SELF_DEFAULT_GROUP = 32


def derive_self_draft(target: LoadedModel, spec: str) -> LoadedModel:
    """A draft derived from the target: its first N layers, or its weights at fewer bits."""
    name, options = parse_options(spec, "self:")
    unknown = set(options) - {"layers", "bits", "group"}
    if name is not None or unknown or ("layers" in options) == ("bits" in options):
        raise ModelLoadError(
            f"{spec!r} is not a self-draft: use 'self:layers=N' or 'self:bits=B[,group=G]'."
        )
    if "layers" in options:
        n = int_option(spec, options, "layers")
        assert n is not None
        return truncated_draft(target, n, spec=spec)
    bits = int_option(spec, options, "bits")
    group = int_option(spec, options, "group", SELF_DEFAULT_GROUP)
    assert bits is not None and group is not None
    return requantized_draft(target, bits, group, spec=spec)


def _fresh_like(model: nn.Module, **arg_changes: Any) -> nn.Module:
    """A new module of the same mlx-lm class; its own random init is lazy and never evaluated."""
    args = getattr(model, "args", None)
    if args is None or not dataclasses.is_dataclass(args):
        raise ModelLoadError("Self-drafts need an mlx-lm model that keeps its ModelArgs in .args.")
    return type(model)(dataclasses.replace(args, **arg_changes))


def truncated_draft(target: LoadedModel, n_layers: int, *, spec: str | None = None) -> LoadedModel:
    """The target's first ``n_layers`` decoder layers + final norm + LM head, weights shared."""
    total = target.num_layers
    spec = spec or f"self:layers={n_layers}"
    if not 1 <= n_layers < total:
        raise ModelLoadError(f"{spec} needs 1 <= N < {total} (the target has {total} layers).")
    changes: dict[str, Any] = {"num_hidden_layers": n_layers}
    layer_types = getattr(target.model.args, "layer_types", None)
    if isinstance(layer_types, list):
        changes["layer_types"] = layer_types[:n_layers]
    draft = _fresh_like(target.model, **changes)
    inner_t, inner_d = decoder_body(target.model), decoder_body(draft)
    for key, child in inner_t.children().items():
        setattr(inner_d, key, list(child[:n_layers]) if key == "layers" else child)
    for key, child in target.model.children().items():
        if child is not inner_t:
            setattr(draft, key, child)
    config = dict(target.config, num_hidden_layers=n_layers)
    return LoadedModel(
        draft, target.tokenizer, spec, f"{target.name} · first {n_layers}/{total} layers",
        random_weights=target.random_weights, kind="self", config=config,
    )


def decoder_body(model: nn.Module) -> nn.Module:
    """``model.model`` (the body with the layers), refused when the layout is not mlx-lm's."""
    inner = body(model)
    if inner is None:
        raise ModelLoadError("Self-drafts need an mlx-lm model with model.layers.")
    return inner


def requantized_draft(
    target: LoadedModel,
    bits: int,
    group: int = SELF_DEFAULT_GROUP,
    *,
    spec: str | None = None,
    keep_head: bool = False,
) -> LoadedModel:
    """The target's weights dequantized and requantized to ``bits`` (affine, ``group`` wide).

    Norms and other non-matrix parameters are shared with the target; each matrix is
    requantized and evaluated one module at a time so peak memory stays near one matrix.
    """
    spec = spec or f"self:bits={bits},group={group}"
    check_quantization(spec, bits, group)
    draft = _fresh_like(target.model)
    draft.update_modules(target.model.leaf_modules())  # share every leaf, then replace matrices
    replaced = []
    for path, module in target.model.named_modules():
        if keep_head and path.rsplit(".", 1)[-1] in ("embed_tokens", "lm_head"):
            continue
        new = _requantize(module, bits, group)
        if new is not None:
            mx.eval(new.parameters())
            replaced.append((path, new))
    if not replaced:
        raise ModelLoadError(f"{spec}: the target has no matrices whose width divides by {group}.")
    draft.update_modules(tree_unflatten(replaced))
    draft.eval()
    config = dict(target.config)
    config["quantization"] = quantization_config(draft)
    return LoadedModel(
        draft, target.tokenizer, spec, f"{target.name} · {bits}-bit g{group}",
        random_weights=target.random_weights, kind="self", config=config,
    )


def _dense_weight(m: nn.Module) -> mx.array:
    """``m``'s weight as a dense matrix, dequantized when it is quantized."""
    if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding)):
        return mx.dequantize(m.weight, m.scales, m.get("biases"), m.group_size, m.bits, mode=m.mode)
    return m.weight


def _requantize(m: nn.Module, bits: int, group: int) -> nn.Module | None:
    """``m`` at the new precision, or None when it is no matrix or its width does not divide."""
    if not isinstance(m, (nn.Linear, nn.QuantizedLinear, nn.Embedding, nn.QuantizedEmbedding)):
        return None
    w = _dense_weight(m)
    if w.shape[-1] % group:
        return None
    dtype = m.scales.dtype if "scales" in m else w.dtype
    w = w.astype(dtype)
    if isinstance(m, (nn.Linear, nn.QuantizedLinear)):
        dense: nn.Module = nn.Linear(w.shape[1], w.shape[0], bias="bias" in m)
        if "bias" in m:
            dense.bias = m.bias
    else:
        dense = nn.Embedding(w.shape[0], w.shape[1])
    dense.weight = w
    return dense.to_quantized(group_size=group, bits=bits)
