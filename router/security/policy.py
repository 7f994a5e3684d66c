"""What a principal may do, as one value the router consults: `Access`.

Routing happens inside the allowed set: the router asks `access.allows(capability)` when it builds the
principal's view of the catalog, so a denied tool is never a candidate and never shown. Requests
that ask for something the policy forbids (a mode, a deadline, chat, stats, a backend override) are
refused with 403 naming the policy.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from router.errors import Forbidden
from router.models import BackendInfo
from router.security.identity import Principal
from router.settings import AuthSettings, Policy
from router.trust.untrusted import noted_capability
from router.values import BackendStatus, Catalog

# What a principal whose policy is not configured gets (the `public` caller of /health, say): nothing.
NOTHING = Policy(allow=[], modes=[], chat=False, backend_override=False, stats=False, feedback=False)
PUBLIC_POLICY = "public"


@dataclass(frozen=True)
class Access:
    principal: Principal
    policy: Policy

    @classmethod
    def of(cls, principal: Principal, settings: AuthSettings) -> Access:
        return cls(principal, settings.policies.get(principal.policy, NOTHING))

    @cached_property
    def unrestricted(self) -> bool:
        """Every capability is allowed: the router's shared view serves this principal."""
        return not self.policy.deny and "*" in self.policy.allow

    @cached_property
    def _allow(self) -> tuple[str, ...]:
        return tuple(_pattern(p) for p in self.policy.allow)

    @cached_property
    def _deny(self) -> tuple[str, ...]:
        return tuple(_pattern(p) for p in self.policy.deny)

    def allows(self, backend: str, capability: str) -> bool:
        key = f"{backend}/{capability}"
        if any(fnmatch.fnmatchcase(key, p) for p in self._deny):
            return False
        return any(fnmatch.fnmatchcase(key, p) for p in self._allow)

    def allows_all(self, backend: str) -> bool:
        """Whether every capability of the backend is allowed, including ones no listing names (a resource
        read by its URI, a template): an allow pattern covers the whole backend and no deny pattern
        could reach into it."""
        if any(_may_reach(p, backend) for p in self._deny):
            return False
        return any(_covers(p, backend) for p in self._allow)

    def sees_backend(self, backend: str) -> bool:
        """Whether anything of the backend could be allowed (its capabilities are checked one by one): some
        allow pattern reaches it and no deny pattern covers all of it (`internal-*` as well as `internal`)."""
        if any(_covers(p, backend) for p in self._deny):
            return False
        return any(fnmatch.fnmatchcase(backend, p.split("/", 1)[0]) for p in self._allow)

    def backend_info(self, status: BackendStatus, catalog: Catalog | None) -> BackendInfo:
        """What this principal may see of a backend's state: counts of the capabilities it may use, and
        of the held, flagged and cleaned ones only those."""
        info = status.info()
        if self.unrestricted:
            return info
        name = status.name

        def mine(capability: str) -> bool:
            return self.allows(name, capability)

        counts = Counter(c.kind for c in (catalog.capabilities if catalog else ()) if mine(c.name))
        return info.model_copy(update={
            "tool_count": counts["tool"], "prompt_count": counts["prompt"], "resource_count": counts["resource"],
            "flow_count": counts["flow"],
            "held_tools": [h for h in info.held_tools if mine(h.tool)],
            "flagged_tools": [f for f in info.flagged_tools if mine(f.tool)],
            "sanitized": [n for n in info.sanitized if (cap := noted_capability(n)) is None or mine(cap)],
            # A rejected catalog's reason may name any of its capabilities.
            "catalog_error": "the backend's catalog was rejected" if info.catalog_error else None})

    def refuse(self, what: str) -> Forbidden:
        return Forbidden(f"policy {self.principal.policy!r} of {self.principal.name!r} does not allow {what}",
                         policy=self.principal.policy)

    def check_request(self, *, mode: str | None = None, deadline_s: float | None = None,
                      backend: str | None = None, tool: str | None = None) -> None:
        p = self.policy
        if mode is not None and mode not in p.modes:
            raise self.refuse(f"mode {mode!r} (allowed: {', '.join(p.modes)})")
        if deadline_s is not None and p.max_deadline_s is not None and deadline_s > p.max_deadline_s:
            raise self.refuse(f"deadline_s above {p.max_deadline_s}")
        if (backend is not None or tool is not None) and not p.backend_override:
            # A named tool is called without the checks routing makes of a guess: as much a choice as a backend.
            raise self.refuse("naming a backend" if backend is not None else "naming a tool")

    def deadline(self, requested: float | None, default: float) -> float:
        """A request's deadline: what it asks for (else `default`), never above the policy's largest; asking
        for more is refused by `check_request`."""
        deadline = requested if requested is not None else default
        cap = self.policy.max_deadline_s
        return min(deadline, cap) if cap is not None else deadline

    def check(self, flag: str, what: str) -> None:
        if not getattr(self.policy, flag):
            raise self.refuse(what)


def _covers(pattern: str, backend: str) -> bool:
    """Whether a glob matches every capability of `backend`: `*`, or a glob of backends followed by `/*`."""
    return pattern == "*" or (pattern.endswith("/*") and fnmatch.fnmatchcase(backend, pattern[:-2]))


def _may_reach(pattern: str, backend: str) -> bool:
    """Whether a glob could match some capability of `backend`. A glob's `*` matches "/" too ("*secret*" could
    match "fs/a/secret"), so only a literal start that parts from "backend/" rules it out."""
    literal = re.split(r"[*?[]", pattern, maxsplit=1)[0]
    prefix = f"{backend}/"
    return prefix.startswith(literal) or literal.startswith(prefix)


def _pattern(glob: str) -> str:
    return glob if "/" in glob or glob == "*" else f"{glob}/*"
