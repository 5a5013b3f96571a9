"""A saved profile whose recorded run file was then edited by hand, the ways issue 32 found:
the app and the profile tests check each is a sentence, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from core.profile import Profile, ProfileStore
from tests.helpers.profile import SEED, make_run

EDITS = ("string phase_s", "nan timing", "null e2e", "string tokens")


def spoil_run(profiles: Path, name: str, edit: str) -> None:
    """Save `name` with a recorded run into `profiles`, then apply `edit` (one of EDITS) to its
    run file."""
    if edit not in EDITS:
        raise ValueError(f"Unknown edit {edit!r}: one of {', '.join(EDITS)}.")
    ProfileStore(profiles, presets=None).save(Profile(name, SEED, "", make_run()))
    path = profiles / f"{name}.run.json"
    doc = json.loads(path.read_text())
    if edit == "string phase_s":
        doc["summary"]["phase_s"] = "fast"
    elif edit == "nan timing":
        doc["rounds"][0]["timings"]["verify"] = float("nan")
    elif edit == "null e2e":
        doc["summary"]["e2e_s"] = None
    else:
        doc["summary"]["tokens"] = "9"
    path.write_text(json.dumps(doc))
