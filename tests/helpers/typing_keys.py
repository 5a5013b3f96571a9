"""The while-typing keys and the setting each changes from Settings() (tv 0, k 4, speculative,
mentored, model, fixed, temperature 0.7, 256 tokens): the app's tests press them by name
(tests/tui/test_app.py) and as the bytes terminals send (tests/tui/test_keys.py), one table."""

from __future__ import annotations

TYPING_CASES = [
    # (key, field, expected)
    ("f3", "tv_budget", 0.05),
    ("f8", "tv_budget", 0.25),
    ("shift+f4", "tv_budget", 1.0),
    ("f6", "k", 5),
    ("f5", "k", 3),
    ("alt+m", "mode", "target-only"),
    ("alt+a", "rule", "greedy"),
    ("alt+o", "policy", "acceptance-rate"),
    ("alt+d", "draft_source", "lookup"),
    ("alt+t", "temperature", 1.0),
    ("alt+n", "max_tokens", 512),
]
