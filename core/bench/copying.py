"""Two measures of a text that a copy cannot game: what it copied from the prompt, what it
repeated of itself.

Why: the target finds its own prompt likely, so a setting whose text is the prompt copied back
(a lookup draft at TV = 1 accepts every copied token) shows a *negative* NLL given up; a text
looping on one phrase is likely too. These count it instead, on token ids (or words, where a
saved result kept only texts), so they are computed from a saved result without a re-run.
Pure Python: no MLX, so the app and the scripts that read saved files can call them.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Any

COPY_RUN = 8  # tokens a run must have to count as copied from the prompt
REPEAT_N = 4  # the n of the n-grams whose repeats count as repetition
NLL_COPY_TOLERANCE = 0.02  # copying more than target-only by this marks a NLL untrusted
_WORD = re.compile(r"\w+(?:['’-]\w+)*", re.U)


def words(text: str) -> list[str]:
    """The text's words, case-folded: the unit where a saved result kept no token ids (and
    the unit the prose checks compare)."""
    return [w.casefold() for w in _WORD.findall(text)]


def copied_share(prompt: Sequence[Hashable], answer: Sequence[Hashable],
                 run: int = COPY_RUN) -> float:
    """Share of the answer's tokens lying in runs of `run` or more tokens that repeat the
    prompt: every window of `run` answer tokens found in the prompt marks its tokens (a longer
    common run is the union of its windows). 0 for an empty answer."""
    if not answer:
        return 0.0
    if len(answer) < run or len(prompt) < run:
        return 0.0
    seen = {tuple(prompt[i : i + run]) for i in range(len(prompt) - run + 1)}
    marked = [False] * len(answer)
    for i in range(len(answer) - run + 1):
        if tuple(answer[i : i + run]) in seen:
            for j in range(i, i + run):
                marked[j] = True
    return sum(marked) / len(answer)


def repetition_share(answer: Sequence[Hashable], n: int = REPEAT_N) -> float:
    """Share of the answer's n-grams that repeat an earlier one of the answer (0 for a text
    with fewer than n tokens): 0 where every n-gram is new, near 1 for a text stuck in a loop."""
    total = len(answer) - n + 1
    if total <= 0:
        return 0.0
    grams = {tuple(answer[i : i + n]) for i in range(total)}
    return (total - len(grams)) / total


def text_measures(prompt: Sequence[Hashable],
                  answers: Sequence[Sequence[Hashable]]) -> dict[str, float | None]:
    """The mean over answers (one per seed) of the copied share and the repetition share."""
    if not answers:
        return {"copied": None, "repetition": None}
    return {
        "copied": sum(copied_share(prompt, a) for a in answers) / len(answers),
        "repetition": sum(repetition_share(a) for a in answers) / len(answers),
    }


def measures(prompt_ids: Sequence[int] | None, outputs: Sequence[Sequence[int]],
             prompt_text: str | None = None,
             texts: Sequence[str] | None = None) -> dict[str, Any]:
    """One cell's copied share and repetition on one prompt, the mean over its seeds: on token
    ids where both the prompt's and the outputs' are known, else on the words of the texts.
    `unit` says which ("tokens", "words"; None when neither was kept)."""
    if prompt_ids and outputs:
        return {**text_measures(list(prompt_ids), [list(o) for o in outputs]), "unit": "tokens"}
    if prompt_text is not None and texts:
        return {**text_measures(words(prompt_text), [words(t) for t in texts]), "unit": "words"}
    return {"copied": None, "repetition": None, "unit": None}


def measure_rows(results: Sequence[Any], prompt_ids: Sequence[int], eos_ids: Any) -> None:
    """Each bench row's `copied` and `repetition` on its answers: the first invocation's
    outputs up to their first EOS (what the protocol generated past it is not the answer)."""
    for r in results:
        answers = [ids[: next((i for i, t in enumerate(ids) if t in eos_ids), len(ids))]
                   for ids in r.outputs.values()]
        m = measures(prompt_ids, answers)
        r.copied, r.repetition = m["copied"], m["repetition"]
