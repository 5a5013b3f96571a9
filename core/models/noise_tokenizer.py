"""The noise tokenizer of shapes: byte-level, so real text round-trips and other ids read as noise.

A random-weight model has no tokenizer of its own; this one has the real tokenizer's length
(so logits and embedding rows line up), ChatML specials and template, the 256 bytes, and
made-up syllable words for every other id.
"""

from __future__ import annotations

from typing import Any

from core.models.loaded import wrap_tokenizer

_NOISE_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_NOISE_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
_NOISE_CACHE: dict[tuple[str, int], Any] = {}


def noise_tokenizer(family: str, size: int) -> Any:
    """A byte-level tokenizer for random-weight shapes: it round-trips real text exactly.

    Ids 0-2 are ChatML specials (EOS ``<|im_end|>``), 3-258 the 256 bytes, and the rest of
    the real tokenizer's length are made-up syllable words, so a random model's output reads
    as pronounceable noise instead of an empty string. The text of a shape model means nothing.
    One instance per family, so shapes of a family pass the shared-tokenizer check.
    """
    key = (family, size)
    if key in _NOISE_CACHE:
        return _NOISE_CACHE[key]
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_chars = [_bytes_to_unicode()[b] for b in range(256)]
    assert len(set(byte_chars)) == 256
    vocab: dict[str, int] = {t: i for i, t in enumerate(_NOISE_SPECIALS)}
    for b, ch in enumerate(byte_chars):
        vocab[ch] = len(_NOISE_SPECIALS) + b
    n = 0
    while len(vocab) < size:
        vocab["Ġ" + _syllable_word(n)] = len(vocab)
        n += 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _NOISE_SPECIALS])
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=_NOISE_TEMPLATE, clean_up_tokenization_spaces=False,
    )
    wrapped = wrap_tokenizer(hf, byte_level=True)
    _NOISE_CACHE[key] = wrapped
    return wrapped


def _syllable_word(n: int) -> str:
    """Distinct n -> distinct words: the base-70 digits of n, each a two-letter syllable."""
    digits = [n % len(_SYLLABLES)]
    n //= len(_SYLLABLES)
    while n:
        digits.append(n % len(_SYLLABLES))
        n //= len(_SYLLABLES)
    return "".join(_SYLLABLES[d] for d in reversed(digits))


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (what ByteLevel BPE vocabularies use)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))
