"""Which models a benchmark ran, in every row and on the report's page.

A row's `settings.target` / `settings.draft` are what was loaded, never the profile's default
(`--target` once left `settings.target = "default"` in every row while a 72B shape ran), and
each row's `models` holds the identities (core/models/identify.py) of the models it ran: the
target, and the draft unless the row is target-only. The page names them with the tool's
version and commit (core/version.py).
"""

from __future__ import annotations

from typing import Any

from core.identity import ModelIdentity, identities_to_dict
from core.version import version_text


def stamp_models(
    results: list[Any], models: dict[str, ModelIdentity | None] | None
) -> dict[str, ModelIdentity | None] | None:
    """Write the loaded pair into every row's settings and `models`; returns `models`.

    With `models` None (an Engine built from bare modules) the rows are left as they are.
    """
    if models is None:
        return None
    target, draft = models.get("target"), models.get("draft")
    for r in results:
        if target is not None:
            r.settings["target"] = target.spec
        r.settings["draft"] = draft.spec if draft is not None else ""
        ran_draft = r.settings.get("mode") != "target-only"
        r.models = {"target": target, "draft": draft if ran_draft else None}
    return models


def models_protocol(models: dict[str, ModelIdentity | None]) -> dict[str, Any]:
    """The report's `protocol.models`: each role as 'spec (name)', and the identities."""
    out: dict[str, Any] = {
        role: f"{m.spec} ({m.name})" if m is not None else None for role, m in models.items()
    }
    out["identities"] = identities_to_dict(models)
    return out


def provenance_markdown(report: Any) -> list[str]:
    """The page's lines naming each model in full and the tool that measured."""
    identities = (report.protocol.get("models") or {}).get("identities") or {}
    out = []
    for role in ("target", "draft"):
        d = identities.get(role)
        if isinstance(d, dict):
            out.append(f"{role.capitalize()}: {ModelIdentity.from_dict(d).summary()}.  ")
    out.append(f"Measured by {version_text(report.environment)}.  ")
    return out
