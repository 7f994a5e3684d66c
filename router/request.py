"""One request as the router runs it: a frozen value, resolved once at the edge and carried through the
stages, each of which takes what it uses.

    request = Request.of(QueryRequest(question="What time is it in Tokyo?"), settings.resilience,
                         access=access, session_key="alice/s1", request_id=rid, charge=charge)
    response = await router.query(request)

The edge (the service behind HTTP, MCP and the deployment handle) resolves what a request leaves to
defaults (its mode, its deadline within the caller's policy), scopes its session to the caller and gives
it the router's request id; nothing later computes them again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from router.literals import ChargeFn, Mode
from router.models import Parameters, QueryRequest, RouteRequest
from router.security.policy import Access
from router.settings import ResilienceSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    question: str
    arguments: dict[str, Any] | None = None
    intent: str | None = None  # the caller's override of the classified intent
    backend: str | None = None  # the caller's choice of backend (and `tool`): routing is skipped
    tool: str | None = None
    fallback_on_override: bool = False
    k: int | None = None  # candidates wanted (a dry run's `k`)
    mode: Mode = "fallback"
    deadline_s: float = 30.0
    session_id: str | None = None  # as the caller named it: what an answer shows
    session_key: str | None = None  # what the router keeps the session under (scoped to the caller)
    parameters: Parameters | None = None
    include_routing_metadata: bool = True
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    access: Access | None = None  # None: everything is allowed (tests, benchmarks, trusted callers)
    charge: ChargeFn | None = None  # what each backend call sent costs the caller

    @property
    def session(self) -> str | None:
        """The key of the request's session: scoped to the caller when the edge scoped it."""
        return self.session_key or self.session_id

    @property
    def principal(self) -> str | None:
        """The name examples and decisions are recorded under: None for an anonymous caller."""
        return None if self.access is None or self.access.principal.anonymous else self.access.principal.name

    @classmethod
    def of(cls, query: QueryRequest, resilience: ResilienceSettings, *, access: Access | None = None,
           session_key: str | None = None, request_id: str | None = None,
           charge: ChargeFn | None = None) -> Request:
        """A query with its defaults resolved: the mode, and a deadline the caller may lower but never raise
        (above the router's `resilience.deadline_s`, or, with `access`, above its policy's largest)."""
        default = resilience.deadline_s
        deadline = access.deadline(query.deadline_s, default) if access is not None else query.deadline_s or default
        return cls(question=query.question, arguments=query.arguments, intent=query.intent, backend=query.backend,
                   tool=query.tool, fallback_on_override=query.fallback_on_override,
                   mode=query.mode or resilience.default_mode, deadline_s=min(deadline, default),
                   session_id=query.session_id, session_key=session_key, parameters=query.parameters,
                   include_routing_metadata=query.include_routing_metadata,
                   request_id=request_id or uuid.uuid4().hex, access=access, charge=charge)

    @classmethod
    def dry_run(cls, route: RouteRequest, *, access: Access | None = None) -> Request:
        """A dry run (`/v1/route`): decided, never called."""
        return cls(question=route.question, intent=route.intent, backend=route.backend, k=route.k, access=access)
