"""Checks of prose answers: a rewrite kept its facts and changed what it was asked to, and a
story's named characters kept their names and roles (the seed's failure: at TV = 1 Mara, the
mechanic, introduced herself as "Ilyan Sato, the archivist").

Word-level and regex-level on purpose: no language model judges the text (it would be the
same kind of model as the one being judged), so each check looks for what a reader would
point at: a name, a number, a misspelling left, a name in apposition to another's role.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.bench.copying import copied_share, words
from core.bench.errors import BenchError

_SPEECH = (
    r"(?:said|says|asked|asks|replied|replies|answered|answers|whispered|whispers|"
    r"called|calls|introduced|introduces|added|adds|muttered|mutters|shouted|shouts)"
)
COPY_RUN_WORDS = 8  # a run of this many words repeating the prompt counts as copied


def copied_words_share(prompt: str, answer: str, run: int = COPY_RUN_WORDS) -> float:
    """Share of the answer's words lying in runs of `run` or more words that repeat the prompt."""
    return copied_share(words(prompt), words(answer), run)


def parse_rewrite(arg: str) -> tuple[list[str], list[str]]:
    keep, _, gone = arg.partition(" gone ")
    split = lambda s: [x.strip() for x in s.split("|") if x.strip()]  # noqa: E731
    return split(keep), split(gone)


def _has(text: str, phrase: str) -> bool:
    """Whether `phrase` is in `text` as whole words (case-insensitive, any spacing)."""
    pattern = r"\s+".join(re.escape(w) for w in phrase.split())
    return re.search(rf"(?<!\w){pattern}(?!\w)", text, re.I) is not None


def _at(text: str, phrase: str) -> int:
    m = re.search(r"\s+".join(re.escape(w) for w in phrase.split()), text, re.I)
    return m.start() if m else len(text)


def rewritten(prompt: str, answer: str, keep: list[str], gone: list[str],
              cut: bool = False) -> bool:
    """Every kept fact present, no gone word left, and not the prompt's text copied back. A
    `cut` answer keeps the facts up to the last one it reached (in the prompt's order)."""
    if cut:  # a fact the prompt lacks (a correction) has no place to be reached by
        keep = sorted(
            (k for k in keep if _at(prompt, k) < len(prompt)), key=lambda k: _at(prompt, k)
        )
        reached = [i for i, k in enumerate(keep) if _has(answer, k)]
        keep = keep[: reached[-1] + 1] if reached else keep
    if not all(_has(answer, k) for k in keep) or any(_has(answer, g) for g in gone):
        return False
    a, p = " ".join(words(answer)), " ".join(words(prompt))
    return bool(a) and a not in p


@dataclass(frozen=True)
class Character:
    """A named character: full name, every name they go by, and the words for their role."""

    full: str
    aliases: tuple[str, ...]
    roles: tuple[str, ...]

    @property
    def first(self) -> str:
        return self.full.split()[0]

    @property
    def last(self) -> str | None:
        parts = self.full.split()
        return parts[-1] if len(parts) > 1 else None


def parse_roles(arg: str, name: str = "the prompt") -> list[Character]:
    out = []
    for part in filter(None, (p.strip() for p in arg.split(";"))):
        names, sep, roles = part.partition("=")
        aliases = [a.strip() for a in names.split("|") if a.strip()]
        role_words = [r.strip() for r in roles.split("|") if r.strip()]
        if not sep or not aliases or not role_words:
            raise BenchError(f"{name}: 'roles' wants NAME[|ALIAS]=ROLE[|ROLE]; ..., got {part!r}.")
        parts = aliases[0].split()
        extra = parts if len(parts) > 1 else []
        out.append(Character(aliases[0], tuple(dict.fromkeys([*aliases, *extra])),
                             tuple(role_words)))
    if len(out) < 2:
        raise BenchError(f"{name}: 'roles' needs at least two characters (NAME=ROLE; NAME=ROLE).")
    return out


def _alias_re(c: Character) -> str:
    return "(?:" + "|".join(r"\s+".join(map(re.escape, a.split()))
                            for a in sorted(c.aliases, key=len, reverse=True)) + ")"


def _role_re(c: Character) -> str:
    return "(?:" + "|".join(re.escape(r) for r in c.roles) + ")"


def roles_kept(prompt: str, answer: str, cast: list[Character]) -> bool:
    """Whether the characters keep their names and roles in the answer (see `roles`)."""
    if copied_words_share(prompt, answer) > 0.5:
        return False  # the brief copied back names everyone rightly
    if not any(re.search(rf"(?<!\w){_alias_re(c)}(?!\w)", answer) for c in cast):
        return False  # a scene with none of them (one may enter after the token budget)
    for a in cast:
        for b in cast:
            if a is b:
                continue
            if b.last and re.search(rf"\b{re.escape(a.first)}\s+{re.escape(b.last)}\b", answer):
                return False  # a first name joined to another's surname
            name_a, role_b = _alias_re(a), _role_re(b)
            apposition = (
                rf"(?<!\w){name_a},?\s+(?:the|a|an)\s+(?:[\w'’-]+\s+){{0,2}}?"
                rf"{role_b}(?!\w)"
            )  # "Kofi Mensah, the vault's keeper"
            title = rf"(?<!\w){role_b}\s+{name_a}(?!\w)"  # "keeper Kofi"
            if re.search(apposition, answer, re.I) or re.search(title, answer, re.I):
                return False
    return not _wrong_self_introduction(answer, cast)


def _wrong_self_introduction(answer: str, cast: list[Character]) -> bool:
    """A line where someone introduces themself by another's name ("I'm Ilyan, the
    archivist," Mara said): in one paragraph, a self-introduction naming X and a speech tag
    naming someone else, with none naming X."""
    intro = r"(?:I'm|I am|my name is|call me|this is)\s+"
    for para in re.split(r"\n\s*\n|\n", answer):
        named = [c for c in cast if re.search(intro + _alias_re(c), para, re.I)]
        if not named:
            continue
        tags = [
            c
            for c in cast
            if re.search(rf"{_alias_re(c)}\s+{_SPEECH}\b|\b{_SPEECH}\s+{_alias_re(c)}", para)
        ]
        for x in named:
            if tags and x not in tags:
                return True
    return False
