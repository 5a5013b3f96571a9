"""The app's keys: one table gives the bindings, the help screen, the palette and the key bar.

A row is Key(action, bare, typing, bare_display, typing_display, label, help, bar=True): the
bare key acts when the message box is not focused, the typing form (a priority binding)
always; tests/tui/test_keys.py sends every typing form's bytes through Textual's
parser, so a new row's form must be one Textual reads from real terminals (not alt+b, alt+f,
alt+digit or shift+F3: see Key).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import RenderableType
from rich.text import Text
from textual.binding import Binding

PANES = (("rounds", "Rounds"), ("acceptance", "Acceptance"), ("kernels", "Kernels"),
         ("profile", "Profile"))
# Below this many columns the chat (40 at least) and the panels (44) do not fit side by side:
# one of them fills the screen and ctrl+t switches (at 80x24 the panels vanished).
NARROW = 100
VIEWS = ("chat", *(pane for pane, _ in PANES))


@dataclass(frozen=True)
class Key:
    """One user action: its bare key (composer not focused), its while-typing form, its meaning.

    The while-typing form is a priority binding: it acts before the focused composer sees the
    key, so alt+m cycles the mode instead of typing "m" (in tmux and every terminal where Alt
    sends ESC + key, the key arrives with its character and the box took it). Each form is
    one Textual reads as that key from what real terminals send: tests/tui/test_keys.py
    feeds the raw bytes through Textual's own input parser. shift+F3 is not one of them: xterm
    and tmux send ESC[1;2R, which Textual reads as a cursor-position report and drops.
    """

    action: str
    bare: str  # Textual key names, comma separated; "" when only the typing form exists
    typing: str  # the forms that work while the composer has focus (priority bindings)
    bare_display: str
    typing_display: str
    label: str  # the key bar's word
    help: str
    bar: bool = True  # shown in the key bar (every key is in the help screen and the palette)


KEYS: tuple[Key, ...] = (
    Key("tv_step(-0.05)", "left_square_bracket", "f2", "[", "F2", "TV−", "TV budget −0.05"),
    Key("tv_step(0.05)", "right_square_bracket", "f3", "]", "F3", "TV+", "TV budget +0.05"),
    Key("tv_step(-0.25)", "left_curly_bracket", "f7", "{", "F7", "TV−.25", "TV budget −0.25",
        bar=False),
    Key("tv_step(0.25)", "right_curly_bracket", "f8", "}", "F8", "TV+.25", "TV budget +0.25",
        bar=False),
    Key("tv_set(0.0)", "0", "f4", "0", "F4", "lossless", "TV budget 0 (lossless)", bar=False),
    Key("tv_set(1.0)", "1", "shift+f4", "1", "⇧F4", "TV=1", "TV budget 1 (accept every draft)",
        bar=False),
    Key("k_step(-1)", "minus", "f5", "-", "F5", "k−", "draft length −1"),
    Key("k_step(1)", "plus,equals_sign", "f6", "+", "F6", "k+", "draft length +1"),
    Key("cycle_mode", "m", "alt+m", "m", "M-m", "mode",
        "cycle mode: target-only, draft-only, speculative"),
    Key("cycle_rule", "a", "alt+a", "a", "M-a", "rule", "cycle rule: greedy, lossless, mentored"),
    Key("cycle_policy", "o", "alt+o", "o", "M-o", "policy", "cycle the draft-length policy"),
    Key("cycle_draft_source", "d", "alt+d", "d", "M-d", "source",
        "cycle the draft source: model, lookup, hybrid, tree"),
    Key("cycle_temperature", "t", "alt+t", "t", "M-t", "T",
        "cycle the temperature: 0 (greedy), 0.3, 0.7, 1"),
    Key("cycle_max_tokens", "n", "alt+n", "n", "M-n", "max",
        "cycle max tokens a message: 64, 128, 256, 512, 1024"),
    Key("toggle_rejected", "r", "alt+r", "r", "M-r", "rejected", "show rejected draft tokens"),
    Key("toggle_plots", "v", "alt+v", "v", "M-v", "plots",
        "plots or numbers in the Kernels and Acceptance panels"),
    Key("calibrate", "c", "alt+c", "c", "M-c", "calibrate", "measure verify cost vs rows"),
    # Not alt+b: ESC b is what macOS terminals send for option+left, and Textual reads it so.
    Key("bench", "b", "f9", "b", "F9", "bench", "benchmark protocol on the last prompt"),
    Key("switch_profile", "p", "alt+p", "p", "M-p", "profiles", "switch to a saved profile"),
    Key("compare_runs", "x", "alt+x", "x", "M-x", "compare",
        "compare two runs side by side (this session's and saved profiles)"),
    Key("sweep_frontier", "w", "alt+w", "w", "M-w", "sweep",
        "the last sweep's frontier: enter reads a row's texts beside target-only's, a / s "
        "apply the recommended setting / the row's", bar=False),
    Key("save_profile", "", "ctrl+s", "", "^s", "save",
        "save settings + recorded rounds as a profile"),
    Key("next_view", "", "ctrl+t", "", "^t", "view",
        "next panel tab (below 100 columns: chat, then each panel, one at a time)"),
    # Palette only (ctrl+p): ESC + digit, what alt+1 sends, is read by Textual as a macOS
    # Option character ("¡"), so no alt+digit can name a view.
    Key("show_view('chat')", "", "", "", "", "chat",
        "show the chat (below 100 columns) and go back to the message box", bar=False),
    Key("show_view('rounds')", "", "", "", "", "Rounds", "show the Rounds panel", bar=False),
    Key("show_view('acceptance')", "", "", "", "", "Acceptance", "show the Acceptance panel",
        bar=False),
    Key("show_view('kernels')", "", "", "", "", "Kernels", "show the Kernels panel", bar=False),
    Key("show_view('profile')", "", "", "", "", "Profile", "show the Profile panel", bar=False),
    Key("help", "question_mark", "f1", "?", "F1", "help", "keys and colours"),
)

# Actions whose priority binding stays off while a modal screen is up: F5 in the save dialog
# must not change k behind it, nor alt+d type nothing there.
MAIN_SCREEN_ONLY = frozenset(key.action.partition("(")[0] for key in KEYS)


def bindings() -> list[Binding]:
    """Bare keys as ordinary bindings (the composer types them), typing forms as priority ones."""
    out: list[Binding] = []
    for key in KEYS:
        if key.bare:
            out.append(Binding(key.bare, key.action, key.label, show=False,
                               key_display=key.bare_display, tooltip=key.help))
        if key.typing:
            out.append(Binding(key.typing, key.action, key.label, show=False, priority=True,
                               key_display=key.typing_display, tooltip=key.help))
    out.append(Binding("escape", "cancel", "cancel", key_display="esc", show=False,
                       tooltip="cancel the generation; outside a run, leave the message box"))
    out.append(Binding("i", "focus_input", "type", show=False))
    return out


def key_bar(width: int) -> Text:
    """The key bar: each shown key's while-typing form (it works focused or not) and its word,
    wrapped at `width` between entries, never inside one, so nothing is cut at 80 columns."""
    entries: list[tuple[str, str]] = []
    pairs = {"TV−": "TV+", "k−": "k+"}
    shown = [key for key in KEYS if key.bar]
    skip: set[str] = set()
    for key in shown:
        if key.label in skip:
            continue
        partner = next((k for k in shown if k.label == pairs.get(key.label)), None)
        if partner is not None:
            skip.add(partner.label)
            entries.append((f"{key.typing_display}/{partner.typing_display}",
                            key.label.rstrip("−") + "−/+"))
        else:
            entries.append((key.typing_display, key.label))
    entries += [("esc", "cancel"), ("^p", "palette"), ("^q", "quit")]
    text = Text(no_wrap=True, overflow="fold")
    column = 0
    for keys, word in entries:
        size = len(keys) + 1 + len(word)
        if column and column + 2 + size > width:
            text.append("\n")
            column = 0
        elif column:
            text.append("  ")
            column += 2
        text.append(keys, "bold yellow")
        text.append(" " + word)
        column += size
    return text


def parse_arg(arg: str) -> float | int | str:
    """An action's literal argument (`tv_step(0.05)` -> 0.05, `show_view('chat')` -> chat)."""
    if arg[:1] in "'\"":
        return arg.strip("'\"")
    return float(arg) if "." in arg else int(arg)


def help_content() -> RenderableType:
    """The help screen: every key, its while-typing form, and the colours."""
    from rich.console import Group
    from rich.table import Table

    from tui.transcript import ORIGIN_HELP, ORIGIN_STYLES

    intro = Text.from_markup(
        "[bold]specdec-tui keys[/bold]\n"
        "Single keys act when the message box is [bold]not[/bold] focused (esc leaves it, "
        "[bold]i[/bold] returns). The F-key / alt (M-) forms work while typing too. Enter "
        "sends; ctrl+j (or shift+enter, where the terminal tells it apart) adds a line. "
        "Changes apply from the next round and show at once. Every action is also in the palette (ctrl+p).\n"
    )
    keys = Table(box=None, padding=(0, 2), header_style="bold")
    keys.add_column("key", style="bold yellow")
    keys.add_column("while typing", style="yellow")
    keys.add_column("does")
    for key in KEYS:
        if not (key.bare_display or key.typing_display):  # no key: the palette's alone
            keys.add_row(Text("palette only", "dim"), "", key.help)
            continue
        keys.add_row(key.bare_display or key.typing_display, key.typing_display, key.help)
    keys.add_row("esc", "esc", "cancel the running generation (or leave the message box)")
    keys.add_row("i", "", "back to the message box")
    keys.add_row("ctrl+p", "ctrl+p", "command palette")
    keys.add_row("ctrl+q", "ctrl+q", "quit")
    colours = Table(box=None, padding=(0, 2), title="colours", title_justify="left",
                    title_style="bold", show_header=False)
    colours.add_column()
    colours.add_column()
    for origin, what in ORIGIN_HELP.items():
        colours.add_row(Text(origin, ORIGIN_STYLES[origin]), what)
    return Group(intro, keys, Text(""), colours)
