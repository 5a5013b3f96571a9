"""core/chat/palette.py: one origin palette for `chat` and the app."""

from __future__ import annotations

from core.chat import palette
from core.events import ORIGINS


def test_one_palette_for_chat_and_app() -> None:
    from core.chat.cli import ORIGIN_STYLE
    from tui import transcript

    assert transcript.ORIGIN_STYLES is palette.ORIGIN_STYLES
    assert transcript.ORIGIN_HELP is palette.ORIGIN_HELP
    assert tuple(ORIGIN_STYLE) == ORIGINS
    # the chat's colours are the app's, but for the target's own text on an unknown background
    for origin in ORIGINS:
        if origin != "target":
            assert ORIGIN_STYLE[origin] == palette.ORIGIN_STYLES[origin], origin
    assert ORIGIN_STYLE["target"].color is None


def test_every_origin_has_its_own_colour_and_words() -> None:
    colours = [palette.ORIGIN_STYLES[o].color for o in (*ORIGINS, *palette.REJECTED_KINDS)]
    assert len(set(colours)) == len(colours)
    assert set(palette.ORIGIN_STYLES) == set(palette.ORIGIN_HELP)
    assert all(palette.ORIGIN_STYLES[k].strike for k in palette.REJECTED_KINDS)
