"""UserError: a mistake a user can make and fix, always said in one sentence.

Everything a user can cause (bad path, incompatible pair, corrupt profile, full disk,
out-of-range setting) raises a subclass; the CLI prints it, the TUI notifies it.
"""


class UserError(Exception):
    """An error whose message is one clear sentence meant for the user."""


def lower_first(text: str) -> str:
    """A sentence continued after a prefix ("--tv: tv_budget must be ..."): its first letter
    lowered, so the prefixed message still reads as one sentence."""
    return text[:1].lower() + text[1:] if text else text
