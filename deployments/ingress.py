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
import ray
from fastapi import FastAPI
from ray import serve

from actors.directory import BackendDirectory
from actors.executor import ActorTable, RayExecutor
from actors.feedback import FeedbackView
from deployments import guard
from deployments.http import BodyLimit, TraceContext, build_http_app
from deployments.mcp_endpoint import McpEndpoint
from deployments.metrics import RouterMetrics
from router.core import Router
from router.errors import InvalidRequest, LLMNotConfigured, PayloadTooLarge, UnknownBackend
from router.learning.decisions import chat_examples, chat_question, check_allowed, feedback_examples
from router.learning.examples import accepts_feedback
from router.llm.chat import ChatService
from router.llm.client import LLMClient
from router.llm.selection import ToolSelector
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
from router.retrieval.embeddings import CachedEmbedder, Embedder, EmbeddingCache, MicroBatcher, build_embedder
from router.retrieval.intent import IntentClassifier
from router.security.audit import AuditLog
from router.security.identity import ANONYMOUS, Principal
from router.security.limits import GrantFn, Limiter
from router.security.policy import Access
from router.settings import RouterSettings
from router.strategies.base import ChargedExecutor, ChargeFn
from router.telemetry import configure_tracing
from router.values import BackendStatus

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


async def _shared_rate_limits(settings: RouterSettings, pool: Any) -> GrantFn | None:
    """Leases from the application's shared buckets, when some policy has a rate limit."""
    if not any(p.rate_limit.requests_per_s or p.rate_limit.backend_calls_per_s
               for p in settings.server.auth.policies.values()):
        return None
    actor = await pool.rate_limits.remote()

    async def grant(key: str, rate: float, capacity: float, want: float) -> tuple[float, float]:
        granted, wait = await actor.grant.remote(key, rate, capacity, want)
        return granted, wait

    return grant


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
        self.query_embed = query_embedder.embed
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
        self.learning = FeedbackView(settings.learning,
                                     await pool.feedback.remote(settings.state_dir, settings.learning),
                                     min_confidence=settings.routing.min_confidence)
        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):  # else they come with the next refresh
            await self.learning.refresh()
        self.router = Router(settings, executor=self.metrics.wrap_executor(self.executor),
                             embed=query_embedder.embed,
                             stats=self.directory, classifier=IntentClassifier(settings.intents, proto_vecs),
                             llm=self.llm, learning=self.learning)
        await self.directory.wait_ready(timeout_s=min(20.0, max(b.connect_timeout_s for b in
                                                                 settings.enabled_backends) if settings.backends
                                                      else 1.0))
        self.selector = ToolSelector(settings.tool_selection, query_embedder.embed, chooser=self.llm)
        self.chat_service = ChatService(self.llm, self.selector, self.router.executor, not_configured=llm_error,
                                        max_turns=settings.llm.max_tool_turns)
        self.directory.start()
        self.learning.start()
        self.limiter = Limiter(settings.server.replicas, grant=await _shared_rate_limits(settings, pool))
        self.audit = AuditLog(settings.audit)
        self.extensions: list[Any] = [McpEndpoint(self)]
        log.info("router ready: %d backends, %d capabilities", len(self.actors.handles),
                 len(self.router.index) if self.router.index else 0)

    # -- ASGI ------------------------------------------------------------------------------------

    def __serve_build_asgi_app__(self) -> Any:
        app = build_http_app(self, lifespan=self._lifespan)
        server = self.settings.server
        guarded = guard.Guard(BodyLimit(app, server.max_body_bytes), server.auth,
                              max_header_bytes=server.max_header_bytes, max_in_flight=server.max_in_flight,
                              audit=self.audit, limiter=self.limiter)
        return TraceContext(guarded)

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

    # -- who is asking ---------------------------------------------------------------------------

    def access(self, principal: str | None = None) -> Access:
        """The caller's access: from authentication at the HTTP/MCP edge, or, for deployment-handle callers
        (trusted: they run inside the Ray cluster), from the principal the request names."""
        auth = self.settings.server.auth
        # (The context variable is read through its module: the deployment class is pickled by value.)
        scope = guard.CURRENT.get()
        if scope is not None:
            if principal is not None:
                raise InvalidRequest("principal: set by authentication, not by the request body")
            return scope.access
        if principal is None:
            return Access.of(Principal(ANONYMOUS, auth.anonymous_policy, "anonymous"), auth)
        key = next((k for k in auth.api_keys if k.name == principal), None)
        default = auth.jwt.default_policy if auth.jwt is not None else auth.anonymous_policy
        return Access.of(Principal(principal, key.policy if key else default, "handle"), auth)

    def _charge(self, access: Access) -> ChargeFn | None:
        """What each backend call sent for this caller costs: one from its `backend_calls_per_s` budget
        (callers through the HTTP and MCP edge; handle callers are trusted)."""
        limit = access.policy.rate_limit
        if guard.CURRENT.get() is None or limit.backend_calls_per_s is None:
            return None
        name = access.principal.name

        async def charge(calls: int) -> None:
            await self.limiter.charge_calls(name, limit, calls)

        return charge

    @staticmethod
    def scoped_session(access: Access, session_id: str | None) -> str | None:
        """Sessions are namespaced by principal: the same id from two callers names two sessions."""
        if session_id is None or access.principal.anonymous:
            return session_id
        return f"{access.principal.name}/{session_id}"

    def _note_route(self, **route: Any) -> None:
        scope = guard.CURRENT.get()
        if scope is not None:
            scope.route.update(route)

    # -- typed API (HTTP routes and deployment-handle callers share these) ----------------------

    def _check_question(self, question: str) -> None:
        """The question-length limit, here so that HTTP, MCP and handle callers all meet it."""
        limit = self.settings.server.max_question_bytes
        size = len(question.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise PayloadTooLarge(f"question is {size} bytes; the limit is {limit}", limit=limit)

    async def query(self, request: QueryRequest) -> QueryResponse:
        self._check_question(request.question)
        access = self.access(request.principal)
        mode = request.mode or self.settings.resilience.default_mode
        self._note_route(mode=mode, arguments=request.arguments)
        access.check_request(mode=mode, deadline_s=request.deadline_s, backend=request.backend)
        scoped = request.model_copy(update={
            "principal": None, "session_id": self.scoped_session(access, request.session_id),
            "deadline_s": access.deadline(request.deadline_s, self.settings.resilience.deadline_s)})
        scope = guard.CURRENT.get()
        response = await self.metrics.track_query(scoped, self.router.query(
            scoped, access, self._charge(access), request_id=scope.request_id if scope is not None else None))
        self._note_route(backend=response.backend, tool=response.capability,
                         arguments=response.routing.arguments if response.routing else request.arguments)
        if request.session_id is not None and scoped.session_id != request.session_id:
            response = _unscoped(response, scoped.session_id, request.session_id)
        return response

    async def route(self, request: RouteRequest) -> RouteResponse:
        self._check_question(request.question)
        access = self.access(request.principal)
        access.check_request(backend=request.backend)
        return await self.router.route(request, access)

    async def select_tools(self, request: ToolSelectRequest) -> ToolSelectResponse:
        access = self.access(request.principal)
        index, _ = self.router.view(access)
        selection = await self.selector.select(index, request.messages,
                                               session_id=self.scoped_session(access, request.session_id),
                                               max_servers=request.max_servers)
        return ToolSelectResponse(tools=selection.tools, servers=selection.servers, reasoning=selection.reasoning,
                                  metrics=selection.metrics)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        access = self.access(request.principal)
        access.check("chat", "/v1/chat")
        index, _ = self.router.view(access)
        access.check_request(deadline_s=request.deadline_s)
        scoped = request.model_copy(update={"principal": None,
                                            "session_id": self.scoped_session(access, request.session_id)})
        charge = self._charge(access)
        response = await self.chat_service.chat(
            scoped, index, deadline_s=access.deadline(request.deadline_s, self.settings.llm.deadline_s),
            executor=None if charge is None else ChargedExecutor(self.router.executor, charge))
        if access.policy.feedback:
            await self._learn_from_chat(request, response, _feedback_principal(access))
        return response.model_copy(update={"session_id": request.session_id})

    # -- learning from use ----------------------------------------------------------------------

    async def feedback(self, request: FeedbackRequest) -> FeedbackResponse:
        access = self.access(request.principal)
        access.check("feedback", "giving feedback")
        principal = _feedback_principal(access)
        check_allowed(self.settings)
        decision = await self.learning.decision(request.request_id)
        _, catalogs = self.router.view(access)  # only what the caller may see can be named
        examples = feedback_examples(decision, request, catalogs, principal)
        stored = await self.learning.add(examples)
        return FeedbackResponse(request_id=request.request_id, stored=[e.info() for e in stored])

    async def backend(self, name: str, principal: str | None = None) -> BackendDetail:
        access = self.access(principal)
        info = next((b for b in await self.backends(principal) if b.name == name), None)
        if info is None:
            raise UnknownBackend(f"unknown backend {name!r}", backend=name)
        # Examples hold other callers' questions: shown to operators (the `stats` right), and only for
        # capabilities the caller may use.
        examples = [e for e in await self.learning.examples(name) if access.allows(name, e["name"])] \
            if access.policy.stats else []
        return BackendDetail(**info.model_dump(), examples=examples)

    async def delete_examples(self, name: str, principal: str | None = None) -> dict[str, Any]:
        access = self.access(principal)
        access.check("feedback", "deleting examples")
        access.check("stats", "deleting examples")
        if name not in self.router.visible_backends(access):
            raise UnknownBackend(f"unknown backend {name!r}", backend=name)
        return {"backend": name, "deleted": await self.learning.delete(name)}

    async def _learn_from_chat(self, request: ChatRequest, response: ChatResponse, principal: str | None) -> None:
        if not self.settings.learning.learn_from_chat or not any(c.get("ok") for c in response.tool_calls):
            return
        if not accepts_feedback(self.settings):
            return
        try:
            vector = (await self.query_embed([chat_question(request)]))[0]
        except Exception as exc:  # learning never fails the conversation it learns from
            log.warning("embedding a chat question for learning failed: %s", exc)
            return
        self.learning.learn(chat_examples(request, response, vector, self.router.catalogs, principal))

    async def backends(self, principal: str | None = None) -> list[BackendInfo]:
        access = self.access(principal)
        visible = set(self.router.visible_backends(access))
        statuses = self.directory.statuses()
        out = []
        for spec in self.settings.backends:
            if spec.name not in visible:
                continue
            status = statuses.get(spec.name) or BackendStatus(
                name=spec.name, kind=spec.kind, transport="-", health="down",
                last_error=None if spec.enabled else "disabled in the configuration")
            out.append(access.backend_info(status, self.router.catalogs.get(spec.name)))
        return out

    async def health(self) -> HealthResponse:
        # Public and unlimited: it reads the statuses at most as often as they change, however often it is asked.
        await self.directory.fresh_statuses(max_age_s=0.5)
        statuses = self.directory.statuses()
        up = [s for s in statuses.values() if s.available]
        if not up:
            status = "down"
        elif len(up) < len(self.settings.enabled_backends):
            status = "degraded"
        else:
            status = "ok"
        access = self.access()
        # Liveness is public; which backends exist is not, on a secured router.
        shown = (set(self.router.visible_backends(access))
                 if access.principal.authenticated or not self.settings.server.auth.enabled else set())
        report = {n: {"status": s.health, "last_error": s.last_error} for n, s in statuses.items() if n in shown}
        return HealthResponse(status=status, backends=report)  # type: ignore[arg-type]

    async def stats(self, principal: str | None = None) -> dict[str, Any]:
        access = self.access(principal)
        access.check("stats", "/v1/stats")
        visible = set(self.router.visible_backends(access))
        data: dict[str, Any] = await asyncio.wait_for(self.perf_actor.stats.remote(), 10)
        data["series"] = [row for row in data.get("series", []) if row.get("backend") in visible]
        data["backends"] = {n: {"health": s.health, "consecutive_failures": s.consecutive_failures,
                                "ejections": s.ejections, "ejected_until": s.ejected_until, "inflight": s.inflight}
                            for n, s in self.directory.statuses().items() if n in visible}
        return data

    async def check_health(self) -> None:
        """Serve's replica health check: the replica is alive if its event loop answers."""
        return None


def _unscoped(response: QueryResponse, scoped: str | None, original: str) -> QueryResponse:
    """The caller sees its own session id, not the principal-scoped one the router used."""
    update: dict[str, Any] = {}
    if response.session_id == scoped:
        update["session_id"] = original
    if response.routing is not None and response.routing.session_id == scoped:
        update["routing"] = response.routing.model_copy(update={"session_id": original})
    return response.model_copy(update=update) if update else response


def _feedback_principal(access: Access) -> str | None:
    """The name examples are recorded under: None for an anonymous caller."""
    return None if access.principal.anonymous else access.principal.name
