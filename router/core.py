"""Router: runs the stages of `router.stages` in order for each request, and holds what outlives one.

Pure logic: it reaches backends through an `Executor`, embeddings through an async embed function
and live health/performance through a `StatsView`, so it runs the same under Ray Serve and in a
unit test:

    router = Router(settings, executor=..., embed=..., stats=...)
    router.set_catalogs(catalogs, index)                            # whenever a backend's catalog changes
    response = await router.query(Request(question="What time is it in Tokyo?"))

A request arrives resolved (`router.request.Request`: mode, deadline, scoped session, who asks). Across
requests the router keeps the caches the stages are wrapped in (question analysis, retrieval, the answer
served when every backend is down), each caller's view of the catalog and the sessions' backends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from opentelemetry import trace

from router.cache import LRU
from router.errors import AmbiguousRoute, DeadlineExceeded, NoRelevantBackend, RouterError
from router.learning.decisions import LearningView, RecentDecision, example
from router.learning.examples import accepts_feedback
from router.literals import EmbedFn
from router.llm.client import LLMClient
from router.models import QueryResponse, RouteResponse
from router.request import Request
from router.retrieval.catalog import CatalogIndex
from router.retrieval.intent import IntentClassifier
from router.security.policy import Access
from router.settings import RouterSettings
from router.stages import assist
from router.stages.analyse import Analyser
from router.stages.decide import Decider, Live, View
from router.stages.execute import Execution
from router.stages.plan import plan
from router.stages.respond import ResponseCache, cached_response, respond
from router.stages.scoring import PerfSnapshot
from router.stages.serving import Arguments
from router.stages.settle import settle_by_arguments
from router.strategies import Executor
from router.telemetry import TRACER
from router.values import BackendStatus, CallOutcome, CapabilityId, Catalog, Decision

T = TypeVar("T")


def _restricted(index: CatalogIndex, catalogs: Mapping[str, Catalog], settings: RouterSettings, access: Access) -> View:
    """A restricted caller's view of `index` (whose catalogs are `catalogs`): what its policy allows."""
    backends = {name for name in catalogs if access.sees_backend(name)}
    restricted = index.restricted(lambda cap: access.allows(cap.backend, cap.name), backends)
    mine = {c.backend: c for c in restricted.texts.catalogs}
    known = [n for n in sorted(b.name for b in settings.backends)
             if n in mine or (n not in catalogs and access.sees_backend(n))]
    return View(restricted, mine, known, whole=index)


class StatsView(Protocol):
    """Live state the decision reads (cached locally) and outcomes it records (without waiting)."""

    def statuses(self) -> Mapping[str, BackendStatus]: ...

    def perf(self) -> Mapping[tuple[str, str], PerfSnapshot]: ...

    def record(self, backend: str, intent: str, outcome: CallOutcome, caller: str | None = None) -> None: ...


