"""CatalogGuard: what a backend's listed catalog goes through before anything of it is routed to.

    guard = CatalogGuard(spec.name, settings.security, state_dir=settings.state_dir, trust_changes=False)
    review = guard.review(description, capabilities)
    review.error          # the catalog exceeds a limit: nothing of it is indexed
    review.capabilities   # cleaned, without the held ones
    review.approved       # the held ones as last approved (marked `held`): ranked, refused by name
    review.held, review.flagged, review.sanitized       # shown on /v1/backends

In order: the limits of `security` (a catalog over them is rejected whole, `router.untrusted`);
control and invisible characters removed (`router.untrusted`); the detector of descriptions that
address the model (`router.poisoning`, run on the text as received, so hidden text counts); the pins
(`router.pins`): a capability whose definition changed since it was pinned is held until approved;
and, with `security.quarantine_suspicious`, flagged capabilities are held too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.settings import SecuritySettings
from router.trust.pins import PinStore
from router.trust.poisoning import suspicious_phrases
from router.trust.untrusted import over_limits, sanitise
from router.values import Capability


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogReview:
    description: str
    capabilities: tuple[Capability, ...]
    error: str | None = None
    sanitized: tuple[str, ...] = ()
    held: tuple[dict[str, Any], ...] = ()
    flagged: tuple[dict[str, Any], ...] = ()
    approved: tuple[Capability, ...] = ()  # held changes as last approved: ranked, never called


class CatalogGuard:
    def __init__(self, backend: str, settings: SecuritySettings, *, state_dir: str | None = None,
                 trust_changes: bool = False) -> None:
        self.backend = backend
        self.settings = settings
        self.trust_changes = trust_changes
        lock = Path(settings.lock_file) if Path(settings.lock_file).is_absolute() else None
        pin_dir = Path(state_dir) / "pins" if state_dir else None
        self.pins = PinStore(backend, pin_dir, lock) if settings.pin_tools else None

    def pins_changed(self) -> bool:
        """An approval (or a new lock file) since the last review: the last catalog should be reviewed again."""
        return self.pins is not None and self.pins.changed_on_disk()

    def review(self, description: str, capabilities: Sequence[Capability]) -> CatalogReview:
        problem = over_limits(description, capabilities, self.settings)
        if problem is not None:
            return CatalogReview(description="", capabilities=(),
                                 error=f"catalog of backend {self.backend!r} rejected: {problem}")
        clean_description, clean, notes = sanitise(description, capabilities)
        flagged = []
        for raw, cap in zip(capabilities, clean, strict=True):
            # The text as received: invisible characters are themselves a sign.
            rules = suspicious_phrases(f"{raw.name}\n{raw.title or ''}\n{raw.description}\n"
                                       f"{_schema_text(raw.input_schema)}")
            if rules:
                flagged.append({"tool": cap.name, "kind": cap.kind, "rules": list(rules)})
        held: list[dict[str, Any]] = []
        approved: tuple[Capability, ...] = ()
        if self.pins is not None:
            clean, pinned_out, approved = self.pins.review(clean, trust_changes=self.trust_changes)
            held.extend(pinned_out)
        if self.settings.quarantine_suspicious and flagged:
            names = {f["tool"] for f in flagged}
            held.extend({"tool": f["tool"], "kind": f["kind"], "reason": "suspicious description",
                         "rules": f["rules"]} for f in flagged)
            clean = tuple(c for c in clean if c.name not in names)
        return CatalogReview(description=clean_description, capabilities=tuple(clean), sanitized=notes,
                             held=tuple(held), flagged=tuple(flagged), approved=approved)


def _schema_text(schema: Any) -> str:
    """Every string of a schema, its keys too: titles, enums, defaults, examples and property names reach the
    model as parameter descriptions do."""
    if isinstance(schema, dict):
        return " ".join([*map(str, schema), *(_schema_text(v) for v in schema.values())]).strip()
    if isinstance(schema, list):
        return " ".join(_schema_text(v) for v in schema).strip()
    return schema if isinstance(schema, str) else ""
