"""What an mlx-lm model looks like inside: its body, layers, vocabulary, head.

mlx-lm models share a layout (`model.model.layers`, `model.model.embed_tokens`, an optional
`lm_head`, `model.args`) but no API for it; the loaders, the compiled step and the dispatch
prediction all read it through these few functions.
"""

from __future__ import annotations

from typing import Any

import mlx.nn as nn


def body(model: nn.Module) -> nn.Module | None:
    """The decoder body (`model.model`) when the model has one with layers."""
    inner = model.children().get("model") if hasattr(model, "children") else None
    if isinstance(inner, nn.Module) and "layers" in inner.children():
        return inner
    return None


def layers(model: nn.Module) -> list[Any]:
    """The transformer blocks, in order; empty when the layout is not mlx-lm's."""
    inner = body(model)
    return list(inner.layers) if inner is not None else []


def tied_embeddings(model: nn.Module) -> bool:
    """Whether the output head reuses the input embedding (no `lm_head` of its own)."""
    return bool(getattr(getattr(model, "args", None), "tie_word_embeddings", False))


def output_rows(model: nn.Module) -> int:
    """Rows of the output head: the logits' width, padding included (Qwen pads its vocab)."""
    head = model.children().get("lm_head")
    if isinstance(head, nn.Module) and "weight" in head:
        return int(head.weight.shape[0])
    inner = model.children().get("model")
    if isinstance(inner, nn.Module):
        embed = inner.children().get("embed_tokens")
        if isinstance(embed, nn.Module):
            return int(embed.weight.shape[0])
    return int(model.args.vocab_size)


def vocab_size(model: nn.Module) -> int | None:
    """The configured vocabulary size, else the embedding's rows; None when neither is known."""
    v = getattr(getattr(model, "args", None), "vocab_size", None)
    if v:
        return int(v)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if embed is not None:
        return int(embed.weight.shape[0])
    return None
