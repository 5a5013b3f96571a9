"""Pairs: a target and a draft loaded together, and whether they can speculate together.

Different tokenizers are refused in one sentence naming both models; embeddings padded to
different row counts are sliced to the common vocabulary; caches that cannot be rewound
turn speculation off but leave target-only generation working.
"""

from __future__ import annotations

from typing import Any

import mlx.nn as nn

from core.models.loaded import IncompatiblePairError, LoadedModel, ModelPair
from core.models.loader import load_model


def load_pair(target_spec: str, draft_spec: str | None, *, progress: bool = False) -> ModelPair:
    """Load target and draft and check, up front, that they can speculate together.

    Refused (one sentence naming both): different tokenizers (vocabulary, special tokens,
    EOS). Sliced, not refused: embeddings padded to different row counts. Allowed but
    marked ``speculation_ok=False``: caches that cannot be rewound (target-only still works).
    """
    target = load_model(target_spec, progress=progress)
    if draft_spec is None or not draft_spec.strip():
        return _pair(target, None, "no draft model was given")
    if draft_spec.strip() == target_spec.strip():
        draft = target
    else:
        draft = load_model(draft_spec, target=target, progress=progress)
    return check_pair(target, draft)


def check_pair(target: LoadedModel, draft: LoadedModel) -> ModelPair:
    """The compatibility checks of ``load_pair`` for two already loaded models."""
    if target.tokenizer is not draft.tokenizer:
        problem = tokenizer_difference(target.tokenizer, draft.tokenizer)
        if problem:
            raise IncompatiblePairError(
                f"Target {target.name} and draft {draft.name} do not share a tokenizer ({problem})."
            )
    vocab = min(target.vocab_rows, draft.vocab_rows)
    n_tokens = len(target.tokenizer)
    if vocab < n_tokens:
        small = target if target.vocab_rows < draft.vocab_rows else draft
        raise IncompatiblePairError(
            f"Target {target.name} and draft {draft.name} cannot be paired: {small.name} has only "
            f"{small.vocab_rows} output rows for a tokenizer of {n_tokens} tokens."
        )
    reason = None
    for role, m in (("target", target), ("draft", draft)):
        why = untrimmable_reason(m.model)
        if why:
            reason = f"The {role} {m.name} {why}, so speculation is off (target-only still works)."
            break
    return _pair(target, draft, reason, vocab=vocab)


def _pair(
    target: LoadedModel, draft: LoadedModel | None, reason: str | None, vocab: int | None = None
) -> ModelPair:
    return ModelPair(
        target=target,
        draft=draft,
        vocab_size=vocab if vocab is not None else target.vocab_rows,
        eos_ids=frozenset(int(i) for i in target.tokenizer.eos_token_ids),
        speculation_ok=reason is None,
        speculation_reason=reason,
    )


def untrimmable_reason(model: nn.Module) -> str | None:
    """Why this model's cache cannot be rewound after rejected drafts, or None if it can."""
    from mlx_lm.models.cache import RotatingKVCache, can_trim_prompt_cache, make_prompt_cache

    cache = make_prompt_cache(model)
    if any(isinstance(c, RotatingKVCache) for c in cache):
        return "uses a sliding-window cache that cannot be rewound once it wraps"
    if not can_trim_prompt_cache(cache):
        kinds = sorted({type(c).__name__ for c in cache if not c.is_trimmable()})
        return f"has caches that cannot be rewound ({', '.join(kinds)})"
    return None


def tokenizer_difference(a: Any, b: Any) -> str | None:
    """What differs between two tokenizers, in a few words, or None when they match."""
    va, vb = a.get_vocab(), b.get_vocab()
    if va != vb:
        if len(va) != len(vb):
            return f"vocabularies of {len(va)} and {len(vb)} tokens"
        diff = next(t for t in va if vb.get(t) != va[t])
        return f"token {diff!r} differs"
    sa, sb = sorted(a.all_special_tokens), sorted(b.all_special_tokens)
    if sa != sb:
        return f"special tokens differ: {sorted(set(sa) ^ set(sb))[:3]}"
    ea, eb = set(a.eos_token_ids), set(b.eos_token_ids)
    if ea != eb:
        return f"end-of-sequence ids {sorted(ea)} and {sorted(eb)}"
    return None
