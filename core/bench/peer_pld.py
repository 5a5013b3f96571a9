"""The transformers peers: Hugging Face's `generate(prompt_lookup_num_tokens=...)` (prompt
lookup) and `generate(assistant_model=...)` (assisted generation: a draft model), on the same
GGUFs, greedy, next to our lookup and our draft-model rows in the same call.

Why: prompt lookup decoding is the copy-from-the-prompt method most users meet first; its
fixed k (10) and n-gram size (3) against our k from the match and the verify-cost curve is the
comparison that says whether ours copies as far as it pays. transformers dequantizes the GGUF
(`gguf_file=`): bf16 on CUDA, float32 on the CPU, so its absolute time is a full-precision
model's; the ratio against its own plain greedy loop is the like-for-like number.
torch, transformers and gguf are optional: where one is missing the peer is refused with one
sentence, before any model loads.
"""

from __future__ import annotations

import copy
import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.primitives.acceptance import PositionTally

PLD = "transformers-pld"
ASSISTED = "transformers-assisted"
ASSISTED_K = 8  # num_assistant_tokens when no fixed-k row of ours names one (the sweep's k)
NUM_TOKENS = 10  # transformers' own example value for prompt_lookup_num_tokens
PACKAGES = ("torch", "transformers", "gguf", "accelerate")  # transformers' GGUF loading needs all
NGRAM = 3  # its default max_matching_ngram_size (2 in some versions: recorded either way)


class PeerUnavailable(UserError):
    """The peer cannot run here (a package or the GGUF file is missing): one sentence."""


def missing_packages() -> list[str]:
    """The packages the peer needs that do not import here."""
    return [m for m in PACKAGES if importlib.util.find_spec(m) is None]


def gguf_path_of(spec: str) -> Path:
    """The GGUF file behind a target spec ("default" or a .gguf path), or one sentence."""
    if spec == "default":
        from core.models.fetch import fetch_default

        return fetch_default(progress=False)
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".gguf" and path.is_file():
        return path
    raise PeerUnavailable(
        f"--peer {PLD} loads the target's GGUF file; {spec!r} is not one (use the default "
        "model or a .gguf path)."
    )


@dataclass
class PldPeer:
    """transformers' model from the same GGUF, and the prompt-lookup settings it runs with."""

    model: Any
    device: str
    dtype: str
    num_tokens: int = NUM_TOKENS
    ngram: int = NGRAM
    name: str = PLD
    draft: Any = True  # a speculative row: prompt lookup (no draft model)
    # Assisted generation: the draft's model from its own GGUF (transformers' assistant_model);
    # None for prompt lookup.
    assistant: Any = None

    @property
    def k(self) -> int:
        return self.num_tokens


def load_pld_peer(spec: str, num_tokens: int = NUM_TOKENS, ngram: int = NGRAM) -> PldPeer:
    """Load the target's GGUF with transformers (dequantized: bf16 on CUDA, else float32)."""
    missing = missing_packages()
    if missing:
        raise PeerUnavailable(
            f"--peer {PLD} needs torch, transformers, gguf and accelerate, and {', '.join(missing)} "
            f"{'does' if len(missing) == 1 else 'do'} not import here (pip install them; they "
            "are not dependencies of specdec-tui)."
        )
    path = gguf_path_of(spec)
    import torch
    from transformers import AutoModelForCausalLM

    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda else torch.float32
    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=dtype
    )
    device = "cuda" if cuda else "cpu"
    model = model.to(device).eval()
    return PldPeer(model, device, str(dtype).removeprefix("torch."), num_tokens, ngram)


def load_assisted_peer(target: str, draft: str, k: int = ASSISTED_K) -> PldPeer:
    """transformers' assisted generation on the same GGUFs: the target's and the draft's
    models loaded as load_pld_peer loads one, the draft as `assistant_model`, a constant
    `num_assistant_tokens` = k (its schedule otherwise moves k by acceptance, and the row of
    ours it is paired with drafts a fixed k)."""
    peer = load_pld_peer(target, k)
    path = gguf_path_of(draft)
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if peer.device == "cuda" else torch.float32
    assistant = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                     dtype=dtype).to(peer.device).eval()
    return PldPeer(peer.model, peer.device, peer.dtype, k, NGRAM, ASSISTED, True, assistant)


class _Clock:
    """A transformers streamer that times what generate() hands it: the prompt first, then
    the tokens of each iteration (one per plain step, the accepted run plus one per lookup
    round), so it gives the time to the first token and the rounds."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.puts: list[tuple[float, int]] = []
        self._prompt = True

    def put(self, value: Any) -> None:
        if self._prompt:
            self._prompt = False
            return
        self.puts.append((time.perf_counter(), int(value.numel())))

    def end(self) -> None:
        pass


def pld_request(
    peer: PldPeer, prompt_ids: Sequence[int], tokens: int, speculative: bool
) -> tuple[float, float, list[int], int, PositionTally, list[float]]:
    """One greedy request of exactly `tokens` new tokens (EOS does not stop it, as ours):
    E2E s, TTFT s, ids, rounds, per-position tally (unknown: left empty), round ms."""
    import torch

    ids = torch.tensor([list(prompt_ids)], device=peer.device)
    config = copy.deepcopy(peer.model.generation_config)
    # EOS ignored, as our bench rows: an id no step can produce (None falls back to the
    # model's own EOS), so every request is exactly `tokens` long.
    config.eos_token_id = int(peer.model.config.vocab_size)
    config.pad_token_id = 0
    config.do_sample, config.max_new_tokens, config.min_new_tokens = False, tokens, None
    extra: dict[str, Any] = {}
    if speculative and peer.assistant is not None:
        # transformers reads the draft length from the assistant's own generation config (and
        # from the call's in some versions): both say k, a constant schedule, and no
        # confidence threshold (its default, 0.4, stops a proposal early: not a fixed k).
        for cfg in (config, peer.assistant.generation_config):
            cfg.num_assistant_tokens = peer.num_tokens
            cfg.num_assistant_tokens_schedule = "constant"
            cfg.assistant_confidence_threshold = 0.0
        extra["assistant_model"] = peer.assistant
    elif speculative:
        config.prompt_lookup_num_tokens = peer.num_tokens
        config.max_matching_ngram_size = peer.ngram
    clock = _Clock()
    with torch.inference_mode():
        out = peer.model.generate(ids, attention_mask=torch.ones_like(ids),
                                  generation_config=config, streamer=clock, **extra)
        if peer.device == "cuda":
            torch.cuda.synchronize()
    e2e = time.perf_counter() - clock.t0
    new = [int(x) for x in out[0, ids.shape[1] :].tolist()]
    ttft = clock.puts[0][0] - clock.t0 if clock.puts else e2e
    marks = [clock.t0] + [t for t, _ in clock.puts]
    round_ms = [(b - a) * 1e3 for a, b in zip(marks, marks[1:], strict=False)]
    return e2e, ttft, new, len(clock.puts), PositionTally(), round_ms
