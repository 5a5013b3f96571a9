"""A hand-made sweep JSON with texts to read (core/sweep/reading.py): one prompt at T = 0.7,
two seeds, target-only, draft-only and three speculative cells, whose texts leave
target-only's at known tokens; one piece is markup the model "wrote", to prove it is
escaped everywhere it is shown."""

from __future__ import annotations

from typing import Any

from core.bench.texts import encode_origins

MARKUP = "<script>alert('x')</script>&amp;"
BASE = ["def ", "total", "(", "items", "):", "\n    ", "return ", "sum", "(", "items", ")"]


def _text(seed: int, pieces: list[str], origins: str, invocations: list[int] | None = None,
          offset: int = 0) -> dict[str, Any]:
    """A timed text: ids are the pieces' positions in BASE (100 + index) unless changed."""
    ids = [100 + BASE.index(p) if p in BASE else 900 + i + offset for i, p in enumerate(pieces)]
    return {"seed": seed, "invocations": invocations or [0], "ids": ids, "origins": origins,
            "pieces": pieces}


def _cell(cid: str, kind: str, speedup: float, tv: float | None = None,
          passed: list[bool] | None = None, **extra: Any) -> dict[str, Any]:
    name = cid.split(" ", 1)[1]
    pp = {"speedup": speedup, "acceptance": 0.8 if kind == "speculative" else None,
          "nll_delta": 0.1, "mean_tv": 0.05, "task_passed": passed or [True, True], **extra}
    apply = {"mode": kind, "temperature": 0.7, "tv_budget": 1.0 if tv is None else tv,
             "k": 8, "policy": "fixed", "rule": "mentored", "draft_source": "model"}
    return {"id": cid, "name": name, "kind": kind, "tv": tv, "temperature": 0.7, "apply": apply,
            "policy": "fixed" if kind == "speculative" else None, "source": "model",
            "speedup": speedup, "nll_delta": 0.1, "per_prompt": {"rename": pp}}


def sample_sweep(lines: int = 0) -> dict[str, Any]:
    """The sweep: recommended fixed-8 TV=0 (target-only's text exactly, drafted), fastest
    draft-only (leaves at token 0), cost-aware TV=1 the fastest at TV 1 (leaves at token 3
    with markup, and seed 0's third invocation wrote another text), fixed-8 TV=1 (leaves at
    token 5 by a copy, no text for seed 1). `lines` more lines end every text alike (a page
    taller than the screen)."""
    t = "t" * len(BASE)
    tv0 = encode_origins(["accepted", "accepted", "corrected", "accepted", "bonus", "accepted",
                          "accepted", "accepted", "corrected", "accepted", "bonus"])
    ca = [*BASE[:3], MARKUP, *BASE[4:]]
    fx = [*BASE[:5], " # copied", *BASE[6:]]
    rows = [
        {"name": "target-only", "seed": 0, "text": "".join(BASE),
         "texts": [_text(0, BASE, t), _text(1, BASE, t)]},
        {"name": "draft-only", "seed": 0, "text": "x",
         "texts": [_text(0, ["class", *BASE[1:]], "d" * len(BASE)),
                   _text(1, ["class", *BASE[1:]], "d" * len(BASE))]},
        {"name": "fixed-8 TV=0", "seed": 0, "text": "".join(BASE),
         "texts": [_text(0, BASE, tv0), _text(1, BASE, tv0)]},
        {"name": "cost-aware TV=1", "seed": 0, "text": "".join(ca),
         "texts": [_text(0, ca, "aaaaaaaaaab", [0, 1]), _text(0, BASE, t, [2]),
                   _text(1, ca, "aaaaaaaaaab")]},
        {"name": "fixed-8 TV=1", "seed": 0, "text": "".join(fx),
         "texts": [_text(0, fx, "aaaaacaaaab")]},
    ]
    for row in rows:
        for t in row["texts"]:
            t["pieces"] += [f"\n    # line {i}" for i in range(lines)]
            t["ids"] += [500 + i for i in range(lines)]
            t["origins"] += t["origins"][-1] * lines
    cells = [
        _cell("T=0.7 target-only", "target-only", 1.0),
        _cell("T=0.7 draft-only", "draft-only", 3.0, passed=[False, False]),
        _cell("T=0.7 fixed-8 TV=0", "speculative", 1.2, 0.0),
        _cell("T=0.7 cost-aware TV=1", "speculative", 2.2, 1.0, passed=[False, True]),
        _cell("T=0.7 fixed-8 TV=1", "speculative", 2.0, 1.0, copied=0.91),
    ]
    return {
        "schema": 1, "kind": "specdec-tui sweep", "complete": True, "prompts": ["rename"],
        "command": "specdec-tui sweep --prompt-name rename", "grid": {"tvs": [0.0, 1.0]},
        "cells": cells,
        "frontier": {"max_nll_delta": None, "min_task": None, "groups": {"0.7": {
            "temperature": 0.7, "front": [], "recommended": "T=0.7 fixed-8 TV=0",
            "why_none": None,
            "excluded": {"T=0.7 fixed-8 TV=1": "copies the prompt: 91% against 0%"}}}},
        "texts": [{"prompt": "rename", "temperature": 0.7, "baseline": "target-only",
                   "rows": rows}],
    }
