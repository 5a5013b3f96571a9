"""The shipped prompts: their names and kinds, their token budgets, and cutting one to fit.

Why a budget: a prompt's length in tokens depends on the tokenizer, and the bench asks for a
fixed context, so a shipped prompt may name the context it is meant to fill.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.bench.errors import BenchError
from core.bench.tasks import CHECK_PREFIX, TaskCheck, parse_checks

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
# "rewrite": a pasted text to return with small changes, where most of the answer is a copy
# (the lookup draft source's case; code-edit-pasted is the same idea for code).
# "math": a computation with one right answer (a `# check: number` prompt).
PROMPT_KINDS = ("code", "creative", "rewrite", "math")
DEFAULT_PROMPT = "creative-seed-vault"


def prompt_names() -> list[str]:
    """The shipped prompts (core/prompts/*.txt), by name; the kind is the name's prefix."""
    if not PROMPTS_DIR.is_dir():
        return []
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.txt"))


def prompt_kind(name: str) -> str:
    """'code', 'creative', 'rewrite' or 'math' (a shipped prompt's kind: its name's first word)."""
    head = name.split("-", 1)[0]
    return head if head in PROMPT_KINDS else "other"


def load_prompt(name: str) -> str:
    """The text of a shipped prompt; an unknown name is refused with the known ones."""
    return read_prompt(name)[0]


def prompt_token_budget(name: str) -> int | None:
    """The context a shipped prompt is meant to fill (its `# prompt-tokens: N` line), if any.

    Why: `creative-800` is ~800 tokens under a real BPE tokenizer but ~3,600 under the
    byte-level tokenizer of the `shape:` models; the bench cuts it to N by default so the
    GPU run's context is what its name says whatever the tokenizer.
    """
    return read_prompt(name)[1]


def read_prompt(name: str) -> tuple[str, int | None]:
    """A shipped prompt's text and token budget, read once (the CLI needs both)."""
    path = PROMPTS_DIR / f"{name}.txt"
    if "/" in name or "\\" in name or not path.is_file():
        raise BenchError(
            f"There is no shipped prompt named {name!r}; known: {', '.join(prompt_names())}."
        )
    text, budget, _ = _parsed(path)
    return text, budget


def prompt_check(name: str) -> TaskCheck | None:
    """The program that checks a shipped prompt's answer (its `# check:` lines, all of which
    must pass), if any."""
    read_prompt(name)  # an unknown name is refused the same way
    text, _, lines = _parsed(PROMPTS_DIR / f"{name}.txt")
    return parse_checks(lines, text, name)


def _parsed(path: Path) -> tuple[str, int | None, list[str]]:
    """A prompt file's text and its leading `# prompt-tokens:` / `# check:` lines."""
    text = path.read_text(encoding="utf-8")
    budget, checks = None, []
    while text.startswith(("# prompt-tokens:", CHECK_PREFIX)):
        first, _, text = text.partition("\n")
        if first.startswith(CHECK_PREFIX):
            checks.append(first)
        else:
            budget = int(first.split(":", 1)[1])
    return text.strip(), budget, checks


def fit_prompt_ids(
    tokenizer: Any,
    text: str,
    n_tokens: int | None,
    *,
    model: str | None = None,
    specials_in_text: bool = False,
    notice: Any = None,
) -> tuple[list[int], str]:
    """Chat-template ids of `text`, cut at a word boundary so they are at most `n_tokens` long.

    Why: a prompt's length in tokens depends on the tokenizer (the byte-level tokenizer of the
    random `shape:` models spends one token per byte), and a benchmark compares at one context.
    Returns the ids and the text actually used; a text already short enough is kept whole.
    """
    from core.models import chat_prompt_ids

    def ids_of(t: str) -> list[int]:
        return chat_prompt_ids(tokenizer, [{"role": "user", "content": t}], model=model,
                               specials_in_text=specials_in_text, notice=notice)

    ids = ids_of(text)
    if n_tokens is None or len(ids) <= n_tokens:
        return ids, text
    cuts = [i for i, ch in enumerate(text) if ch.isspace()] + [len(text)]
    lo, hi = 0, len(cuts) - 1  # the largest cut whose ids fit
    if len(ids_of(text[: cuts[0]])) > n_tokens:
        raise BenchError(
            f"--prompt-tokens {n_tokens} is shorter than the chat template and the first word."
        )
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(ids_of(text[: cuts[mid]])) <= n_tokens:
            lo = mid
        else:
            hi = mid - 1
    used = text[: cuts[lo]].rstrip()
    return ids_of(used), used
