"""UserError: a mistake a user can make and fix, always said in one sentence.

Everything a user can cause (bad path, incompatible pair, corrupt profile, full disk,
out-of-range setting) raises a subclass; the CLI prints it, the TUI notifies it.
"""


class UserError(Exception):
    """An error whose message is one clear sentence meant for the user."""
