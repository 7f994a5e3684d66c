"""What a principal may do, as one value the router consults: `Access`.

Routing happens inside the allowed set: the router asks `access.allows(capability)` when it builds the
principal's view of the catalog, so a denied tool is never a candidate and never shown. Requests
that ask for something the policy forbids (a mode, a deadline, chat, stats, a backend override) are
refused with 403 naming the policy.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from functools import cached_property

from router.errors import Forbidden
from router.security.identity import Principal
from router.security.settings import AuthSettings, Policy

EVERYTHING = Policy()


@dataclass(frozen=True)
class Access:
    principal: Principal
    policy: Policy

    @classmethod
    def of(cls, principal: Principal, settings: AuthSettings) -> Access:
        return cls(principal, settings.policies.get(principal.policy, EVERYTHING))

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

    def sees_backend(self, backend: str) -> bool:
        """Whether anything of the backend could be allowed (its capabilities are checked one by one)."""
        if any(p == f"{backend}/*" for p in self._deny):
            return False
        return any(fnmatch.fnmatchcase(backend, p.split("/", 1)[0]) for p in self._allow)

    def refuse(self, what: str) -> Forbidden:
        return Forbidden(f"policy {self.principal.policy!r} of {self.principal.name!r} does not allow {what}",
                         policy=self.principal.policy)

    def check_request(self, *, mode: str | None = None, deadline_s: float | None = None,
                      backend: str | None = None) -> None:
        p = self.policy
        if mode is not None and mode not in p.modes:
            raise self.refuse(f"mode {mode!r} (allowed: {', '.join(p.modes)})")
        if deadline_s is not None and p.max_deadline_s is not None and deadline_s > p.max_deadline_s:
            raise self.refuse(f"deadline_s above {p.max_deadline_s}")
        if backend is not None and not p.backend_override:
            raise self.refuse("naming a backend")

    def check(self, flag: str, what: str) -> None:
        if not getattr(self.policy, flag):
            raise self.refuse(what)


def _pattern(glob: str) -> str:
    return glob if "/" in glob or glob == "*" else f"{glob}/*"
