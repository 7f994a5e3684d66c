"""Router: runs the stages of `router.stages` in order for each request, and holds what outlives one.

Pure logic: it reaches backends through an `Executor`, embeddings through an async embed function
and live health/performance through a `StatsView`, so it runs the same under Ray Serve and in a
unit test:

    router = Router(settings, executor=..., embed=..., stats=...)
    router.set_catalogs(catalogs, index)          # whenever a backend's catalog changes
    response = await router.query(QueryRequest(question="What time is it in Tokyo?"))

Across requests it keeps the caches the stages are wrapped in (question analysis, retrieval, the
answer served when every backend is down) and the sessions' backends.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from opentelemetry import trace

from router.cache import LRU
from router.errors import AmbiguousRoute, NoRelevantBackend, RouterError
from router.learning.decisions import CapabilityId, LearningView, RecentDecision, example
from router.learning.examples import accepts_feedback
from router.literals import EmbedFn
from router.llm.client import LLMClient
from router.models import QueryRequest, QueryResponse, RouteRequest, RouteResponse
from router.retrieval.catalog import CatalogIndex
from router.retrieval.intent import IntentClassifier
from router.security.policy import Access
from router.settings import Policy, RouterSettings
from router.stages import assist
from router.stages.analyse import Analyser
from router.stages.decide import Decider
from router.stages.execute import execute
from router.stages.plan import plan, settle_by_arguments
from router.stages.respond import ResponseCache, cached_response, respond
from router.stages.scoring import PerfSnapshot
from router.strategies import Executor
from router.strategies.base import ChargedExecutor, ChargeFn
from router.telemetry import TRACER
from router.values import BackendStatus, CallOutcome, Catalog, Decision


class StatsView(Protocol):
    """Live state the decision reads (cached locally) and outcomes it records (without waiting)."""

    def statuses(self) -> Mapping[str, BackendStatus]: ...

    def perf(self) -> Mapping[tuple[str, str], PerfSnapshot]: ...

    def record(self, backend: str, intent: str, outcome: CallOutcome) -> None: ...


class Router:
    def __init__(self, settings: RouterSettings, *, executor: Executor, embed: EmbedFn, stats: StatsView,
                 classifier: IntentClassifier | None = None, llm: LLMClient | None = None,
                 learning: LearningView | None = None) -> None:
        self.settings = settings
        self.llm = llm
        self.executor = executor
        self.stats = stats
        self.learning = learning
        self._embed = embed
        self.analyser = Analyser(classifier or IntentClassifier(settings.intents, {}), embed,
                                 settings.routing.query_cache_size)
        self.decider = Decider(settings)
        self.responses = ResponseCache(settings.resilience)
        self._timeouts = {b.name: b.timeout_s for b in settings.backends}
        self.index: CatalogIndex | None = None
        self.catalogs: dict[str, Catalog] = {}
        self._sessions: LRU[str, str] = LRU(100_000, ttl_s=24 * 3600)
        self._views: dict[str, tuple[CatalogIndex, Policy, CatalogIndex, dict[str, Catalog]]] = {}

    def set_catalogs(self, catalogs: Sequence[Catalog], index: CatalogIndex) -> None:
        self.catalogs = {c.backend: c for c in catalogs}
        self.index = index
        self._views = {}

    def view(self, access: Access | None) -> tuple[CatalogIndex | None, dict[str, Catalog]]:
        """The index and catalogs a caller routes within: everything, or its policy's allowed part (built
        once per policy and index, from the same vectors)."""
        index = self.index
        if access is None or access.unrestricted or index is None:
            return index, self.catalogs
        policy = access.principal.policy
        hit = self._views.get(policy)
        if hit is not None and hit[0] is index and hit[1] is access.policy:
            return hit[2], hit[3]
        backends = {name for name in self.catalogs if access.sees_backend(name)}
        view = index.restricted(lambda cap: access.allows(cap.backend, cap.name), backends)
        catalogs = {c.backend: c for c in view.texts.catalogs}
        self._views[policy] = (index, access.policy, view, catalogs)
        return view, catalogs

    def visible_backends(self, access: Access | None) -> list[str]:
        """The configured backends a caller may see and name."""
        names = sorted(b.name for b in self.settings.backends)
        if access is None or access.unrestricted:
            return names
        _, catalogs = self.view(access)
        return [n for n in names if n in catalogs or (n not in self.catalogs and access.sees_backend(n))]

    async def decide(self, question: str, *, intent: str | None = None, backend: str | None = None,
                     tool: str | None = None, session_id: str | None = None, k: int | None = None,
                     fallback_on_override: bool = False, stages: dict[str, float] | None = None,
                     access: Access | None = None) -> Decision:
        """analyse, then decide: the ranked candidates and the verdict (no call is made), within what
        `access` allows. `decision_ms` covers both; `stages`, when given, receives each one's milliseconds."""
        started = time.perf_counter()
        index, catalogs = self.view(access)
        dense = index is not None and index.tools.dense
        analysis = await self.analyser.analyse(question, dense=dense, intent=intent)
        analysed = time.perf_counter()
        sticky = self._sessions.get(session_id) if session_id else None
        known = None if access is None or access.unrestricted else self.visible_backends(access)
        d = self.decider.decide(analysis, index, catalogs, statuses=self.stats.statuses(),
                                perf=self.stats.perf(), backend=backend, tool=tool, sticky=sticky,
                                fallback_on_override=fallback_on_override, k=k, started=started, known=known,
                                examples=self.learning.index() if self.learning is not None else None)
        if stages is not None:
            stages["analyse"] = _ms(started, analysed)
            stages["decide"] = round(max(0.0, d.decision_ms - stages["analyse"]), 3)  # within decision_ms
        return d

    async def route(self, req: RouteRequest, access: Access | None = None) -> RouteResponse:
        d = await self.decide(req.question, intent=req.intent, backend=req.backend, k=req.k, access=access)
        return RouteResponse(decision=d.verdict, message=d.message, intent=d.intent,
                             intent_source=d.analysis.intent_source, intent_scores=d.analysis.intent_scores,
                             method=d.method, candidates=[c.info(i + 1) for i, c in enumerate(d.candidates)],
                             decision_ms=d.decision_ms, confidence=d.confidence)

    async def query(self, req: QueryRequest, access: Access | None = None,
                    charge: ChargeFn | None = None, request_id: str | None = None) -> QueryResponse:
        """Answer a question within what `access` allows (None: everything, e.g. tests and benchmarks),
        charging each backend call sent to `charge`; the decision is remembered under `request_id` (default:
        a new one). Session ids arrive already scoped to the caller (see the ingress)."""
        with TRACER.start_as_current_span("router.query") as span:
            try:
                response = await self._query(req, access, charge, request_id or uuid.uuid4().hex)
            except RouterError as exc:
                span.set_attribute("error.type", exc.code)
                span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
                raise
            span.set_attribute("router.backend", response.backend)
            span.set_attribute("gen_ai.tool.name", response.capability)
            return response

    async def _query(self, req: QueryRequest, access: Access | None, charge: ChargeFn | None,
                     request_id: str) -> QueryResponse:
        started = time.monotonic()
        stages: dict[str, float] = {}
        d = await self.decide(req.question, intent=req.intent, backend=req.backend, tool=req.tool,
                              session_id=req.session_id, fallback_on_override=req.fallback_on_override, stages=stages,
                              access=access)
        d = settle_by_arguments(d, req, self.settings)
        if self.llm is not None and assist.needs_choice(d):
            d = await assist.choose(self.llm, d, self.view(access)[1], self.settings.routing.min_tool_confidence)
        mark = time.perf_counter()
        statuses = self.stats.statuses()
        p = plan(d, req, statuses, self.settings)
        if self.llm is not None and assist.needs_arguments(p, req):
            p = await assist.fill_arguments(self.llm, p, d, req, statuses)
        if p.refusal is not None:
            if isinstance(p.refusal, (NoRelevantBackend, AmbiguousRoute)) and d.candidates:
                # Nothing was called, but the caller may say what should have answered (POST /v1/feedback).
                decision = self._remember(d, None, access, request_id)
                if decision is not None:
                    p.refusal.details["request_id"] = decision.request_id
            raise p.refusal
        key = ResponseCache.key(access.principal.name if access else "", req, d, p)
        cached = self.responses.lookup(key, statuses)
        if cached is not None:
            return cached_response(cached, d, p.mode, started, req)
        stages["plan"], mark = _ms(mark, time.perf_counter()), time.perf_counter()
        executor = self.executor if charge is None else ChargedExecutor(self.executor, charge)
        result = await execute(p, d, req, settings=self.settings, timeouts=self._timeouts, executor=executor,
                               perf=self.stats.perf(), record=self.stats.record, embed=self._embed, started=started)
        stages["execute"] = _ms(mark, time.perf_counter())
        answer = respond(result, d, p.mode, started, req, stages)
        if isinstance(answer, RouterError):
            raise answer
        if result.call is not None and result.call.capability.read_only:  # an action's answer is not replayed
            self.responses.store(key, answer)
        if req.session_id:
            self._sessions.put(req.session_id, answer.backend)
        return self._learn_from(answer, d, access, request_id)

    def _remember(self, d: Decision, chosen: CapabilityId | None, access: Access | None,
                  request_id: str) -> RecentDecision | None:
        """Remember a decision under its request id, for feedback on it (None: nothing learns here)."""
        if self.learning is None:
            return None
        decision = RecentDecision.of(d, request_id, chosen, _principal(access))
        self.learning.remember(decision)
        return decision

    def _learn_from(self, answer: QueryResponse, d: Decision, access: Access | None,
                    request_id: str) -> QueryResponse:
        """Remember the decision (for feedback on it), and with `learning.learn_from_routed`, take the
        successful call as a positive example."""
        chosen = (answer.backend, answer.kind, answer.capability)
        decision = self._remember(d, chosen, access, request_id)
        if decision is None or self.learning is None:
            return answer
        if (self.settings.learning.learn_from_routed and d.analysis.vector is not None
                and (access is None or access.policy.feedback) and accepts_feedback(self.settings)):
            self.learning.learn([example(self.catalogs, chosen, 1, d.analysis.question, d.analysis.vector, "routed",
                                         decision.principal, decision)])
        if answer.routing is None:
            return answer
        return answer.model_copy(update={"routing": answer.routing.model_copy(
            update={"request_id": decision.request_id})})


def _principal(access: Access | None) -> str | None:
    return None if access is None or access.principal.anonymous else access.principal.name


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1000, 3)
