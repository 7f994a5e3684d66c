"""RouterService: the router's typed API, the one thing HTTP, MCP and the deployment handle all call.

    service = await build_service(settings, pool, embedder, generation)      # deployments.wiring
    response = await service.query(QueryRequest(question="What time is it in Tokyo?"), caller)

Every method takes the `Caller` (who asks, the request's id, what the audit records) and works within
what the caller's policy allows. Here a request's defaults are resolved once (mode, deadline within the
policy), its session scoped to the caller, and its backend calls charged to the caller; the router core
gets one resolved `router.request.Request`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import ray

from actors.directory import BackendDirectory
from actors.feedback import FeedbackView
from deployments.caller import Caller
from deployments.metrics import RouterMetrics
from router.core import Router
from router.errors import ComponentUnavailable, InvalidRequest, PayloadTooLarge, UnknownBackend
from router.learning.decisions import chat_examples, chat_question, check_allowed, feedback_examples
from router.learning.examples import accepts_feedback
from router.literals import ChargeFn, EmbedFn
from router.llm.chat import ChatService
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
from router.request import Request
from router.security.identity import ANONYMOUS, Principal
from router.security.limits import Limiter
from router.security.policy import Access
from router.settings import RouterSettings
from router.strategies.base import ChargedExecutor
from router.values import BackendStatus

log = logging.getLogger("mcp_router.service")
T = TypeVar("T")
FEEDBACK_STORE, PERFORMANCE_TRACKER = "feedback store", "performance tracker"


@dataclass(kw_only=True)
class RouterService:
    settings: RouterSettings
    router: Router
    directory: BackendDirectory
    learning: FeedbackView
    selector: ToolSelector
    chat_service: ChatService
    limiter: Limiter
    metrics: RouterMetrics
    perf_actor: Any
    query_embed: EmbedFn

    # -- who is asking ---------------------------------------------------------------------------

    def handle_caller(self, principal: str | None) -> Caller:
        """A deployment-handle caller (inside the Ray cluster, trusted): the principal its request names,
        with that key's policy (another name: the JWT default policy); none: the anonymous policy."""
        auth = self.settings.server.auth
        if principal is None:
            return Caller(Access.of(Principal(ANONYMOUS, auth.anonymous_policy, "anonymous"), auth), edge=False)
        key = next((k for k in auth.api_keys if k.name == principal), None)
        default = auth.jwt.default_policy if auth.jwt is not None else auth.anonymous_policy
        return Caller(Access.of(Principal(principal, key.policy if key else default, "handle"), auth), edge=False)

    @staticmethod
    def _checked(caller: Caller, principal: str | None) -> Access:
        """The caller's access; over HTTP and MCP only authentication says who is calling."""
        if caller.edge and principal is not None:
            raise InvalidRequest("principal: set by authentication, not by the request body")
        return caller.access

    @staticmethod
    def _session_key(access: Access, session_id: str | None) -> str | None:
        """Sessions are namespaced by principal: the same id from two callers names two sessions."""
        if session_id is None or access.principal.anonymous:
            return session_id
        return f"{access.principal.name}/{session_id}"

    def charge(self, caller: Caller) -> ChargeFn | None:
        """What each backend call sent for this caller costs: one from its `backend_calls_per_s` budget
        (callers through the HTTP and MCP edge; handle callers are trusted)."""
        limit = caller.access.policy.rate_limit
        if not caller.edge or limit.backend_calls_per_s is None:
            return None
        name = caller.access.principal.name

        async def charge(calls: int) -> None:
            await self.limiter.charge_calls(name, limit, calls)

        return charge

    def _check_question(self, question: str) -> None:
        """The question-length limit, here so that HTTP, MCP and handle callers all meet it."""
        limit = self.settings.server.max_question_bytes
        size = len(question.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise PayloadTooLarge(f"question is {size} bytes; the limit is {limit}", limit=limit)

    # -- routing ---------------------------------------------------------------------------------

    async def query(self, query: QueryRequest, caller: Caller) -> QueryResponse:
        self._check_question(query.question)
        access = self._checked(caller, query.principal)
        request = Request.of(query, self.settings.resilience, access=access,
                             session_key=self._session_key(access, query.session_id),
                             request_id=caller.request_id, charge=self.charge(caller))
        caller.note(mode=request.mode, arguments=query.arguments)
        access.check_request(mode=request.mode, deadline_s=query.deadline_s, backend=query.backend, tool=query.tool)
        # The metrics and the audit read what was done from the routing metadata, kept until they have; a caller
        # that asked for none gets none (it counted no fallback, hedge or cached answer, and audited no arguments).
        response = await self.metrics.track_query(request, self.router.query(
            replace(request, include_routing_metadata=True)))
        caller.note(backend=response.backend, tool=response.capability,
                    arguments=response.routing.arguments if response.routing else query.arguments)
        return response if request.include_routing_metadata else response.model_copy(update={"routing": None})

    async def route(self, route: RouteRequest, caller: Caller) -> RouteResponse:
        self._check_question(route.question)
        access = self._checked(caller, route.principal)
        access.check_request(backend=route.backend)
        return await self.router.route(Request.dry_run(route, access=access))

    async def select_tools(self, selection: ToolSelectRequest, caller: Caller) -> ToolSelectResponse:
        access = self._checked(caller, selection.principal)
        chosen = await self.selector.select(self.router.view(access).index, selection.messages,
                                            session_id=self._session_key(access, selection.session_id),
                                            max_servers=selection.max_servers, owner=access.principal.name)
        return ToolSelectResponse(tools=chosen.tools, servers=chosen.servers, reasoning=chosen.reasoning,
                                  metrics=chosen.metrics)

    async def chat(self, chat: ChatRequest, caller: Caller) -> ChatResponse:
        access = self._checked(caller, chat.principal)
        access.check("chat", "/v1/chat")
        access.check_request(deadline_s=chat.deadline_s)
        scoped = chat.model_copy(update={"principal": _name(access),  # whose calls: a backend's slots are fair
                                         "session_id": self._session_key(access, chat.session_id)})
        charge = self.charge(caller)
        response = await self.chat_service.chat(
            scoped, self.router.view(access).index,
            deadline_s=access.deadline(chat.deadline_s, self.settings.llm.deadline_s),
            executor=None if charge is None else ChargedExecutor(self.router.executor, charge))
        if access.policy.feedback:
            await self._learn_from_chat(chat, response, access)
        return response.model_copy(update={"session_id": chat.session_id})

    # -- learning from use -------------------------------------------------------------------------

    async def feedback(self, feedback: FeedbackRequest, caller: Caller) -> FeedbackResponse:
        access = self._checked(caller, feedback.principal)
        access.check("feedback", "giving feedback")
        check_allowed(self.settings)
        decision = await _from_actor(FEEDBACK_STORE, self.learning.decision(feedback.request_id))
        # Only what the caller may see can be named.
        examples = feedback_examples(decision, feedback, self.router.view(access).catalogs, _name(access))
        stored = await _from_actor(FEEDBACK_STORE, self.learning.add(examples))
        return FeedbackResponse(request_id=feedback.request_id, stored=[e.info() for e in stored])

    async def _learn_from_chat(self, chat: ChatRequest, response: ChatResponse, access: Access) -> None:
        if not self.settings.learning.learn_from_chat or not any(c.get("ok") for c in response.tool_calls):
            return
        question = chat_question(chat)
        if not accepts_feedback(self.settings) or not question:  # a turn of images alone teaches nothing
            return
        try:
            vector = (await self.query_embed([question]))[0]
        except Exception as exc:  # learning never fails the conversation it learns from
            log.warning("embedding a chat question for learning failed: %s", exc)
            return
        self.learning.learn(chat_examples(chat, response, vector, self.router.catalogs, _name(access)))

    async def delete_examples(self, name: str, caller: Caller) -> dict[str, Any]:
        access = caller.access
        access.check("feedback", "deleting examples")
        access.check("stats", "deleting examples")
        removed = self.settings.backend(name) is None and access.unrestricted
        if name not in self.router.visible_backends(access) and not removed:
            raise UnknownBackend(f"unknown backend {name!r}", backend=name)
        # A backend no longer configured: its examples still speak for it, and only an operator whose policy
        # covers every backend may clear them (nobody's policy can name it any more).
        # A policy allowing part of the backend deletes the examples of that part: the others are not its own.
        names = None
        if not access.allows_all(name):
            catalog = self.router.catalogs.get(name)
            names = [c.name for c in (catalog.capabilities if catalog else ()) if access.allows(name, c.name)]
        return {"backend": name, "deleted": await _from_actor(FEEDBACK_STORE, self.learning.delete(name, names))}

    # -- operators ------------------------------------------------------------------------------------

    @staticmethod
    def whoami(caller: Caller) -> dict[str, Any]:
        """Who the caller is to the router: its principal, policy, and whether it has the operator right."""
        principal = caller.access.principal
        return {"principal": principal.name, "policy": principal.policy, "operator": caller.access.policy.stats,
                "authenticated": principal.authenticated}

    async def decisions(self, limit: int, caller: Caller) -> list[dict[str, Any]]:
        """The newest decisions of every replica (operators: they hold other callers' questions), of the
        backends the caller may see."""
        access = caller.access
        access.check("stats", "/v1/decisions")
        visible = set(self.router.visible_backends(access))
        rows = await _from_actor(FEEDBACK_STORE, self.learning.latest(limit))
        def sees(backend: str, capability: str | None) -> bool:
            return backend in visible and (not capability or access.allows(backend, capability))

        return [r for r in rows if (r["backend"] is None or sees(r["backend"], r.get("capability")))
                and all(sees(*call.split("/", 1)) for call in (*(r.get("calls") or ()), *(r.get("candidates") or ())))]

    async def loadtest(self, caller: Caller, report: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The last `mcp-router loadtest` report (operators), or, given one, keep it."""
        caller.access.check("stats", "load test reports")
        if report is not None:
            await _from_actor(PERFORMANCE_TRACKER, self.perf_actor.set_loadtest.remote(report), timeout_s=10)
            return report
        found: dict[str, Any] | None = await _from_actor(PERFORMANCE_TRACKER, self.perf_actor.get_loadtest.remote(),
                                                          timeout_s=10)
        if found is None:
            return None
        # Whoever ran it may see backends this operator's policy hides: their counts are left out.
        visible = set(self.router.visible_backends(caller.access))
        return {**found, "backends": {b: n for b, n in (found.get("backends") or {}).items() if b in visible}}

    # -- the backends --------------------------------------------------------------------------------

    async def backends(self, caller: Caller) -> list[BackendInfo]:
        access = caller.access
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

    async def backend(self, name: str, caller: Caller) -> BackendDetail:
        access = caller.access
        info = next((b for b in await self.backends(caller) if b.name == name), None)
        if info is None:
            raise UnknownBackend(f"unknown backend {name!r}", backend=name)
        # Examples hold other callers' questions: shown to operators (the `stats` right), and only for
        # capabilities the caller may use.
        examples = [e for e in await _from_actor(FEEDBACK_STORE, self.learning.examples(name))
                    if access.allows(name, e["name"])] \
            if access.policy.stats else []
        return BackendDetail(**info.model_dump(), examples=examples)

    async def health(self, caller: Caller) -> HealthResponse:
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
        access = caller.access
        # Liveness is public; which backends exist is not, on a secured router.
        shown = (set(self.router.visible_backends(access))
                 if access.principal.authenticated or not self.settings.server.auth.enabled else set())
        report = {n: {"status": s.health, "last_error": s.last_error} for n, s in statuses.items() if n in shown}
        return HealthResponse(status=status, backends=report)  # type: ignore[arg-type]

    async def stats(self, caller: Caller) -> dict[str, Any]:
        access = caller.access
        access.check("stats", "/v1/stats")
        visible = set(self.router.visible_backends(access))
        data: dict[str, Any] = await _from_actor(PERFORMANCE_TRACKER, self.perf_actor.stats.remote(), timeout_s=10)
        data["series"] = [row for row in data.get("series", []) if row.get("backend") in visible]
        data["backends"] = {n: {"health": s.health, "consecutive_failures": s.consecutive_failures,
                                "ejections": s.ejections, "ejected_until": s.ejected_until, "inflight": s.inflight}
                            for n, s in self.directory.statuses().items() if n in visible}
        # What this replica routes on for this operator: the catalogs its policy allows, and when it was built.
        indexed = self.router.view(access).catalogs
        data["index"] = {"backends": len(indexed), "built_at": self.directory.index_built_at,
                         "provisional_vectors": self.directory.provisional,
                         "capabilities": sum(len(c.capabilities) for c in indexed.values()),
                         "versions": {n: c.version for n, c in indexed.items()}}
        return data


async def _from_actor(component: str, work: Awaitable[T], *, timeout_s: float | None = None) -> T:
    """What one of the application's actors answers. An actor that is slow, restarting or gone leaves the
    router unable to answer this request (503 naming the component), which is no internal error; an
    exception raised by the actor's own method (`RayTaskError`) is a bug there, and stays a 500."""
    try:
        return await asyncio.wait_for(work, timeout_s)
    except ray.exceptions.RayTaskError:
        raise
    except (ray.exceptions.RayError, TimeoutError) as exc:
        log.warning("the %s is unavailable: %r", component, exc)
        raise ComponentUnavailable(f"the router's {component} is unavailable right now ({type(exc).__name__}); "
                                   "try again shortly", component=component) from None


def _name(access: Access) -> str | None:
    """The name examples are recorded under: None for an anonymous caller."""
    return None if access.principal.anonymous else access.principal.name
