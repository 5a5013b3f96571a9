"""Where an engine's drafts come from: each registered source built once per engine (it keeps
its state across requests, in the pair's caches), and why one cannot run here.

Speculation needs caches that can be rewound after rejected drafts: a target whose cache
cannot be stops every source; a draft model that cannot (or a pair that cannot speculate)
stops the sources that need it, while the copies (lookup, tree) still run.
"""

from __future__ import annotations

import mlx.nn as nn

from core.decode.caches import PairCaches
from core.drafting import registry
from core.drafting.base import Drafter, DraftUnavailable
from core.errors import UserError
from core.settings import Settings


def _untrimmable(model: nn.Module, role: str) -> str | None:
    """Why `model`'s cache cannot be rewound after rejected drafts, as a clause, or None."""
    from core.models import untrimmable_reason

    why = untrimmable_reason(model)
    return f"the {role} {why}" if why else None


class DraftSources:
    """The draft sources of one engine, by name, over its pair's caches."""

    def __init__(self, caches: PairCaches, vocab_size: int, *, speculation_ok: bool,
                 speculation_reason: str | None) -> None:
        self.caches, self.vocab_size = caches, vocab_size
        # Why nothing can speculate (the target's cache cannot be rewound), and why the draft
        # model cannot (sources that need no model still can).
        self.target_reason = _untrimmable(caches.target.model, "target")
        if caches.draft is None:
            self.draft_reason = speculation_reason or "no draft model is loaded"
        else:
            self.draft_reason = _untrimmable(caches.draft.model, "draft") or (
                None if speculation_ok else speculation_reason or "the pair cannot speculate"
            )
        self._unavailable: dict[str, str] = {}  # source -> why it cannot draft here

    def get(self, name: str) -> Drafter:
        """The source registered as `name`, built on first use (the hybrid builds its parts
        through this too). Raises DraftUnavailable when it cannot run here."""
        drafters = self.caches.drafters
        if name not in drafters:
            try:
                make = registry.factory(name)
            except KeyError:
                known = ", ".join(registry.names())
                raise UserError(f"Unknown draft source {name!r}; known: {known}.") from None
            res = registry.DraftResources(
                self.caches.draft, self.vocab_size, self.draft_reason, source=self.get
            )
            drafters[name] = make(res)
        return drafters[name]

    def unavailable_reason(self, source: str) -> str | None:
        """Why speculation with `source` falls back to target-only here, or None if it can run
        (asked once per source: the answer holds for the pair as loaded)."""
        if self.target_reason is not None:
            return self.target_reason
        if source not in self._unavailable:
            try:
                self.get(source)
            except DraftUnavailable as exc:
                self._unavailable[source] = str(exc)
        return self._unavailable.get(source)

    def configure(self, s: Settings) -> None:
        """`s`'s source built (a hybrid builds its parts), then every built drafter configured
        by these settings (a source reads only the settings it has)."""
        self.get(s.draft_source)
        for d in list(self.caches.drafters.values()):
            configure = getattr(d, "configure", None)
            if configure is not None:
                configure(s)
