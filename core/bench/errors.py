"""How a benchmark fails: a request the user can fix, or a run stopped before its report."""

from __future__ import annotations

from core.errors import UserError


class BenchError(UserError):
    """A benchmark request a user can fix (bad flag, missing prompt, unwritable output)."""


class BenchCancelled(UserError):
    """The benchmark was stopped before it finished; nothing was reported."""