class Router:
    def __init__(self, settings: RouterSettings, *, executor: Executor, embed: EmbedFn, stats: StatsView,
                 classifier: IntentClassifier | None = None, llm: LLMClient | None = None,
                 learning: LearningView | None = None) -> None:
        self.settings = settings
        self.llm = llm
        self.executor = executor
        self.stats = stats
        self.learning = learning
        self.analyser = Analyser(classifier or IntentClassifier(settings.intents, {}), embed,
                                 settings.routing.query_cache_size)
        self.decider = Decider(settings)
        self.responses = ResponseCache(settings.resilience)
        self.execution = Execution(settings, executor, embed, perf=lambda: self.stats.perf(),
                                   record=self.stats.record)
        self.index: CatalogIndex | None = None
        self.catalogs: dict[str, Catalog] = {}
        self._sessions: LRU[str, str] = LRU(100_000, ttl_s=24 * 3600, fair=True)
        self._views: dict[str, tuple[CatalogIndex, Access, View]] = {}
        self._prepared: tuple[CatalogIndex, dict[str, tuple[CatalogIndex, Access, View]]] | None = None

    def set_catalogs(self, catalogs: Sequence[Catalog], index: CatalogIndex) -> None:
        self.catalogs = {c.backend: c for c in catalogs}
        self.index = index
        prepared, self._prepared = self._prepared, None
        self._views = prepared[1] if prepared is not None and prepared[0] is index else {}
        self.decider.forget()  # what it kept for the replaced index would keep that index in memory

    def views_for(self, catalogs: Sequence[Catalog], index: CatalogIndex) -> Callable[[], None]:
        """Work for a thread before `index` is served: the views of the policies served so far, built for it
        (seconds each at tens of thousands of capabilities), which `set_catalogs` takes, so that no request
        waits on the event loop for its caller's view after a catalog change."""
        wanted = [access for _, access, _ in self._views.values()]  # read here, on the event loop
        by_backend = {c.backend: c for c in catalogs}

        def build() -> None:
            self._prepared = (index, {a.principal.policy: (index, a, _restricted(index, by_backend, self.settings, a))
                                      for a in wanted})
        return build

    def view(self, access: Access | None) -> View:
        """What a caller routes within: everything, or its policy's allowed part (built once per policy and
        index, from the same vectors), with the backends it may name."""
        index = self.index
        if access is None or access.unrestricted:
            return View(index, self.catalogs)
        if index is None:  # nothing indexed yet: nothing to route to, and only the backends it may see named
            return View(None, {}, [n for n in sorted(b.name for b in self.settings.backends)
                                   if access.sees_backend(n)])
        policy = access.principal.policy
        hit = self._views.get(policy)
        if hit is not None and hit[0] is index and hit[1].policy is access.policy:
            return hit[2]
        view = _restricted(index, self.catalogs, self.settings, access)
        self._views[policy] = (index, access, view)
        return view

    def visible_backends(self, access: Access | None) -> list[str]:
        """The configured backends a caller may see and name."""
        known = self.view(access).known
        return list(known) if known is not None else sorted(b.name for b in self.settings.backends)

    async def decide(self, request: Request, stages: dict[str, float] | None = None) -> Decision:
        """analyse, then decide: the ranked candidates and the verdict (no call is made), within what the
        request's caller may use. `decision_ms` covers both; `stages`, when given, receives each one's
        milliseconds."""
        started = time.perf_counter()
        view = self.view(request.access)
        analysis = await self.analyser.analyse(request.question, dense=view.index is not None and
                                               view.index.tools.dense, intent=request.intent,
                                               caller=request.principal or "")
        analysed = time.perf_counter()
        live = Live(statuses=self.stats.statuses(), perf=self.stats.perf(),
                    examples=self.learning.index() if self.learning is not None else None,
                    sticky=self._sessions.get(request.session) if request.session else None)
        d = self.decider.decide(analysis, view, live, request, started)
        if stages is not None:
            stages["analyse"] = _ms(started, analysed)
            stages["decide"] = round(max(0.0, d.decision_ms - stages["analyse"]), 3)  # within decision_ms
        return d

    async def _settled(self, request: Request, stages: dict[str, float] | None = None) -> tuple[Decision, Arguments]:
        """The decision as the question's values settle it, and the arguments they give: what a query and its dry
        run both go on from."""
        arguments = Arguments(request, self.settings.routing.min_action_confidence, self.catalogs)
        d = await self.decide(request, stages)
        arguments.tools_of = lambda backend: self.decider.tools_of(
            d.analysis, self.view(request.access), Live(statuses=self.stats.statuses(), perf=self.stats.perf()),
            backend)
        return settle_by_arguments(d, arguments, self.settings), arguments

    async def route(self, request: Request) -> RouteResponse:
        """A dry run: what /v1/query would do with the question (the decision as the question's values settle
        it, then the calls it would make or the refusal it would answer), with every candidate's scores.
        Nothing is called and no LLM is asked: where the query would ask one, the message says so."""
        d, arguments = await self._settled(request)
        statuses = self.stats.statuses()
        p = plan(d, arguments, statuses, self.settings)
        refused = p.refusal
        verdict = d.verdict if refused is None else ("no_match" if isinstance(refused, NoRelevantBackend) else
                                                    "ambiguous" if isinstance(refused, AmbiguousRoute) else "route")
        message = d.message if refused is None else refused.message
        first = next((c for c in d.candidates if c.relevant), None)
        if refused is None and first is not None and p.calls[0].candidate is not first:  # the plan passed it by
            call, status = p.calls[0], statuses.get(first.capability.backend)
            why = arguments.ruled_out(first) or (f"its backend is {status.health}" if status else "it is not callable")
            message = f"routed to {call.backend}/{call.capability.name}: the closest, {first.capability.key}, is not " \
                      f"called, since {why}"
        asked = None if self.llm is None else ("choose among the candidates" if assist.needs_choice(d) else
                                               "fill the arguments" if assist.needs_arguments(p, request) else None)
        if asked is not None:  # what the LLM answers decides the rest
            message += f"; /v1/query would first ask the configured LLM to {asked}"
        return RouteResponse(decision=verdict, message=message,
                             status=200 if refused is None else refused.status_code,
                             error=None if refused is None else refused.code,
                             calls=[] if refused else [f"{c.backend}/{c.capability.name}" for c in p.calls],
                             arguments=None if refused else p.calls[0].arguments,
                             arguments_source=None if refused else p.calls[0].arguments_source,
                             intent=d.intent, intent_source=d.analysis.intent_source,
                             intent_scores=d.analysis.intent_scores, method=d.method,
                             candidates=[c.info(i + 1).model_copy(update={"ruled_out": arguments.ruled_out(c)})
                                         for i, c in enumerate(d.candidates)],
                             decision_ms=d.decision_ms, confidence=d.confidence)

    async def query(self, request: Request) -> QueryResponse:
        """Answer a question within what the request's caller may use."""
        with TRACER.start_as_current_span("router.query") as span:
            try:
                response = await self._query(request)
            except RouterError as exc:
                span.set_attribute("error.type", exc.code)
                span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
                raise
            span.set_attribute("router.backend", response.backend)
            span.set_attribute("gen_ai.tool.name", response.capability)
            return response

    async def _query(self, request: Request) -> QueryResponse:
        started = time.monotonic()
        stages: dict[str, float] = {}
        d, arguments = await self._settled(request, stages)
        if self.llm is not None and assist.needs_choice(d):
            d = await _in_time(assist.choose(self.llm, d, self.view(request.access).catalogs, self.settings.routing),
                               request, started)
        mark = time.perf_counter()
        statuses = self.stats.statuses()
        p = plan(d, arguments, statuses, self.settings)
        if self.llm is not None and assist.needs_arguments(p, request):
            p = await _in_time(assist.fill_arguments(self.llm, p, d, arguments, statuses), request, started)
        if p.refusal is not None:
            if isinstance(p.refusal, NoRelevantBackend | AmbiguousRoute) and d.candidates:
                # Nothing was called, but the caller may say what should have been.
                self._remember(d, None, request, outcome="refused", error=p.refusal.code, started=started)
            raise p.refusal
        key = ResponseCache.key(request, d, p)
        # Replayed only while every call still only reads: a tool that now says it may act gets no past answer.
        cached = self.responses.lookup(key, statuses, request.principal) \
            if all(c.capability.read_only for c in p.calls) else None
        if cached is not None:
            return cached_response(cached, d, started, request)
        stages["plan"], mark = _ms(mark, time.perf_counter()), time.perf_counter()
        result = await self.execution.run(p, d, request, started)
        stages["execute"] = _ms(mark, time.perf_counter())
        answer = respond(result, d, started, request, stages)
        if isinstance(answer, RouterError):
            self._remember(d, None, request, outcome="failed", error=answer.code, started=started,
                           attempted=tuple(c.capability.id for c in p.calls))
            raise answer
        if result.call is not None and result.call.capability.read_only:  # an action's answer is not replayed
            self.responses.store(key, answer)
        if request.session:
            self._sessions.put(request.session, answer.backend, owner=request.principal or "")
        self._learn_from(answer, d, request, started)
        return answer

    def _remember(self, d: Decision, chosen: CapabilityId | None, request: Request, *, outcome: str = "ok",
                  error: str | None = None, started: float | None = None,
                  attempted: tuple[CapabilityId, ...] = ()) -> RecentDecision | None:
        """Remember a decision under its request id, for feedback on it (None: nothing learns here), with how
        it went (`started`: time.monotonic() when the request began; `attempted`: a failed request's call)."""
        if self.learning is None:
            return None
        latency = round((time.monotonic() - started) * 1000, 1) if started is not None else None
        decision = RecentDecision.of(d, request.request_id, chosen, request.principal, outcome=outcome, error=error,
                                     latency_ms=latency, attempted=attempted)
        self.learning.remember(decision)
        return decision

    def _learn_from(self, answer: QueryResponse, d: Decision, request: Request, started: float) -> None:
        """Remember the decision (for feedback on it), and with `learning.learn_from_routed`, take the
        successful call as a positive example."""
        chosen = CapabilityId(answer.backend, answer.kind, answer.capability)
        decision = self._remember(d, chosen, request, started=started)
        if decision is None or self.learning is None:
            return
        if (self.settings.learning.learn_from_routed and d.analysis.vector is not None
                and (request.access is None or request.access.policy.feedback) and accepts_feedback(self.settings)):
            self.learning.learn([example(self.catalogs, chosen, 1, d.analysis.question, d.analysis.vector, "routed",
                                         decision.principal, decision)])


async def _in_time(step: Coroutine[Any, Any, T], request: Request, started: float) -> T:
    """An LLM step within what is left of the request's deadline (`started`: time.monotonic() when the request
    began): the model's own timeout and retries can take far longer than the caller asked to wait."""
    left = request.deadline_s - (time.monotonic() - started)
    try:
        return await asyncio.wait_for(step, max(0.0, left))
    except TimeoutError:
        raise DeadlineExceeded(f"the request deadline of {request.deadline_s:g} s passed while the LLM was "
                               "asked; nothing was called") from None


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1000, 3)
