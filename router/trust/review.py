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
from router.trust.untrusted import SERVER_NOTE, over_limits, sanitise
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
    held_uris: frozenset[str] = frozenset()  # the held resources' URIs: not read by URI either


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
        # The server's own description (its MCP instructions) reaches routing and the LLM as a tool's does.
        server_rules = suspicious_phrases(description)
        if server_rules:
            held_too = self.settings.quarantine_suspicious
            notes = (*notes, f"{SERVER_NOTE} {'held' if held_too else 'flagged'}, suspicious "
                             f"({', '.join(server_rules)})")
            clean_description = "" if held_too else clean_description
        flagged = []
        held: list[dict[str, Any]] = []
        renamed: set[int] = set()
        for i, (raw, cap) in enumerate(zip(capabilities, clean, strict=True)):
            # The text as received: invisible characters are themselves a sign.
            rules = suspicious_phrases(f"{raw.name}\n{raw.title or ''}\n{raw.description}\n"
                                       f"{_schema_text(raw.input_schema)}")
            if _renamed(raw, cap):
                # Called by its cleaned name (or with cleaned parameter names), the server would not know it;
                # kept, it would take the name of a tool that has it. Shown by its name as listed, escaped.
                renamed.add(i)
                held.append({"tool": _escaped(raw.name), "kind": cap.kind, "reason": "its name or a parameter's "
                             "holds invisible characters: it cannot be called by the name the server gave it"})
            if rules:
                flagged.append({"tool": _escaped(raw.name) if i in renamed else cap.name, "kind": cap.kind,
                                "rules": list(rules)})
        clean = tuple(c for i, c in enumerate(clean) if i not in renamed)
        approved: tuple[Capability, ...] = ()
        quarantined = {str(f["tool"]) for f in flagged} if self.settings.quarantine_suspicious else set()
        if self.pins is not None:
            clean, pinned_out, approved = self.pins.review(clean, trust_changes=self.trust_changes,
                                                           unpinned=quarantined)
            held.extend(pinned_out)
        if quarantined:
            held.extend({"tool": f["tool"], "kind": f["kind"], "reason": "suspicious description",
                         "rules": f["rules"]} for f in flagged)
            clean = tuple(c for c in clean if c.name not in quarantined)
        held_resources = {h["tool"] for h in held if h["kind"] == "resource"}  # a renamed one by its escaped name
        held_uris = frozenset(c.target for c in capabilities if c.kind == "resource" and c.target
                              and (c.name in held_resources or _escaped(c.name) in held_resources))
        return CatalogReview(description=clean_description, capabilities=tuple(clean), sanitized=notes,
                             held=tuple(held), flagged=tuple(flagged), approved=approved, held_uris=held_uris)


def _renamed(raw: Capability, clean: Capability) -> bool:
    return raw.name != clean.name or _keys(raw.input_schema) != _keys(clean.input_schema)


def _keys(schema: Any) -> Any:
    """The schema's shape with its keys (parameter names among them), without its values."""
    if isinstance(schema, dict):
        return [(k, _keys(v)) for k, v in schema.items()]
    if isinstance(schema, list):
        return [_keys(v) for v in schema]
    return None


def _escaped(name: str) -> str:
    return name.encode("unicode_escape").decode("ascii")


def _schema_text(schema: Any) -> str:
    """Every string of a schema, its keys too: titles, enums, defaults, examples and property names reach the
    model as parameter descriptions do."""
    if isinstance(schema, dict):
        return " ".join([*map(str, schema), *(_schema_text(v) for v in schema.values())]).strip()
    if isinstance(schema, list):
        return " ".join(_schema_text(v) for v in schema).strip()
    return schema if isinstance(schema, str) else ""
