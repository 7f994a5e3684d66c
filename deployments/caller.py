"""Who is asking, as the service sees it: the caller's access, the id the router gave its request, and what
the audit record will say of it.

The edge builds one per HTTP or MCP request (`middleware.guard`, which sets `CURRENT` for the adapters
and writes the audit record when the request ends); deployment-handle callers get one from the service
(`RouterService.handle_caller`: trusted, they name their principal, and are neither limited nor audited).
"""

from __future__ import annotations

import contextvars
import uuid
from dataclasses import dataclass, field
from typing import Any

from router.errors import RouterError
from router.security.policy import Access


@dataclass
class Caller:
    access: Access
    # Assigned by the router (a caller's `x-request-id` goes to the audit beside it): the audit record's,
    # every error body's, and an answer's `routing.request_id` (what feedback names).
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    edge: bool = True  # through HTTP or MCP: authenticated, rate-limited and audited
    route: dict[str, Any] = field(default_factory=dict)  # backend, tool, mode, arguments: for the audit record
    # The error the request ended with, whichever surface answered it (an MCP tool error is an HTTP 200).
    error: RouterError | None = None

    def note(self, **route: Any) -> None:
        self.route.update(route)

    def fail(self, error: RouterError) -> None:
        self.error = error


CURRENT: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("mcp_router_caller", default=None)
