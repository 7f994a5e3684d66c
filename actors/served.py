"""ServedCatalog: what a backend lists, as the router serves it, and what it holds back from every caller.

The server's listing goes through the catalog review (`router.trust.review`: limits, cleaning, poisoning
scan, pins), then the operator's `read_only` word (or `read_only_tools`) over the server's annotations and
`fixed_arguments`: a parameter the operator fixed is taken out of the tools' schemas and put into their calls. What
the review holds is never sent, however it is asked for: by a routed call, by name through the gateway, or a
resource by URI.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

from actors.backends.base import make_catalog
from router.schemas import properties_of
from router.settings import BackendSpec
from router.trust.review import CatalogGuard, CatalogReview
from router.values import Capability, Catalog, fixed_digest

log = logging.getLogger("mcp_router.backend")


class ServedCatalog:
    def __init__(self, spec: BackendSpec, guard: CatalogGuard) -> None:
        self.spec = spec
        self.guard = guard
        self.listed: Catalog | None = None  # as the server last listed it
        self.review: CatalogReview | None = None
        self.catalog: Catalog | None = None  # as served
        self._fixed: dict[str, dict[str, Any]] = {}  # tool name -> the fixed arguments it takes
        self._unused: list[str] = []  # fixed arguments no tool takes, as last logged
        self._reviewing = asyncio.Lock()

    async def serve(self, listed: Catalog) -> Catalog:
        """Serve the reviewed catalog: a rejected one as empty (nothing indexed, not even its description).
        The review (every text scanned, pins read and written) runs in a thread, one at a time: a large
        catalog took tens of seconds, and on the host's event loop it held every other backend's calls. A
        listing the last review saw, with no approval since, is not reviewed again."""
        async with self._reviewing:
            if self.catalog is not None and listed == self.listed and not self.guard.pins_changed():
                return self.catalog
            review = await asyncio.to_thread(self.guard.review, listed.description, listed.capabilities)
            return self._served(listed, review)

    def _served(self, listed: Catalog, review: CatalogReview) -> Catalog:
        before = self.review
        if review.error and (before is None or before.error != review.error):
            log.warning("backend %s: %s", self.spec.name, review.error)
        for held in review.held:
            if not any(h == held for h in (before.held if before else ())):
                log.warning("backend %s: %s %r held out of routing: %s", self.spec.name, held["kind"], held["tool"],
                            held["reason"])
        self.listed, self.review = listed, review
        capabilities = review.capabilities
        if self.spec.read_only is not None:  # the operator's word over the server's annotations
            capabilities = tuple(replace(c, read_only=self.spec.read_only, idempotent=False) for c in capabilities)
        elif readers := getattr(self.spec, "read_only_tools", []):  # the operator's word for unannotated tools
            capabilities = tuple(replace(c, read_only=True) if c.kind == "tool" and any(
                fnmatchcase(c.name, p) for p in readers) else c for c in capabilities)
        fixed = getattr(self.spec, "fixed_arguments", {})
        self._fixed = {c.name: taken for c in (*capabilities, *review.approved) if c.kind == "tool"
                       and (taken := {k: v for k, v in fixed.items() if k in _parameters(c.input_schema)})}
        unused = sorted(set(fixed) - {k for taken in self._fixed.values() for k in taken})
        if unused and unused != self._unused:
            log.warning("backend %s: no tool takes the fixed argument(s) %s", self.spec.name, ", ".join(unused))
        self._unused = unused
        self.catalog = make_catalog(self.spec.name, review.description, tuple(map(self._unfixed, capabilities)),
                                    listed.intents, read_only=self.spec.read_only is True,
                                    held=tuple(map(self._unfixed, review.approved)))
        return self.catalog

    def _unfixed(self, capability: Capability) -> Capability:
        """The tool without the parameters the operator fixed (nobody but the router fills them)."""
        taken = self._fixed.get(capability.name) if capability.kind == "tool" else None
        if not taken:
            return capability
        schema = dict(capability.input_schema)
        if "properties" in schema:
            schema["properties"] = {k: v for k, v in properties_of(schema).items() if k not in taken}
        if isinstance(schema.get("required"), list):
            schema["required"] = [r for r in schema["required"] if r not in taken]
            if not schema["required"]:
                del schema["required"]  # an empty list is no schema to older validators
        digests = tuple((k, fixed_digest(v)) for k, v in sorted(taken.items()))
        return replace(capability, input_schema=schema, fixed=digests)

    def with_fixed(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call's arguments with the operator's fixed values in, over any the caller gave for them; to a tool
        that does not name one, the caller's value of it is not sent either."""
        fixed = getattr(self.spec, "fixed_arguments", {})
        if not fixed:
            return arguments
        return {**{k: v for k, v in arguments.items() if k not in fixed}, **self._fixed.get(tool, {})}

    def approvals_pending(self) -> bool:
        """An approval (or a new lock file) since the last review: the last listing should be served again."""
        return self.listed is not None and self.guard.pins_changed()

    def held(self, kind: str, name: str) -> bool:
        """Held by the review (a changed definition) since the caller's view of the catalog was taken."""
        return self.review is not None and any(h["tool"] == name and h["kind"] == kind for h in self.review.held)

    def held_uri(self, uri: object) -> bool:
        """A held resource, read by its URI rather than named."""
        return self.review is not None and uri in self.review.held_uris

    def held_message(self, name: str) -> str:
        return f"{self.spec.name}/{name} is held by the catalog review"


def _parameters(schema: dict[str, Any]) -> set[str]:
    """The parameters a schema names, as properties or only as required."""
    required = schema.get("required")
    return {*properties_of(schema), *(r for r in required if isinstance(r, str))} if isinstance(required, list) else \
        set(properties_of(schema))
