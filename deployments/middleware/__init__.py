"""The ASGI middleware every request passes, one concern per module, outermost first:

    TraceContext(Guard(BodyLimit(app)))          # deployments.asgi builds it; RequestIdCheck wraps /mcp only

`trace_context` joins the caller's W3C trace; `guard` authenticates, admits (in-flight and rate limits),
sets the `Caller` and writes the audit record; `body_limit` refuses oversized bodies before any parsing;
`request_id` refuses JSON-RPC requests whose id MCP forbids.
"""

from deployments.middleware.body_limit import BodyLimit
from deployments.middleware.guard import PUBLIC_PATHS, Guard
from deployments.middleware.request_id import RequestIdCheck
from deployments.middleware.trace_context import TraceContext

__all__ = ["PUBLIC_PATHS", "BodyLimit", "Guard", "RequestIdCheck", "TraceContext"]
