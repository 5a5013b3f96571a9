"""How many tokens a model can attend to, and fitting a request or a conversation into that.

Nothing in MLX stops a 4,096-token model at 4,096 tokens: RoPE keeps rotating and the text
quietly degrades. So every request is checked before it starts: the CLI refuses one that
does not fit (one sentence, exit 2), and the app drops a chat's oldest turns to make room,
saying so, or stops with a sentence when even the last message does not fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from core.errors import UserError

# The config keys that hold a context length, in the order mlx-lm's model families use them.
_WINDOW_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                "n_ctx", "max_seq_len")


class ContextError(UserError):
    """A request longer than the model's context window."""


def context_window(model: Any) -> int | None:
    """A LoadedModel's context window in tokens (mlx-lm config / GGUF context_length), or None."""
    config = getattr(model, "config", None) or {}
    for table in (config, config.get("text_config") or {}):
        for key in _WINDOW_KEYS:
            value = table.get(key) if isinstance(table, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def pair_context_window(pair: Any) -> int | None:
    """The window both models of a ModelPair can hold (the draft reads the same context)."""
    windows = [context_window(m) for m in (pair.target, pair.draft) if m is not None]
    known = [w for w in windows if w is not None]
    return min(known) if known else None


def check_request(prompt_tokens: int, max_tokens: int, window: int | None, model: str) -> None:
    """Refuse a prompt that, with the tokens asked for, would outgrow the context window."""
    if window is None or prompt_tokens + max_tokens <= window:
        return
    if prompt_tokens >= window:
        raise ContextError(
            f"The prompt is {prompt_tokens:,} tokens, longer than {model}'s context window of "
            f"{window:,} tokens; shorten it."
        )
    raise ContextError(
        f"The prompt ({prompt_tokens:,} tokens) plus {max_tokens:,} new tokens would outgrow "
        f"{model}'s context window of {window:,} tokens; ask for at most "
        f"{window - prompt_tokens:,} new tokens or shorten the prompt."
    )


def fit_conversation(
    messages: Sequence[dict[str, str]],
    encode: Callable[[list[dict[str, str]]], list[int]],
    window: int | None,
    max_tokens: int,
    model: str = "the model",
) -> tuple[list[dict[str, str]], list[int], int]:
    """(kept messages, their prompt ids, how many were dropped) for a chat turn that must fit.

    The oldest exchange (a user message and the replies up to the next one) goes first;
    leading system messages stay. When the last user message cannot fit even alone, a
    ContextError says so: the turn is not sent.
    """
    kept = [dict(m) for m in messages]
    dropped = 0
    while True:
        ids = encode(kept)
        if window is None or len(ids) + max_tokens <= window:
            return kept, ids, dropped
        start = next((i for i, m in enumerate(kept) if m.get("role") != "system"), len(kept))
        nxt = next(
            (i for i in range(start + 1, len(kept)) if kept[i].get("role") == "user"), None
        )
        if nxt is None:  # only the newest message is left, and it does not fit
            check_request(len(ids), max_tokens, window, model)
            return kept, ids, dropped  # unreachable: check_request raised
        dropped += nxt - start
        del kept[start:nxt]
