"""The ingress deployment: HTTP (/v1/*, /health, /docs), MCP at /mcp, and typed handle methods.

Python services call it through Serve with the same models HTTP uses:

    handle = serve.get_app_handle("mcp-router")
    response: QueryResponse = await handle.query.remote(QueryRequest(question="What time is it in Tokyo?"))

The ASGI app is built inside the replica (`__serve_build_asgi_app__`): the MCP endpoint cannot be
pickled, and routes need the replica's router.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
from fastapi import FastAPI
from ray import serve

from actors.directory import BackendDirectory
from actors.executor import ActorTable, RayExecutor
from deployments.http import BodyLimit, TraceContext, build_http_app
from deployments.mcp_endpoint import McpEndpoint
from deployments.metrics import RouterMetrics
from router.chat import ChatService
from router.config import RouterSettings
from router.core import Router
from router.embeddings import CachedEmbedder, Embedder, EmbeddingCache, MicroBatcher, build_embedder
from router.errors import LLMNotConfigured, PayloadTooLarge
from router.intent import IntentClassifier
from router.llm import LLMClient
from router.models import (
    BackendInfo,
    BackendStatus,
    ChatRequest,
    ChatResponse,
    HealthResponse,
    QueryRequest,
    QueryResponse,
    RouteRequest,
    RouteResponse,
    ToolSelectRequest,
    ToolSelectResponse,
)
from router.telemetry import configure_tracing
from router.tools import ToolSelector

log = logging.getLogger("mcp_router.ingress")


def _llm_client(settings: RouterSettings) -> tuple[LLMClient | None, LLMNotConfigured | None]:
    """The LLM client when one is configured; otherwise the error naming the missing setting."""
    try:
        return LLMClient(settings.llm), None
    except LLMNotConfigured as exc:
        return None, exc


class _HandleEmbedder:
    """The embedder deployment behind the `Embedder` protocol: single texts go through `@serve.batch`."""

    def __init__(self, handle: Any, model_id: str) -> None:
        self._handle = handle
        self.model_id = model_id

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 1:
            return np.asarray([await self._handle.embed_one.remote(texts[0])])
        return np.asarray(await self._handle.embed.remote(list(texts)))


async def _query_embedder(settings: RouterSettings, handle: Any) -> Embedder:
    """Where questions are embedded: in this replica (a small local model, in a thread, concurrent
    questions batched together), or by the `Embedder` deployment (large or GPU models)."""
    if handle is None:
        model = build_embedder(settings.embeddings)
        return MicroBatcher(model, settings.embeddings.batch_size)
    return _HandleEmbedder(handle, await handle.model_id.remote())


async def _backends_only(acquired: Any) -> dict[str, Any]:
    handles, _ = await acquired
    return handles


# A replica that dies is noticed within a second or two (its health check does nothing but answer).
@serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1000, health_check_period_s=1)
@serve.ingress()
class RouterIngress:
    async def __init__(self, settings: RouterSettings, pool: Any, embedder: Any,  # type: ignore[misc]
                       generation: float) -> None:
        self.settings = settings
        configure_tracing(settings.telemetry.service_name)
        self.metrics = RouterMetrics(settings.telemetry.metrics, backends=(b.name for b in settings.backends),
                                     intents=settings.intents.intents)
        query_embedder = await _query_embedder(settings, embedder)
        self.embedder = CachedEmbedder(query_embedder, EmbeddingCache(f"{settings.state_dir}/embeddings"))

        async def acquire() -> tuple[dict[str, Any], Any]:
            """This configuration's backend actors and the performance actor, from the application's pool."""
            handles, performance = await pool.acquire.remote(settings.enabled_backends, settings.resilience,
                                                             generation)
            return dict(handles), performance

        handles, self.perf_actor = await acquire()
        self.actors = ActorTable(handles, lambda: _backends_only(acquire()))
        self.executor = RayExecutor(self.actors)
        self.llm, llm_error = _llm_client(settings)
        prototypes = IntentClassifier.prototype_texts(settings.intents)
        proto_vecs = {n: await self.embedder.embed(t) for n, t in prototypes.items()}
        self.directory = BackendDirectory(settings, self.actors, self.perf_actor, self.embedder,
                                          on_index=lambda cats, index: self.router.set_catalogs(cats, index),
                                          on_status=self.metrics.observe_health)
        self.router = Router(settings, executor=self.metrics.wrap_executor(self.executor),
                             embed=query_embedder.embed,
                             stats=self.directory, classifier=IntentClassifier(settings.intents, proto_vecs),
                             llm=self.llm)
        await self.directory.wait_ready(timeout_s=min(20.0, max(b.connect_timeout_s for b in
                                                                 settings.enabled_backends) if settings.backends
                                                      else 1.0))
        self.selector = ToolSelector(settings.tool_selection, query_embedder.embed, chooser=self.llm)
        self.chat_service = ChatService(self.llm, self.selector, self.router.executor, not_configured=llm_error)
        self.directory.start()
        self.extensions: list[Any] = [McpEndpoint(self)]
        log.info("router ready: %d backends, %d capabilities", len(self.actors.handles),
                 len(self.router.index) if self.router.index else 0)

    # -- ASGI ------------------------------------------------------------------------------------

    def __serve_build_asgi_app__(self) -> Any:
        app = build_http_app(self, lifespan=self._lifespan)
        return TraceContext(BodyLimit(app, self.settings.server.max_body_bytes))

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for ext in self.extensions:
                await stack.enter_async_context(ext.lifespan())
            yield

    def extend_http(self, app: FastAPI) -> None:
        """Later features (MCP endpoint, chat, tool selection) add their routes here."""
        for ext in self.extensions:
            ext.mount(app)

    # -- typed API (HTTP routes and deployment-handle callers share these) ----------------------

    def _check_question(self, question: str) -> None:
        """The question-length limit, here so that HTTP, MCP and handle callers all meet it."""
        limit = self.settings.server.max_question_bytes
        size = len(question.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise PayloadTooLarge(f"question is {size} bytes; the limit is {limit}", limit=limit)

    async def query(self, request: QueryRequest) -> QueryResponse:
        self._check_question(request.question)
        return await self.metrics.track_query(request, self.router.query(request))

    async def route(self, request: RouteRequest) -> RouteResponse:
        self._check_question(request.question)
        return await self.router.route(request)

    async def select_tools(self, request: ToolSelectRequest) -> ToolSelectResponse:
        selection = await self.selector.select(self.router.index, request.messages, session_id=request.session_id,
                                               max_servers=request.max_servers)
        return ToolSelectResponse(tools=selection.tools, servers=selection.servers, reasoning=selection.reasoning,
                                  metrics=selection.metrics)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        return await self.chat_service.chat(request, self.router.index)

    async def backends(self) -> list[BackendInfo]:
        statuses = self.directory.statuses()
        out = []
        for spec in self.settings.backends:
            status = statuses.get(spec.name) or BackendStatus(
                name=spec.name, kind=spec.kind, transport="-", health="down",
                last_error=None if spec.enabled else "disabled in the configuration")
            out.append(BackendInfo.from_status(status))
        return out

    async def health(self) -> HealthResponse:
        await self.directory.refresh_statuses()
        statuses = self.directory.statuses()
        report = {n: {"status": s.health, "last_error": s.last_error} for n, s in statuses.items()}
        up = [s for s in statuses.values() if s.available]
        if not up:
            status = "down"
        elif len(up) < len(self.settings.enabled_backends):
            status = "degraded"
        else:
            status = "ok"
        return HealthResponse(status=status, backends=report)  # type: ignore[arg-type]

    async def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = await asyncio.wait_for(self.perf_actor.stats.remote(), 10)
        data["backends"] = {n: {"health": s.health, "consecutive_failures": s.consecutive_failures,
                                "ejections": s.ejections, "ejected_until": s.ejected_until, "inflight": s.inflight}
                            for n, s in self.directory.statuses().items()}
        return data

    async def check_health(self) -> None:
        """Serve's replica health check: the replica is alive if its event loop answers."""
        return None
