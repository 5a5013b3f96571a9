"""The transformers prompt-lookup peer: refused in one sentence where its packages are missing,
and, where torch, transformers and gguf import, a short real run on the default GGUF."""

from __future__ import annotations

import pytest

from core.bench import peer_pld
from core.bench.peer import is_peer_match, with_peer_counterparts
from core.bench.results import BenchSetting
from core.errors import UserError
from core.settings import Settings
from tests.helpers.bench import TINY, run_cli

HAVE_HF = not peer_pld.missing_packages()


def test_the_peer_is_refused_in_one_sentence_where_a_package_is_missing(monkeypatch) -> None:
    monkeypatch.setattr(peer_pld, "missing_packages", lambda: ["torch", "gguf"])
    with pytest.raises(UserError, match=r"needs torch, transformers, gguf and accelerate; torch, gguf will "
                       r"not import here\.$"):
        run_cli(["--target", TINY[0], "--tokens", "4", "--peer", "transformers-pld"])
    with pytest.raises(peer_pld.PeerUnavailable, match=r"torch, gguf do not import here"):
        peer_pld.load_pld_peer("default")


def test_the_peer_loads_only_a_gguf() -> None:
    with pytest.raises(peer_pld.PeerUnavailable, match="is not one"):
        peer_pld.gguf_path_of("shape:tiny")


def test_our_lookup_row_is_its_counterpart() -> None:
    """Its prompt lookup is paired with our greedy lookup row (added when none is there), its
    plain loop with our greedy target-only row."""
    rows = [BenchSetting("t", Settings(mode="target-only", temperature=0.0))]
    out = with_peer_counterparts(rows, 10, "transformers-pld")
    lookup = [b for b in out if is_peer_match(b.settings, "speculative", 10, "transformers-pld")]
    assert [b.name for b in lookup] == ["lookup greedy"]
    assert lookup[0].settings.draft_source == "lookup" and lookup[0].settings.k_max == 32
    assert not is_peer_match(lookup[0].settings, "speculative", 10, "mlx-lm")


@pytest.mark.real_model
@pytest.mark.skipif(not HAVE_HF, reason="torch, transformers, gguf or accelerate is not installed here "
                    "(optional: only the transformers-pld peer uses them)")
def test_a_short_real_run_on_the_default_gguf(default_pair) -> None:
    from core.bench import run_protocol
    from core.decode.engine import Engine
    from core.models import chat_prompt_ids

    peer = peer_pld.load_pld_peer("default")
    assert peer.dtype in ("float32", "bfloat16") and (peer.k, peer.ngram) == (10, 3)
    text = "Repeat this line exactly: the quick brown fox jumps over the lazy dog."
    ids = chat_prompt_ids(default_pair.target.tokenizer, [{"role": "user", "content": text}])
    engine = Engine.from_pair(default_pair)
    report = run_protocol(
        engine, ids, [("target-only", Settings(mode="target-only", temperature=0.0))],
        tokens=12, seeds=1, invocations=1, warmup=0, traced=False, peer=peer,
        predict=False,  # nothing here reads a prediction: no calibration of this CPU first
    )
    pld = report.result("transformers-pld k=10 ngram=3")
    plain = next(r for r in report.results if r.name.startswith("transformers greedy"))
    for r in (pld, plain):
        assert r.tokens == [12] and r.pairs and r.pairs[0]["ratio"] > 0
    assert pld.peer_of == "lookup greedy" and pld.settings["max_matching_ngram_size"] == 3
    assert pld.outputs[0] == plain.outputs[0]  # prompt lookup is lossless under greedy
    assert "### Against transformers-pld" in report.to_markdown()


def test_assisted_generation_is_paired_with_our_fixed_k_model_row() -> None:
    """transformers' assisted generation drafts with a model, k a round: its counterpart is
    our greedy fixed-k row from the draft model (added when none is there), never a lookup."""
    rows = [BenchSetting("t", Settings(mode="target-only", temperature=0.0))]
    out = with_peer_counterparts(rows, 8, peer_pld.ASSISTED)
    spec = [b for b in out if is_peer_match(b.settings, "speculative", 8, peer_pld.ASSISTED)]
    assert [b.name for b in spec] == ["speculative greedy k=8"]
    s = spec[0].settings
    assert (s.policy, s.k, s.draft_source, s.bonus, s.greedy) == ("fixed", 8, "model", True, True)


def test_the_assisted_peer_is_refused_in_one_sentence_where_a_package_is_missing(monkeypatch):
    monkeypatch.setattr(peer_pld, "missing_packages", lambda: ["torch"])
    with pytest.raises(UserError, match=r"^--peer transformers-assisted needs torch, transformers, "
                       r"gguf and accelerate; torch will not import here\.$"):
        run_cli(["--target", TINY[0], "--tokens", "4", "--peer", "transformers-assisted"])
