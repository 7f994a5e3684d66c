"""The replica's ASGI app, composed from its parts as a plain function of them:

    app = build_asgi_app(service)
    # TraceContext(Guard(BodyLimit(FastAPI routes + /mcp)))

The HTTP adapter's routes, the MCP adapter mounted at /mcp (its session manager runs in the app's
lifespan: Starlette does not run a mounted app's own), and the middleware every request passes. Built
inside the replica: the MCP app cannot be pickled.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from starlette.types import ASGIApp

from deployments.gateway import Gateway
from deployments.http import build_http_app
from deployments.mcp import build_mcp_server, mcp_app
from deployments.middleware import BodyLimit, Guard, TraceContext
from deployments.middleware.hosts import AnsweredHosts, host_check
from deployments.service import RouterService
from router.security.audit import AuditLog


def build_asgi_app(service: RouterService, audit: AuditLog) -> ASGIApp:
    settings = service.settings
    mcp_server = build_mcp_server(service, settings)
    security = host_check(settings.server.allowed_hosts)
    gateway = Gateway(service, settings, security) if settings.server.gateway else None

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp_server.session_manager.run(), gateway.running() if gateway else contextlib.nullcontext():
            yield

    app = build_http_app(service, lifespan=lifespan)
    if gateway is not None:  # before /mcp, which would take its paths
        app.mount("/mcp/backends", gateway)
    app.mount("/mcp", mcp_app(mcp_server, settings))
    server = settings.server
    guarded = Guard(BodyLimit(app, server.max_body_bytes, server.body_timeout_s), server.auth,
                    max_header_bytes=server.max_header_bytes, max_in_flight=server.max_in_flight, audit=audit,
                    limiter=service.limiter, hosts=AnsweredHosts.for_server(server))
    return TraceContext(guarded)
