"""Context windows (core/models/context.py): each kind of model's window, a request past it
refused, a long chat dropping its oldest turns with both caches consistent (issue 21)."""

from __future__ import annotations

import pytest

from core import cli
from core import models as M
from tests.helpers.cli_checks import TINY, last_error
from tests.helpers.models import one_sentence


@pytest.mark.usefixtures("wide_console")
def test_a_request_longer_than_the_context_window_is_refused(capsys) -> None:
    long_prompt = "word " * 5000
    for argv, words in [
        (["chat", "hi", *TINY, "--max-tokens", "5000"], "plus 5,000 new tokens"),
        (["chat", long_prompt, *TINY], "longer than"),
        (["bench", "--prompt", "hi", *TINY, "--tokens", "5000", "--seeds", "1",
          "--invocations", "1", "--no-quality"], "plus 5,000 new tokens"),
    ]:
        assert cli.main(argv) == 2, argv[:3]
        msg = last_error(capsys)
        assert words in msg and "context window of 4,096 tokens" in msg, msg


@pytest.mark.usefixtures("wide_console")
def test_context_window_of_each_kind_of_model() -> None:
    from core.models import context_window, pair_context_window

    tiny = M.load_model("shape:tiny")
    assert context_window(tiny) == 4096
    assert pair_context_window(M.check_pair(tiny, M.load_model("shape:tiny-draft"))) == 4096
    assert context_window(M.LoadedModel(None, None, "x", "x", config={})) is None
    nested = M.LoadedModel(None, None, "x", "x", config={"text_config": {"n_ctx": 2048}})
    assert context_window(nested) == 2048


@pytest.mark.usefixtures("wide_console")
def test_gguf_context_length_is_the_window(tmp_path) -> None:
    from core.models import context_window
    from tests.helpers.models import write_tiny_gguf

    source = M.load_model("shape:tiny,dense")
    loaded = M.load_model(str(write_tiny_gguf(tmp_path / "t.gguf", source)))
    assert context_window(loaded) == source.config["max_position_embeddings"]


@pytest.mark.usefixtures("wide_console")
def test_a_chat_that_drops_its_oldest_turns_keeps_both_caches_consistent() -> None:
    """The real engine on tiny models: after turns are dropped the conversation no longer
    starts as the caches do, so the engine re-prefills; its answer must equal a fresh
    engine's, and both caches must hold a prefix of the new conversation."""
    import random

    from core.decode.engine import Engine
    from core.models.context import fit_conversation
    from core.settings import Settings
    from tests.helpers.engine import assert_caches, run
    from tests.helpers.tiny import VOCAB, tiny_llama

    target, draft = tiny_llama(2, seed=1), tiny_llama(1, seed=2)
    engine = Engine(target, draft, vocab_size=VOCAB)

    def encode(messages: list[dict[str, str]]) -> list[int]:  # a template: role, text, header
        ids: list[int] = []
        for m in messages:
            ids += [1 if m["role"] == "user" else 2, *map(int, m["content"].split())]
        return [*ids, 3]

    s = Settings(temperature=0.0, rule="greedy", max_tokens=6, k=3, ignore_eos=True)
    window, rng = 48, random.Random(0)
    messages: list[dict[str, str]] = []
    drops = []
    for _ in range(8):
        words = " ".join(str(rng.randrange(4, VOCAB)) for _ in range(7))
        messages.append({"role": "user", "content": words})
        messages, ids, dropped = fit_conversation(messages, encode, window, s.max_tokens)
        assert len(ids) + s.max_tokens <= window and messages[-1]["content"] == words
        drops.append(dropped)
        _, summary = run(engine, ids, s)
        assert_caches(engine, ids + list(summary.token_ids), settled=True)
        _, fresh = run(Engine(target, draft, vocab_size=VOCAB), ids, s)
        assert summary.token_ids == fresh.token_ids
        if dropped:
            assert summary.prefill_tokens > len(ids) // 2  # re-prefilled, not reused
        messages.append({"role": "assistant", "content": " ".join(map(str, summary.token_ids))})
    assert sum(drops) >= 4 and drops[0] == 0


@pytest.mark.usefixtures("wide_console")
def test_a_message_that_cannot_fit_alone_is_a_sentence() -> None:
    from core.models.context import ContextError, fit_conversation

    def encode(messages: list[dict[str, str]]) -> list[int]:
        return [len(m["content"]) for m in messages for _ in range(len(m["content"]))]

    with pytest.raises(ContextError) as exc:
        fit_conversation([{"role": "user", "content": "x" * 30}], encode, 32, 8, "tiny")
    assert "tiny's context window of 32 tokens" in one_sentence(exc.value)
    kept, _, dropped = fit_conversation(
        [{"role": "system", "content": "s"}, {"role": "user", "content": "x" * 10},
         {"role": "assistant", "content": "y" * 10}, {"role": "user", "content": "z"}],
        encode, 16, 4)
    assert [m["role"] for m in kept] == ["system", "user"] and dropped == 2
