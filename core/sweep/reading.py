"""What a reader compares: for each prompt and seed, target-only's text beside chosen cells'
texts, token by token, with where each first leaves target-only's.

Why: the seed's question ends on reading ("whether the time saved justified that change
required reading the result, not just measuring how quickly it arrived"), so the sweep shows
the texts of one seed side by side (the HTML and Markdown pages, core/sweep/reading_page.py)
and the app opens a frontier row's texts (tui/screens/reading.py). Both read `passages`, a
pure function of the sweep's JSON (a file others may have written: every field is checked
for its type, and an old file whose rows carry one text and no tokens still reads, compared
by characters).

The chosen cells of a temperature: the recommended, the fastest, and one per TV step (the
fastest cell at that TV budget; at T = 0, where the rule is greedy, the fastest greedy cell),
the TV steps last and ascending, so the budget grows from left to right.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.bench.texts import TimedText, from_dicts

# Measures a cell's prompt entry may carry besides the bench's (written by the task checks
# and the copy/repetition measures), shown where present: (key, label, share or number).
MEASURES: tuple[tuple[str, str, bool], ...] = (
    ("copied", "copied from the prompt", True),
    ("repetition", "repeated 4-grams", True),
    ("tv_per_token", "TV per token", False),
)


@dataclass
class Column:
    """One text of a passage: whose, why it is shown, its tokens (text piece, origin), and
    where it first leaves target-only's (`diverge`: a token index into `tokens`; `unit` says
    whether the position counts tokens or, for an old file without tokens, characters)."""

    cell_id: str
    name: str
    roles: list[str]
    tokens: list[tuple[str, str]] = field(default_factory=list)
    baseline: bool = False
    diverge: int | None = None
    diverge_at: int | None = None  # the position in `unit`s (differs from diverge for chars)
    unit: str = "token"
    missing: bool = False
    check: bool | None = None
    other_texts: int = 0  # further texts later invocations of this seed wrote
    numbers: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.tokens)

    def divergence_text(self) -> str:
        """What the column's header says of its departure from target-only's text."""
        if self.baseline:
            return "the reference"
        if self.missing:
            return "no text for this seed"
        if self.diverge is None:
            return "the same text as target-only"
        return f"leaves target-only's text at {self.unit} {self.diverge_at}"


@dataclass
class Passage:
    """One prompt, temperature and seed: target-only's column first, then the cells'."""

    prompt: str
    temperature: float
    seed: int | None
    columns: list[Column]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _cells(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in data.get("cells") or [] if isinstance(c, dict) and "id" in c]


Chosen = list[tuple[dict[str, Any], list[str]]]


def chosen_cells(data: dict[str, Any], temperature: float) -> Chosen:
    """The cells a reader is shown at `temperature`, each with why: the recommended and the
    fastest (target-only aside) where they are no TV step's, then one per TV step, ascending;
    a cell chosen twice is shown once with both reasons."""
    cells = [c for c in _cells(data) if _num(c.get("temperature")) == temperature]
    roles: dict[str, list[str]] = {}
    by_id = {str(c["id"]): c for c in cells}
    groups = (data.get("frontier") or {}).get("groups") or {}
    group = groups.get(f"{temperature:g}") if isinstance(groups, dict) else None
    rec = group.get("recommended") if isinstance(group, dict) else None
    if isinstance(rec, str) and rec in by_id:
        roles.setdefault(rec, []).append("recommended")
    timed = [c for c in cells if c.get("kind") != "target-only" and _num(c.get("speedup"))]
    if timed:
        fastest = max(timed, key=lambda c: float(c["speedup"]))
        roles.setdefault(str(fastest["id"]), []).append("fastest")
    steps: dict[float | None, dict[str, Any]] = {}
    for c in cells:
        if c.get("kind") != "speculative":
            continue
        tv = _num(c.get("tv"))
        best = steps.get(tv)
        if best is None or (_num(c.get("speedup")) or 0.0) > (_num(best.get("speedup")) or 0.0):
            steps[tv] = c
    order = sorted(steps, key=lambda v: -1.0 if v is None else v)
    for tv in order:
        label = "greedy" if tv is None else f"TV = {tv:g}"
        roles.setdefault(str(steps[tv]["id"]), []).append(label)
    # the cells chosen for speed alone first, then the TV steps ascending: read left to right,
    # the budget grows
    stepped = [str(steps[tv]["id"]) for tv in order]
    ids = [i for i in roles if i not in stepped] + list(dict.fromkeys(stepped))
    return [(by_id[i], roles[i]) for i in ids]


def _row_texts(row: dict[str, Any]) -> list[TimedText]:
    """A text row's timed texts; an old row (one text, no tokens) as one text of one piece."""
    texts = from_dicts(row.get("texts"))
    if texts:
        return texts
    text, seed = row.get("text"), row.get("seed")
    if isinstance(text, str) and text:
        return [TimedText(int(seed) if isinstance(seed, int) else 0, [0], [], "", [text])]
    return []


