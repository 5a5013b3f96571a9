"""The app's keys: one table gives the bindings, the help screen and the palette."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import RenderableType
from rich.text import Text
from textual.binding import Binding

TV_GROUP = Binding.Group("TV", compact=True)
K_GROUP = Binding.Group("k", compact=True)


@dataclass(frozen=True)
class Key:
    """One user action: its bare key (input not focused), its while-typing form, its meaning."""

    action: str
    bare: str  # Textual key names, comma separated
    typing: str  # a modifier / F-key form that works while the input box has focus
    display: str
    label: str
    help: str
    show: bool = True
    group: Binding.Group | None = None


KEYS: tuple[Key, ...] = (
    Key("tv_step(-0.05)", "left_square_bracket", "f2", "[ F2", "TV−", "TV budget −0.05",
        group=TV_GROUP),
    Key("tv_step(0.05)", "right_square_bracket", "f3", "] F3", "TV+", "TV budget +0.05",
        group=TV_GROUP),
    Key("tv_step(-0.25)", "left_curly_bracket", "shift+f2", "{ ⇧F2", "TV−.25",
        "TV budget −0.25", show=False),
    Key("tv_step(0.25)", "right_curly_bracket", "shift+f3", "} ⇧F3", "TV+.25",
        "TV budget +0.25", show=False),
    Key("tv_set(0.0)", "0", "f4", "0 F4", "lossless", "TV budget 0 (lossless)", show=False),
    Key("tv_set(1.0)", "1", "shift+f4", "1 ⇧F4", "TV=1", "TV budget 1 (accept every draft)",
        show=False),
    Key("k_step(-1)", "minus", "f5", "- F5", "k−", "draft length −1", group=K_GROUP),
    Key("k_step(1)", "plus,equals_sign", "f6", "+ F6", "k+", "draft length +1", group=K_GROUP),
    Key("cycle_mode", "m", "alt+m", "m", "mode", "cycle mode: target-only, draft-only, speculative"),
    Key("cycle_rule", "a", "alt+a", "a", "rule", "cycle rule: greedy, lossless, mentored"),
    Key("cycle_policy", "o", "alt+o", "o", "policy", "cycle the draft-length policy"),
    Key("cycle_draft_source", "d", "alt+d", "d", "source",
        "cycle the draft source: model, lookup, hybrid"),
    Key("toggle_rejected", "r", "alt+r", "r", "rejected", "show rejected draft tokens"),
    Key("toggle_plots", "v", "alt+v", "v", "plots", "plots or numbers in the Kernels and "
        "Acceptance panels", show=False),
    Key("calibrate", "c", "alt+c", "c", "calibrate", "measure verify cost vs rows"),
    Key("bench", "b", "alt+b", "b", "bench", "benchmark protocol on the last prompt"),
    Key("switch_profile", "p", "alt+p", "p", "profiles", "switch to a saved profile"),
    Key("compare_runs", "x", "alt+x", "x", "compare", "compare two runs side by side (this "
        "session's and saved profiles)", show=False),
    Key("sweep_frontier", "w", "alt+w", "w", "sweep", "the last sweep's frontier; apply its "
        "recommended setting", show=False),
    Key("save_profile", "ctrl+s", "", "^s", "save", "save settings + recorded rounds as a profile"),
    Key("help", "question_mark", "f1", "? F1", "help", "keys and colours"),
)


def bindings() -> list[Binding]:
    out = [
        Binding(
            ",".join(k for k in (key.bare, key.typing) if k),
            key.action,
            key.label,
            show=key.show,
            key_display=key.display,
            tooltip=key.help,
            group=key.group,
        )
        for key in KEYS
    ]
    out.append(Binding("escape", "cancel", "cancel", key_display="esc",
                       tooltip="cancel the generation; outside a run, leave the input box"))
    out.append(Binding("i", "focus_input", "type", show=False))
    return out


def parse_arg(arg: str) -> float | int:
    """An action's literal argument (`tv_step(0.05)` -> 0.05)."""
    return float(arg) if "." in arg else int(arg)


def help_content() -> RenderableType:
    """The help screen: every key, its while-typing form, and the colours."""
    from rich.console import Group
    from rich.table import Table

    from tui.transcript import ORIGIN_HELP, ORIGIN_STYLES

    intro = Text.from_markup(
        "[bold]specdec-tui keys[/bold]\n"
        "Single keys act when the input box is [bold]not[/bold] focused (esc leaves it, "
        "[bold]i[/bold] returns). The F-key / alt forms work while typing. Changes apply from "
        "the next round and show at once. Every action is also in the palette (ctrl+p).\n"
    )
    keys = Table(box=None, padding=(0, 2), header_style="bold")
    keys.add_column("key", style="bold yellow")
    keys.add_column("while typing", style="yellow")
    keys.add_column("does")
    for key in KEYS:
        bare = key.display.split(" ")[0]
        keys.add_row(bare, key.typing or bare, key.help)
    keys.add_row("esc", "esc", "cancel the running generation (or leave the input box)")
    keys.add_row("i", "", "back to the input box")
    keys.add_row("ctrl+p", "ctrl+p", "command palette")
    keys.add_row("ctrl+q", "ctrl+q", "quit")
    colours = Table(box=None, padding=(0, 2), title="colours", title_justify="left",
                    title_style="bold", show_header=False)
    colours.add_column()
    colours.add_column()
    for origin, what in ORIGIN_HELP.items():
        colours.add_row(Text(origin, ORIGIN_STYLES[origin]), what)
    return Group(intro, keys, Text(""), colours)
