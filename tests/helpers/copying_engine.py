"""A fake engine whose chosen cells answer with the prompt copied back, and a target that finds
its prompt likely: the failure the sweep's H200 run recommended (a hybrid TV = 1 cell, 2.26x,
NLL given up -0.207, every text the prompt's code unchanged), reproduced in milliseconds.

Tokens are UTF-8 bytes (vocabulary 256, id 0 the EOS), so a text is its bytes and a check
reads them decoded. The target is a bigram model of the prompt: its next-token distribution
after a byte is that byte's successors in the prompt (smoothed), so text copied from the prompt
is likely under it, as a real target finds its own context likely. Its NLL is scored by the
bench's real scorer (core/bench/quality.py) through a cache-less model (no layers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from core.events import CommittedToken, RoundEvent, RunSummary
from core.settings import Settings

VOCAB = 256
EOS = 0


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(ids: Sequence[int]) -> str:
    return bytes(int(i) for i in ids if 0 < int(i) < VOCAB).decode("utf-8", "replace")


def answer(ids: Sequence[int]) -> tuple[str, bool]:  # as core/sweep/cli.py's
    """The text a check reads (up to the first EOS) and whether the budget cut it first."""
    ids = list(ids)
    return decode(ids[: ids.index(EOS)] if EOS in ids else ids), EOS not in ids


class PromptBigram(nn.Module):
    """logits[x] = log of how often each byte follows x in the prompt (plus a little)."""

    def __init__(self, prompt: Sequence[int]) -> None:
        super().__init__()
        counts = np.full((VOCAB, VOCAB), 1e-3, dtype=np.float32)
        for a, b in zip(prompt, prompt[1:], strict=False):
            counts[a, b] += 1.0
        self.table = mx.array(np.log(counts / counts.sum(axis=1, keepdims=True)))
        self.layers: list[nn.Module] = []  # no cache to keep: a bigram needs no context

    def __call__(self, inputs: mx.array, cache: object = None) -> mx.array:
        return self.table[inputs]


class CopyingEngine:
    """Answers `honest` (its EOS, then newlines) for every cell but those `copies(settings)`
    picks, which answer with the prompt copied back; a request of `speed(settings)` times
    target-only's speed. Speculative requests report full-acceptance rounds of 8 drafts."""

    def __init__(self, prompt: Sequence[int], honest: str, copies: Callable[[Settings], bool],
                 speed: Callable[[Settings], float]) -> None:
        self.prompt = list(prompt)
        self.honest = encode(honest) + [EOS]
        self.copies, self.speed = copies, speed
        self.target_model = PromptBigram(self.prompt)
        self.vocab_size = VOCAB

    def reset(self) -> None:
        pass

    def generate(self, prompt_ids: Sequence[int], s: Settings,
                 cancel: object = None) -> Iterator[RoundEvent | RunSummary]:
        n = s.max_tokens
        text = self.prompt if s.mode == "speculative" and self.copies(s) else self.honest
        ids = (text + [ord("\n")] * n)[:n]
        spec = s.mode == "speculative"
        tv = None if not spec else (0.0 if s.tv_budget == 0 else 0.3)
        rounds, proposed = 0, 0
        for i in range(0, n, 9 if spec else 1):
            chunk = ids[i : i + (9 if spec else 1)]
            k = min(8, len(chunk)) if spec and len(chunk) > 1 else 0
            proposed += k
            rounds += 1
            yield RoundEvent(index=rounds, tokens=tuple(CommittedToken(t, "draft") for t in chunk),
                             proposed=k, accepted=k, rows=k + 1, tv=tv if k else None,
                             source="model" if k else "")
        e2e = 1.0 / self.speed(s)
        yield RunSummary(
            mode=s.mode, tokens=n, rounds=rounds, prompt_tokens=len(prompt_ids),
            prefill_tokens=len(prompt_ids) - 1, proposed=proposed, accepted=proposed,
            acceptance=1.0 if spec and proposed else None, per_position_acceptance=(),
            mean_accepted_length=8.0 if spec else None, e2e_s=e2e, ttft_s=0.01,
            decode_tok_s=n / e2e, phase_s={}, mean_tv=tv, traced=s.traced,
            stop_reason="length", token_ids=tuple(ids),
        )