def _tokens(t: TimedText) -> list[tuple[str, str]]:
    if t.pieces is None:  # never decoded: the ids themselves
        return [(f"⟨{i}⟩", o) for i, o in zip(t.ids, t.origin_names(), strict=False)]
    origins = t.origin_names() if t.ids else [""] * len(t.pieces)
    return list(zip(t.pieces, origins + [""] * (len(t.pieces) - len(origins)), strict=False))


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """The first index where `a` and `b` differ (the shorter's length when one is a prefix of
    the other), None when they are equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _split_at_char(tokens: list[tuple[str, str]], n: int) -> tuple[list[tuple[str, str]], int]:
    """`tokens` with a boundary at character `n`, and the index of the token that starts there."""
    pos = 0
    for i, (piece, origin) in enumerate(tokens):
        if pos + len(piece) > n:
            cut = n - pos
            if cut == 0:
                return tokens, i
            split = [(piece[:cut], origin), (piece[cut:], origin)]
            return [*tokens[:i], *split, *tokens[i + 1 :]], i + 1
        pos += len(piece)
    return tokens, len(tokens)


def _pick(texts: list[TimedText], seed: int) -> tuple[TimedText | None, int]:
    """A seed's text of the first invocation, and how many other texts the seed has."""
    mine = [t for t in texts if t.seed == seed]
    if not mine:
        return None, 0
    mine.sort(key=lambda t: min(t.invocations, default=0))
    return mine[0], len(mine) - 1


def _check_of(per_prompt: dict[str, Any], seeds: list[int], seed: int) -> bool | None:
    passed = per_prompt.get("task_passed")
    if not isinstance(passed, list) or seed not in seeds:
        return None
    i = seeds.index(seed)
    return bool(passed[i]) if i < len(passed) and isinstance(passed[i], bool) else None


def cell_numbers(cell: dict[str, Any], prompt: str) -> list[str]:
    """The cell's numbers on this prompt, short: speedup, acceptance, NLL given up, mean TV,
    and the further measures of MEASURES where the file has them."""
    pp = ((cell.get("per_prompt") or {}).get(prompt) or {}) if isinstance(cell, dict) else {}
    pp = pp if isinstance(pp, dict) else {}
    out = []
    s = _num(pp.get("speedup"))
    if s is not None:
        out.append(f"{s:.2f}x")
    acc = _num(pp.get("acceptance"))
    if acc is not None:
        out.append(f"acceptance {acc:.0%}")
    nll = _num(pp.get("nll_delta"))
    if nll is not None:
        out.append(f"NLL given up {nll:+.3f}")
    tv = _num(pp.get("mean_tv"))
    if tv is not None:
        out.append(f"TV per judged draft {tv:.3f}")
    for key, label, share in MEASURES:
        v = _num(pp.get(key))
        if v is not None:
            out.append(f"{label} {v:.0%}" if share else f"{label} {v:.3f}")
    why = cell.get("excluded") if isinstance(cell, dict) else None
    if isinstance(why, str) and why:
        out.append(f"not recommended: {why}")
    return out


