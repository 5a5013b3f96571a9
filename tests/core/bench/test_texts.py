"""Every timed text kept token by token (core/bench/texts.py): the pieces join to the text
whatever a tokenizer does with multi-byte characters, the origin letters round-trip, a
repeated invocation adds its number and a different one its own entry, and an old file's row
(no texts) loads as none."""

from __future__ import annotations

from core.bench.texts import (
    ORIGIN_CODES,
    TimedText,
    TimedTexts,
    decode_origins,
    encode_origins,
    from_dicts,
    token_pieces,
)
from core.events import ORIGINS

# A byte-level vocabulary: "é" is two tokens (its UTF-8 bytes), as byte-level BPE splits it.
VOCAB = {1: b"Ma", 2: b"ra", 3: b" caf", 4: b"\xc3", 5: b"\xa9", 6: b"!"}


def byte_decode(ids: list[int]) -> str:
    return b"".join(VOCAB[i] for i in ids).decode("utf-8", errors="replace")


def test_pieces_join_to_the_text_and_a_split_character_goes_to_the_token_that_ends_it():
    ids = [1, 2, 3, 4, 5, 6]
    pieces = token_pieces(ids, byte_decode)
    assert "".join(pieces) == byte_decode(ids) == "Mara café!"
    assert pieces == ["Ma", "ra", " caf", "", "é", "!"]
    assert token_pieces([], byte_decode) == []


def test_a_tokenizer_that_rewrites_earlier_text_still_partitions_the_final_text():
    # SentencePiece-like: a lone "x" decodes with a leading space dropped once more follows.
    def rewrite(ids: list[int]) -> str:
        return "ab" if ids == [1] else "a-b" * len(ids)

    pieces = token_pieces([1, 2, 3], rewrite)
    assert "".join(pieces) == rewrite([1, 2, 3]) and len(pieces) == 3


def test_origin_letters_round_trip_for_every_origin():
    assert set(ORIGIN_CODES) == set(ORIGINS) and len(set(ORIGIN_CODES.values())) == len(ORIGINS)
    assert decode_origins(encode_origins(ORIGINS)) == list(ORIGINS)
    assert encode_origins(["accepted", "nonsense"]) == "a?" and decode_origins("a?") == ["accepted", ""]


def test_invocations_that_wrote_the_same_text_share_an_entry_and_others_get_theirs():
    texts = TimedTexts()
    texts.keep(7, 0, [1, 2], "tt")
    texts.keep(8, 0, [1, 6], "tt")
    texts.keep(7, 1, [1, 2], "tt")  # the same text, the same origins: one entry
    texts.keep(7, 2, [1, 2], "ab")  # the same text drafted otherwise: its own
    texts.keep(8, 1, [2, 2], "tt")  # another text for seed 8
    texts.decode(byte_decode)
    rows = texts.to_dicts()
    assert [(r["seed"], r["invocations"]) for r in rows] == [(7, [0, 1]), (7, [2]), (8, [0]),
                                                              (8, [1])]
    assert rows[0]["pieces"] == ["Ma", "ra"] and rows[0]["origins"] == "tt"
    back = from_dicts(rows)
    assert back[1].origin_names() == ["accepted", "bonus"] and back[3].text == "rara"


def test_an_old_row_without_texts_loads_with_none():
    assert from_dicts(None) == [] and from_dicts("junk") == []
    old = TimedText.from_dict({"seed": 3, "ids": [1, 2]})  # no origins, no pieces
    assert old.origins == "" and old.pieces is None and old.origin_names() == ["", ""]


def test_dumps_keeps_each_texts_lists_on_one_line_and_reads_back_the_same():
    import json

    from core.bench.texts import dumps

    sneaky = "\x000\x00"  # what a placeholder without a nonce would look like: a model may write it
    texts = TimedTexts()
    texts.keep(7, 0, list(range(200)), "t" * 200)
    texts.decode(lambda ids: "".join(f"w{i} " for i in ids))
    data = {"results": [{"name": "r", "text": sneaky, "texts": texts.to_dicts(),
                         "e2e_s": [1.0, 2.0]}], "other": {"ids": [1, 2]}}
    out = dumps(data)
    assert json.loads(out) == data
    assert len(out.splitlines()) < 30  # not one line per token
    assert '"ids": [0,1,2,' in out and '"e2e_s": [\n' in out  # other lists keep their indent
    assert len(out) < 0.6 * len(json.dumps(data, indent=1))
