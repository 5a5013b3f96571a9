"""Keys and pastes as real terminals send them (issue 29, points 1 and 2).

The pilot presses keys by name, without the bytes a terminal sends, so the old tests passed
while alt+m typed "m" in tmux and shift+F3 never arrived. Here every while-typing key of
tui.keys.KEYS goes as its raw byte sequence (xterm / tmux, and the kitty protocol where a
terminal speaks it) through Textual's own input parser (textual._xterm_parser.XTermParser)
and the driver's process_message into the focused composer, as the Linux driver does.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
from textual import events

from core.settings import Settings
from tests.helpers.app import FUNCTION, REQUEST, Script, ready, scripted_app, wait_for
from tests.helpers.terminal import ESC, parse, send
from tests.helpers.typing_keys import TYPING_CASES
from tui.keys import KEYS
from tui.widgets.composer import Composer

SIZE = (160, 45)

# What xterm and tmux (TERM=tmux-256color / screen) send for the function keys.
FUNCTION_KEYS = {
    "f1": ESC + "OP", "f2": ESC + "OQ", "f3": ESC + "OR", "f4": ESC + "OS",
    "f5": ESC + "[15~", "f6": ESC + "[17~", "f7": ESC + "[18~", "f8": ESC + "[19~",
    "f9": ESC + "[20~", "f10": ESC + "[21~", "f11": ESC + "[23~", "f12": ESC + "[24~",
    "shift+f1": ESC + "[1;2P", "shift+f2": ESC + "[1;2Q", "shift+f3": ESC + "[1;2R",
    "shift+f4": ESC + "[1;2S", "shift+f5": ESC + "[15;2~", "shift+f6": ESC + "[17;2~",
}


def terminal_bytes(key: str) -> str:
    """The bytes an xterm-like terminal (tmux included) sends for a Textual key name:
    Alt (Meta) as ESC + key, ctrl+letter as its control code."""
    if key in FUNCTION_KEYS:
        return FUNCTION_KEYS[key]
    if key.startswith("alt+") and len(key) == 5:
        return ESC + key[-1]
    if key.startswith("ctrl+") and len(key) == 6 and key[-1].isalpha():
        return chr(ord(key[-1]) - ord("a") + 1)
    raise AssertionError(f"no terminal sequence known for {key!r}: add it to this test")


def kitty_bytes(key: str) -> str | None:
    """The kitty keyboard protocol's CSI-u form of alt+letter (kitty, WezTerm, foot, iTerm2
    with the protocol on)."""
    if key.startswith("alt+") and len(key) == 5:
        return f"{ESC}[{ord(key[-1])};3u"
    return None


TYPING = sorted({form for key in KEYS for form in key.typing.split(",") if form})


def test_every_typing_form_parses_as_itself() -> None:
    """Each while-typing key, as a terminal sends it, reaches Textual as that key's name."""
    for form in TYPING:
        for data in filter(None, (terminal_bytes(form), kitty_bytes(form))):
            keys = [m.key for m in parse(data) if isinstance(m, events.Key)]
            assert keys == [form], (form, data, keys)


def test_shift_f3_is_misread_so_no_key_uses_it() -> None:
    """xterm and tmux send shift+F3 as ESC[1;2R: Textual reads a cursor-position report."""
    messages = parse(FUNCTION_KEYS["shift+f3"])
    assert not any(isinstance(m, events.Key) for m in messages)
    assert any(isinstance(m, events.CursorPosition) for m in messages)
    assert "shift+f3" not in TYPING and "f15" not in TYPING




# The cases that need only an idle app on the default settings with its composer focused and
# empty share one app (`typing_app`): starting one is most of each such case's time.
@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_pilot(tmp_path_factory):  # noqa: ANN001, ANN201
    app = scripted_app(Script(), tmp_path_factory.mktemp("profiles"))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        yield pilot


@pytest_asyncio.fixture(loop_scope="module")
async def typing_app(shared_pilot):  # noqa: ANN001, ANN201
    """The module's app as a fresh one is: the default settings, the chat view, its composer
    focused and empty."""
    app = shared_pilot.app
    while len(app.screen_stack) > 1:
        app.pop_screen()
        await shared_pilot.pause()
    app.settings = Settings()
    app.action_show_view("chat")
    composer = app.query_one("#prompt", Composer)
    composer.clear()
    composer.focus()
    await shared_pilot.pause()
    assert app.settings == Settings() and composer.text == "" and app.info is not None
    return shared_pilot


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("key", "field", "expected"), TYPING_CASES)
async def test_terminal_bytes_act_while_typing(typing_app, key, field, expected) -> None:
    pilot = typing_app
    app = pilot.app
    composer = app.query_one("#prompt", Composer)
    assert composer.has_focus
    await send(pilot, "ab")
    await send(pilot, terminal_bytes(key))
    assert getattr(app.settings, field) == pytest.approx(expected)
    assert composer.text == "ab"  # the key acted; nothing was typed
    if kitty_bytes(key):
        app.settings = Settings()
        await send(pilot, kitty_bytes(key))
        assert getattr(app.settings, field) == pytest.approx(expected)
        assert composer.text == "ab"