def _excluded(data: dict[str, Any]) -> dict[str, str]:
    """Why the recommendation passed each cell over (the frontier's `excluded`, per
    temperature), keyed by cell id."""
    groups = (data.get("frontier") or {}).get("groups") if isinstance(data, dict) else None
    out: dict[str, str] = {}
    for g in (groups or {}).values() if isinstance(groups, dict) else ():
        why = g.get("excluded") if isinstance(g, dict) else None
        if isinstance(why, dict):
            out.update({str(k): str(v) for k, v in why.items() if isinstance(v, str)})
    return out


def passages(data: dict[str, Any], cell_ids: Sequence[str] | None = None) -> list[Passage]:
    """Per text block (prompt, temperature) and seed: target-only's column and the columns of
    `cell_ids` of that temperature (default: `chosen_cells`), each marked where it first
    leaves target-only's text. Blocks with no chosen cell are left out."""
    excluded = _excluded(data)
    cells = {str(c["id"]): {**c, "excluded": excluded.get(str(c["id"]))} for c in _cells(data)}
    out: list[Passage] = []
    for block in data.get("texts") or []:
        if not isinstance(block, dict) or not isinstance(block.get("rows"), list):
            continue
        t, prompt = _num(block.get("temperature")), str(block.get("prompt", ""))
        if t is None:
            continue
        rows = {str(r.get("name")): r for r in block["rows"] if isinstance(r, dict)}
        if cell_ids is None:
            shown = chosen_cells(data, t)
        else:
            shown = [(cells[i], []) for i in cell_ids
                     if i in cells and _num(cells[i].get("temperature")) == t]
        base_name = str(block.get("baseline") or "target-only")
        base_row = rows.get(base_name)
        if not shown or base_row is None:
            continue
        base_cell = next((c for c in cells.values() if c.get("name") == base_name
                          and _num(c.get("temperature")) == t), {"id": base_name})
        base_texts = _row_texts(base_row)
        seeds = sorted({x.seed for x in base_texts})
        for seed in seeds:
            base, others = _pick(base_texts, seed)
            assert base is not None
            col0 = _column(base_cell, base_name, [], base, others, prompt, seeds, seed)
            col0.baseline = True
            cols = [col0]
            for cell, roles in shown:
                if cell.get("name") == base_name and cell_ids is None:
                    col0.roles += roles  # target-only chosen (recommended): said, not repeated
                    continue
                texts = _row_texts(rows.get(str(cell.get("name")), {}))
                mine, others = _pick(texts, seed)
                col = _column(cell, str(cell.get("name")), roles, mine, others, prompt,
                              sorted({x.seed for x in texts}), seed)
                _mark(col, mine, base)
                cols.append(col)
            out.append(Passage(prompt, t, seed, cols))
    return out


def _column(cell: dict[str, Any], name: str, roles: list[str], text: TimedText | None,
            others: int, prompt: str, seeds: list[int], seed: int) -> Column:
    pp = (cell.get("per_prompt") or {}).get(prompt) or {}
    return Column(str(cell.get("id", name)), name, list(roles),
                  _tokens(text) if text is not None else [], missing=text is None,
                  check=_check_of(pp if isinstance(pp, dict) else {}, seeds, seed),
                  other_texts=others, numbers=cell_numbers(cell, prompt))


def _mark(col: Column, mine: TimedText | None, base: TimedText) -> None:
    """Where `col` first leaves the baseline's text: by token ids where both have them, else
    by characters (an old file), splitting the token the difference falls in."""
    if mine is None:
        return
    if mine.ids and base.ids:
        i = first_difference(mine.ids, base.ids)
        col.diverge = col.diverge_at = i
        if i is not None:
            col.diverge = min(i, len(col.tokens))
        return
    n = first_difference(mine.text or col.text, base.text)
    if n is None:
        return
    col.tokens, col.diverge = _split_at_char(col.tokens, n)
    col.diverge_at, col.unit = n, "character"
