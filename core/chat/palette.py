"""The origin palette: which colour each committed token's origin is shown in, everywhere.

One table for the headless `chat` (core/chat/cli.py) and the app's transcript and legend
(tui/transcript.py, tui/widgets/chat.py): the two had their own colours, so a copied token
was turquoise in the app and dark cyan in the terminal. Rich styles only (no Textual), so
core may use it.
"""

from __future__ import annotations

from rich.style import Style

from core.events import ORIGINS

REJECTED = "rejected"
REJECTED_COPY = "rejected copy"  # a looked-up draft the target threw away

# What the target kept from the draft is green, what it kept of a copy (draft_source lookup
# or hybrid) turquoise, its own decisions are warm; thrown-away drafts struck through.
ORIGIN_STYLES: dict[str, Style] = {
    "accepted": Style(color="green3"),
    "copied": Style(color="medium_turquoise"),
    "corrected": Style(color="dark_orange", bold=True),
    "bonus": Style(color="deep_sky_blue1", bold=True),
    "target": Style(color="grey93"),
    "draft": Style(color="orchid"),
    REJECTED: Style(color="red3", strike=True, dim=True),
    REJECTED_COPY: Style(color="medium_purple", strike=True, dim=True),
}
ORIGIN_HELP = {
    "accepted": "draft token the target accepted",
    "copied": "looked-up token the target accepted (copied from earlier in the chat)",
    "corrected": "target's token after it rejected a draft",
    "bonus": "target's extra token after a fully accepted draft",
    "target": "target-only decoding",
    "draft": "draft-only decoding",
    REJECTED: "draft token the target threw away",
    REJECTED_COPY: "looked-up token the target threw away",
}
REJECTED_KINDS = frozenset({REJECTED, REJECTED_COPY})
# The committed origins alone, in ORIGINS order: what a legend of kept text lists.
COMMITTED_STYLES: dict[str, Style] = {origin: ORIGIN_STYLES[origin] for origin in ORIGINS}
# A terminal of unknown background (`chat`): the target's own tokens keep the terminal's
# default colour (the app's grey93 is drawn on its own dark theme, and vanishes on white).
TERMINAL_STYLES: dict[str, Style] = {**COMMITTED_STYLES, "target": Style()}