async def test_every_typing_key_fires_its_action_and_types_nothing(make_app, monkeypatch) -> None:
    """All of KEYS: each typing form's bytes run its action, and the composer stays empty."""
    app = make_app()
    fired: list[str] = []
    run_action = app.run_action

    async def spy(action, *args, **kwargs):  # noqa: ANN001, ANN202
        fired.append(action if isinstance(action, str) else str(action))
        return await run_action(action, *args, **kwargs)

    monkeypatch.setattr(app, "run_action", spy)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        for key in KEYS:
            for form in filter(None, key.typing.split(",")):
                while len(app.screen_stack) > 1:  # help, the profile picker, compare, save
                    app.pop_screen()
                    await pilot.pause()
                await wait_for(pilot, lambda: not app.busy)  # c calibrates
                app.action_show_view("chat")
                await pilot.pause()
                fired.clear()
                await send(pilot, terminal_bytes(form))
                assert key.action in fired, (form, key.action, fired)
                assert app.query_one("#prompt", Composer).text == "", form


@pytest.mark.asyncio(loop_scope="module")
async def test_plain_letters_still_type(typing_app) -> None:
    app = typing_app.app
    await send(typing_app, "]m1+ dt")
    assert app.query_one("#prompt", Composer).text == "]m1+ dt"
    assert app.settings == Settings()


async def test_a_modal_keeps_its_keys(make_app) -> None:
    """A priority binding must not act behind a modal: F5 and alt+d in the save dialog."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, terminal_bytes("ctrl+s"))
        assert len(app.screen_stack) == 2
        await send(pilot, terminal_bytes("f5"))
        await send(pilot, terminal_bytes("alt+d"))
        assert app.settings == Settings()


# ---------------------------------------------------------------------------------- paste

@pytest.mark.parametrize("newline", ["\n", "\r", "\r\n"], ids=["lf", "cr-tmux", "crlf"])
async def test_a_pasted_40_line_function_keeps_every_line(make_app, script: Script,
                                                          newline: str) -> None:
    """A bracketed paste (tmux paste-buffer -p sends LF as CR) then a line and a request:
    the message sent holds all 40 lines and the request (an Input kept the first line)."""
    assert len(FUNCTION.splitlines()) == 40
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pasted = FUNCTION.replace("\n", newline)
        await send(pilot, f"{ESC}[200~{pasted}{ESC}[201~")
        composer = app.query_one("#prompt", Composer)
        assert composer.text == FUNCTION
        await send(pilot, terminal_bytes("ctrl+j") + REQUEST)
        assert composer.text == FUNCTION + "\n" + REQUEST
        # grown to its cap, then scrolling, rather than pushing the chat off the screen
        assert 1 < composer.outer_size.height <= 9
        await send(pilot, "\r")  # Enter sends
        await wait_for(pilot, lambda: app.run_id is None and bool(app.runs_state.runs))
        sent = script.prompts[-1][-1]["content"]
        assert sent == FUNCTION + "\n" + REQUEST
        assert len(sent.splitlines()) == 41
        assert composer.text == ""


async def test_a_paste_event_keeps_every_line(make_app) -> None:
    """The same through a Paste event posted to the composer (no parser)."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        composer = app.query_one("#prompt", Composer)
        composer.post_message(events.Paste(FUNCTION))
        await pilot.pause()
        assert composer.text.splitlines() == FUNCTION.splitlines()


async def test_enter_sends_and_shift_enter_adds_a_line(make_app, script: Script) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        composer = app.query_one("#prompt", Composer)
        await send(pilot, "one")
        await send(pilot, f"{ESC}[13;2u")  # shift+enter, kitty protocol
        await send(pilot, "two")
        await send(pilot, "\n")  # ctrl+j: a line feed, in every terminal
        await send(pilot, "three")
        assert composer.text == "one\ntwo\nthree"
        await send(pilot, "\r")
        await wait_for(pilot, lambda: app.run_id is None and bool(app.runs_state.runs))
        assert script.prompts[-1][-1]["content"] == "one\ntwo\nthree"


# Editing keys in one read from the terminal (Textual issue #6605): a bound key (backspace,
# an arrow, ctrl+u) ran only after the key bubbled to the app, behind the letters after it.
BURSTS = [
    ("ba\x7fc", "bc"),  # backspace between letters: plain TextArea gives "ba"
    ("ab" + ESC + "[Dx", "axb"),  # left arrow, then a letter
    ("abc\x15z", "z"),  # ctrl+u deletes to the line's start, then a letter
]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("data", "expected"), BURSTS)
async def test_editing_keys_in_one_read_apply_in_order(typing_app, data, expected) -> None:
    composer = typing_app.app.query_one("#prompt", Composer)
    assert composer.has_focus
    await send(typing_app, data)
    assert composer.text == expected


async def test_a_profile_name_typed_after_ctrl_u_in_one_read_is_the_one_saved(
    make_app, profiles
) -> None:
    """tmux's `send-keys C-u cpu-first Enter` into the save dialog saved nothing: ctrl+u ran
    after the name was typed and emptied it, and Enter then refused an empty name."""
    from textual.widgets import Input

    from tui.screens.save_profile import SaveProfileScreen

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await send(pilot, terminal_bytes("ctrl+s"))
        await wait_for(pilot, lambda: isinstance(app.screen, SaveProfileScreen))
        assert app.screen.query_one(Input).value  # a suggested name, to be replaced
        await send(pilot, "\x15cpu-first\r")
        await wait_for(pilot, lambda: not isinstance(app.screen, SaveProfileScreen))
        assert (profiles / "cpu-first.toml").is_file()
