"""What test modules share: tiny models, engine runs, model files, recorded runs, the bench's
and the CLI's checks, the scripted app engine and what it showed (app_shown), turns typed and
sent (app_turns), edited run files, the typing keys, faked GPUs (cold_gpu, forward_rows) and
clocks (fake_clock), the soak driver, the repository's scripts loaded by path (scripts), the
default model's greedy reference shared by the session's workers (greedy_reference). Test
modules import from here, never from one another (tests/test_layout.py checks it); fixtures
are in the conftest files."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the repository's root, wherever a test module sits
