"""The ingress deployment: a thin Serve deployment over one `RouterService`.

It serves HTTP (/v1/*, /health, /docs) and MCP (/mcp) with an app built inside the replica
(`__serve_build_asgi_app__`: the MCP app cannot be pickled), and offers the same typed API to Python
services through a deployment handle, with the models HTTP uses:

    handle = serve.get_app_handle("mcp-router")
    response: QueryResponse = await handle.query.remote(QueryRequest(question="What time is it in Tokyo?"))

Handle callers are inside the Ray cluster and trusted: a request names its principal (`principal=`), and
is neither rate-limited nor audited.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from ray import serve

from actors.host import freeze_startup_heap
from deployments.asgi import build_asgi_app
from deployments.wiring import build_service
from router.models import (
    BackendDetail,
    BackendInfo,
    ChatRequest,
    ChatResponse,
    FeedbackRequest,
    FeedbackResponse,
    HealthResponse,
    QueryRequest,
    QueryResponse,
    RouteRequest,
    RouteResponse,
    ToolSelectRequest,
    ToolSelectResponse,
)
from router.security.audit import AuditLog
from router.settings import RouterSettings


def replica_logging() -> None:
    """The router's log records (each request's audit line among them, unless it goes to a file) as plain
    lines on stderr, which Ray keeps in the replica's log. Set before the MCP SDK's server is built: finding
    the root logger without a handler, it would install rich's console handler there, whose rendering of
    every record costs more than the rest of a request."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    logging.getLogger("mcp_router").setLevel(logging.INFO)


# A replica that dies is noticed within a second or two (its health check does nothing but answer).
@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1000, health_check_period_s=1)
@serve.ingress()
class RouterIngress:
    async def __init__(self, settings: RouterSettings, pool: Any, embedder: Any,  # type: ignore[misc]
                       generation: float) -> None:
        replica_logging()
        self.service = await build_service(settings, pool, embedder, generation)
        self.audit = AuditLog(settings.audit)
        freeze_startup_heap()

    async def __del__(self) -> None:
        """Serve's graceful stop: background work ends (an index being tuned) and buffered outcomes are sent."""
        service = getattr(self, "service", None)  # None when the replica failed to start
        if service is not None:
            await service.directory.stop()

    def __serve_build_asgi_app__(self) -> Any:
        return build_asgi_app(self.service, self.audit)

    async def query(self, request: QueryRequest) -> QueryResponse:
        return await self.service.query(request, self.service.handle_caller(request.principal))

    async def route(self, request: RouteRequest) -> RouteResponse:
        return await self.service.route(request, self.service.handle_caller(request.principal))

    async def select_tools(self, request: ToolSelectRequest) -> ToolSelectResponse:
        return await self.service.select_tools(request, self.service.handle_caller(request.principal))

    async def chat(self, request: ChatRequest) -> ChatResponse:
        return await self.service.chat(request, self.service.handle_caller(request.principal))

    async def feedback(self, request: FeedbackRequest) -> FeedbackResponse:
        return await self.service.feedback(request, self.service.handle_caller(request.principal))

    async def backends(self, principal: str | None = None) -> list[BackendInfo]:
        return await self.service.backends(self.service.handle_caller(principal))

    async def backend(self, name: str, principal: str | None = None) -> BackendDetail:
        return await self.service.backend(name, self.service.handle_caller(principal))

    async def delete_examples(self, name: str, principal: str | None = None) -> dict[str, Any]:
        return await self.service.delete_examples(name, self.service.handle_caller(principal))

    async def health(self) -> HealthResponse:
        return await self.service.health(self.service.handle_caller(None))

    async def stats(self, principal: str | None = None) -> dict[str, Any]:
        return await self.service.stats(self.service.handle_caller(principal))

    async def check_health(self) -> None:
        """Serve's replica health check: the replica is alive if its event loop answers."""
        return None
