"""Router: the decision (intent, hybrid candidates, composite score) and its execution by a strategy.

Pure logic: it reaches backends through an `Executor`, embeddings through an async embed function
and live health/performance through a `StatsView`, so it runs the same under Ray Serve and in a
unit test:

    router = Router(settings, executor=..., embed=..., stats=...)
    router.set_catalogs(catalogs, index)          # whenever a backend's catalog changes
    response = await router.query(QueryRequest(question="What time is it in Tokyo?"))
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from opentelemetry import trace

from router.arguments import derive_arguments
from router.cache import LRU
from router.config import RouterSettings
from router.errors import (
    AmbiguousRoute,
    ArgumentsRequired,
    BackendUnavailable,
    NoRelevantBackend,
    RouterError,
    UnknownBackend,
    UnknownCapability,
)
from router.intent import IntentClassifier
from router.llm import LLMClient
from router.models import (
    BackendStatus,
    CallOutcome,
    Catalog,
    QueryRequest,
    QueryResponse,
    RouteRequest,
    RouteResponse,
)
from router.outcome import Decision, build_response, cached_response, failure_error
from router.retrieval import CatalogIndex, Ranked
from router.scoring import Candidate, PerfSnapshot, lookup_perf, score_candidates
from router.strategies import STRATEGIES, CallContext, Executor, PlannedCall, StrategyContext
from router.telemetry import TRACER, record_step

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]


class StatsView(Protocol):
    """Live state the decision reads (cached locally) and outcomes it records (without waiting)."""

    def statuses(self) -> Mapping[str, BackendStatus]: ...

    def perf(self) -> Mapping[tuple[str, str], PerfSnapshot]: ...

    def record(self, backend: str, intent: str, outcome: CallOutcome) -> None: ...


@dataclass(slots=True)
class _QueryAnalysis:
    """What a question yields before live state (health, performance) enters: its vector, its
    classified intent and its retrieval results. Agents repeat questions, so this is cached; the
    results are dropped whenever the index is replaced."""

    vector: np.ndarray | None
    intent: tuple[str, str, dict[str, float]] | None = None
    index: CatalogIndex | None = None
    ranked: dict[tuple[int, str | None], list[Ranked]] = field(default_factory=dict)


class Router:
    def __init__(self, settings: RouterSettings, *, executor: Executor, embed: EmbedFn, stats: StatsView,
                 classifier: IntentClassifier | None = None, llm: LLMClient | None = None) -> None:
        self.settings = settings
        self.llm = llm
        self.executor = executor
        self.stats = stats
        self._embed = embed
        self.classifier = classifier or IntentClassifier(settings.intents, {})
        self.index: CatalogIndex | None = None
        self.catalogs: dict[str, Catalog] = {}
        self._analyses: LRU[str, _QueryAnalysis] = LRU(settings.routing.query_cache_size)
        self._sessions: LRU[str, str] = LRU(100_000, ttl_s=24 * 3600)
        res = settings.resilience
        self._responses: LRU[tuple[str, str, frozenset[str]], QueryResponse] = LRU(
            res.response_cache_size, ttl_s=res.response_cache_ttl_s)
        self._backend_intents = {b.name: tuple(b.intents) for b in settings.backends}
        self._timeouts = {b.name: b.timeout_s for b in settings.backends}

    # -- state -------------------------------------------------------------------------------

    def set_catalogs(self, catalogs: Sequence[Catalog], index: CatalogIndex) -> None:
        self.catalogs = {c.backend: c for c in catalogs}
        self.index = index

    async def _analyse(self, question: str) -> _QueryAnalysis:
        analysis = self._analyses.get(question)
        # Analysed before the index had vectors: analysed again now that it has.
        if analysis is None or (analysis.vector is None and self._dense_enabled()):
            analysis = _QueryAnalysis((await self._embed([question]))[0] if self._dense_enabled() else None)
            self._analyses.put(question, analysis)
        return analysis

    def _search(self, analysis: _QueryAnalysis, question: str, k: int, backend: str | None) -> list[Ranked]:
        assert self.index is not None
        if analysis.index is not self.index:
            analysis.index, analysis.ranked = self.index, {}
        ranked = analysis.ranked.get((k, backend))
        if ranked is None:
            ranked = self.index.search(question, analysis.vector, k, backends={backend} if backend else None)
            analysis.ranked[(k, backend)] = ranked
        return ranked

    # -- decision ----------------------------------------------------------------------------

    async def decide(self, question: str, *, intent: str | None = None, backend: str | None = None,
                     tool: str | None = None, session_id: str | None = None, k: int | None = None) -> Decision:
        started = time.perf_counter()
        with TRACER.start_as_current_span("router.decide") as span:
            if backend is not None and backend not in self._timeouts:
                raise UnknownBackend(f"unknown backend {backend!r}; configured: {', '.join(sorted(self._timeouts))}",
                                     backend=backend)
            chosen_intent = self.classifier.resolve(intent) if intent else None
            analysis = await self._analyse(question)
            if chosen_intent is None:
                if analysis.intent is None:
                    analysis.intent = self.classifier.classify(question, analysis.vector)
                chosen_intent, source, intent_scores = analysis.intent
                intent_scores = dict(intent_scores)
            else:
                source, intent_scores = "override", {}
            want = max(k or self.settings.routing.candidates, self._fanout())
            candidates = self._candidates(question, analysis, chosen_intent, want * 2, backend, tool)
            kind = "override" if backend else "route"
            sticky = self._sessions.get(session_id) if session_id and not backend else None
            if sticky is not None:
                candidates, kind = self._stick(candidates, sticky, kind)
            verdict, message = self._verdict(candidates, backend, session=kind == "session")
            decision = Decision(intent=chosen_intent, intent_source=source, intent_scores=intent_scores,
                                method=self._method_name(), candidates=candidates[:want], verdict=verdict,
                                message=message, kind=kind)
            decision.decision_ms = round((time.perf_counter() - started) * 1000, 3)
            span.set_attribute("router.intent", chosen_intent)
            span.set_attribute("router.candidate_count", len(candidates))
            span.set_attribute("router.verdict", verdict)
            if decision.candidates:
                top = decision.candidates[0]
                span.set_attribute("router.backend", top.capability.backend)
                span.set_attribute("gen_ai.tool.name", top.capability.name)
                for name in ("match", "health", "perf", "composite", "dense", "bm25"):
                    span.set_attribute(f"router.score.{name}", getattr(top.scores, name))
            return decision

    def _dense_enabled(self) -> bool:
        return self.index is not None and self.index.tools.dense

    def _fanout(self) -> int:
        r = self.settings.resilience
        return max(r.parallel_k, r.consensus_k, r.max_attempts)

    def _method_name(self) -> str:
        r = self.settings.routing
        base = "hybrid" if self._dense_enabled() else "bm25"
        return f"{base}_two_level" if r.method == "two_level" else base

    def _candidates(self, question: str, analysis: _QueryAnalysis, intent: str, k: int, backend: str | None,
                    tool: str | None) -> list[Candidate]:
        if self.index is None:
            return []
        ranked = self._search(analysis, question, k, backend)
        if tool is not None:
            ranked = [r for r in ranked if r.capability.name == tool]
            if not ranked:
                catalog = self.catalogs.get(backend or "")
                cap = next((c for c in (catalog.capabilities if catalog else ()) if c.name == tool), None)
                if cap is None:
                    raise UnknownCapability(f"backend {backend!r} has no tool, prompt, resource or flow named "
                                            f"{tool!r}", backend=backend, tool=tool)
                ranked = self.index.search(question, analysis.vector, len(self.index),
                                           backends={backend} if backend else None)
                ranked = [r for r in ranked if r.capability.name == tool]
        return score_candidates(ranked, intent, self.stats.statuses(), self.stats.perf(), self.settings.routing,
                                self._backend_intents)

    def _stick(self, candidates: list[Candidate], sticky: str, kind: str) -> tuple[list[Candidate], str]:
        """A session keeps the backend that served it while that backend has a relevant match and is up."""
        status = self.stats.statuses().get(sticky)
        if status is not None and not status.available:
            return candidates, kind
        mine = [c for c in candidates if c.capability.backend == sticky and c.relevant]
        if not mine:
            return candidates, kind
        return mine[:1] + [c for c in candidates if c is not mine[0]], "session"

    def _verdict(self, candidates: list[Candidate], backend: str | None,
                 session: bool = False) -> tuple[str, str]:
        relevant = [c for c in candidates if c.relevant]
        if backend is not None and candidates:
            return "route", f"backend {backend!r} chosen by the caller"
        if not relevant:
            return "no_match", "nothing in the catalog is relevant enough to this question"
        # A session's backend was put first on purpose: that is not a close call.
        if len(relevant) > 1 and not session:
            a, b = relevant[0], relevant[1]
            margin = self.settings.routing.ambiguity_margin
            if (a.capability.name != b.capability.name
                    and a.scores.composite - b.scores.composite < margin):
                return "ambiguous", (f"too close to call between {a.capability.key} and {b.capability.key}; "
                                     "name a backend (and tool) to choose")
        top = relevant[0].capability
        return "route", f"routed to {top.backend}/{top.name}"

    async def route(self, req: RouteRequest) -> RouteResponse:
        d = await self.decide(req.question, intent=req.intent, backend=req.backend, k=req.k)
        return RouteResponse(decision=d.verdict, message=d.message, intent=d.intent,  # type: ignore[arg-type]
                             intent_source=d.intent_source, intent_scores=d.intent_scores,  # type: ignore[arg-type]
                             method=d.method, candidates=[c.info(i + 1) for i, c in enumerate(d.candidates)],
                             decision_ms=d.decision_ms)

    # -- execution ---------------------------------------------------------------------------

    async def query(self, req: QueryRequest) -> QueryResponse:
        with TRACER.start_as_current_span("router.query") as span:
            try:
                response = await self._query(req)
            except RouterError as exc:
                span.set_attribute("error.type", exc.code)
                span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
                raise
            span.set_attribute("router.backend", response.backend)
            span.set_attribute("gen_ai.tool.name", response.capability)
            return response

    async def _query(self, req: QueryRequest) -> QueryResponse:
        started = time.monotonic()
        d = await self.decide(req.question, intent=req.intent, backend=req.backend, tool=req.tool,
                              session_id=req.session_id)
        if req.backend and req.fallback_on_override:
            # The caller's backend first, then everything routing would have tried.
            routed = await self.decide(req.question, intent=d.intent, session_id=req.session_id)
            d.candidates = d.candidates[:1] + [c for c in routed.candidates
                                               if c.capability.backend != req.backend and c.relevant]
        if d.verdict == "ambiguous" and self.llm is not None:
            await self._resolve_with_llm(d, req)
        self._raise_for_verdict(d, req)
        try:
            calls = self._plan(d, req)
        except ArgumentsRequired:
            if self.llm is None or req.arguments is not None:
                raise
            calls = await self._plan_with_llm(d, req)
        mode = req.mode or self.settings.resilience.default_mode
        backends = frozenset(c.backend for c in calls)
        cache_key = (" ".join(req.question.lower().split()), d.intent, backends)
        statuses = self.stats.statuses()
        if all(b in statuses and not statuses[b].available for b in backends):
            cached = self._responses.get(cache_key)
            if cached is not None:
                return cached_response(cached, d, mode, started, req)
        # The caller may lower the deadline, never raise it.
        default = self.settings.resilience.deadline_s
        deadline = started + min(req.deadline_s or default, default)
        ctx = self._context(req, d, deadline)
        with TRACER.start_as_current_span(f"router.strategy.{mode}") as span:
            span.set_attribute("router.mode", mode)
            result = await STRATEGIES[mode](calls, ctx)
            span.set_attribute("router.attempts", len(result.attempts))
        if result.outcome is None or result.call is None:
            raise failure_error(result)
        response = build_response(result, d, mode, started, req)
        self._responses.put(cache_key, response)
        if req.session_id:
            self._sessions.put(req.session_id, result.call.backend)
        return response

    def _raise_for_verdict(self, d: Decision, req: QueryRequest) -> None:
        closest = [c.info(i + 1).model_dump() for i, c in enumerate(d.candidates[:3])]
        if not d.candidates:
            raise NoRelevantBackend("no backend offers anything to route to" if not req.backend else
                                    f"backend {req.backend!r} has nothing to call", candidates=[])
        if d.verdict == "no_match":
            raise NoRelevantBackend(d.message + "; closest candidates listed", candidates=closest)
        if d.verdict == "ambiguous":
            raise AmbiguousRoute(d.message, candidates=closest[:2])
        if req.backend and not req.fallback_on_override:
            status = self.stats.statuses().get(req.backend)
            if status is not None and not status.available:
                raise BackendUnavailable(
                    f"backend {req.backend!r} is {status.health}"
                    + (f" ({status.last_error})" if status.last_error else "")
                    + "; set fallback_on_override to let the router pick another", backend=req.backend)

    async def _resolve_with_llm(self, d: Decision, req: QueryRequest) -> None:
        """Too close to call: the model picks a server, says none fits, or asks the user to choose."""
        assert self.llm is not None
        servers: dict[str, list[str]] = {}
        for c in d.candidates:
            if c.relevant:
                servers.setdefault(c.capability.backend, []).append(c.capability.name)
        described = [(b, self.catalogs[b].description if b in self.catalogs else "", tools)
                     for b, tools in servers.items()]
        choice = await self.llm.choose_server(req.question, described)
        if choice.kind == "none":
            d.verdict, d.message = "no_match", f"the model found nothing relevant: {choice.reasoning}"
        elif choice.kind == "ambiguous":
            d.message = choice.question or d.message
        else:
            d.candidates.sort(key=lambda c: c.capability.backend != choice.server)  # stable: its tools first
            d.verdict, d.kind = "route", "llm"

    async def _plan_with_llm(self, d: Decision, req: QueryRequest) -> list[PlannedCall]:
        """The best match needs structured arguments: the model fills them from the question and schema."""
        assert self.llm is not None
        top = next(c for c in d.candidates if c.relevant or req.backend)
        args = await self.llm.fill_arguments(req.question, top.capability)
        first = PlannedCall(candidate=top, arguments=args, arguments_source="llm")
        rest = self._plan(d, req, skip=top)
        return [first, *rest]

    def _plan(self, d: Decision, req: QueryRequest, skip: Candidate | None = None) -> list[PlannedCall]:
        eligible = [c for c in d.candidates if c.relevant and c is not skip]
        if not eligible and req.backend and skip is None:
            eligible = d.candidates[:1]  # the caller chose the backend: its best match, even if weak
        statuses = self.stats.statuses()
        up = [c for c in eligible if c.capability.backend not in statuses
              or statuses[c.capability.backend].available]
        # Down and ejected backends are skipped while any candidate is up; when none is, the least bad
        # ones are still tried (forced past their ejection) rather than failing without trying.
        force = not up
        if up and not (req.backend and not req.fallback_on_override):
            eligible = up
        calls: list[PlannedCall] = []
        first_error: ArgumentsRequired | None = None
        for i, cand in enumerate(eligible):
            try:
                args, source = derive_arguments(cand.capability, req.question, req.arguments)
            except ArgumentsRequired as exc:
                if i == 0 and skip is None:
                    first_error = exc
                continue  # a candidate that cannot take the question is skipped, never guessed at
            calls.append(PlannedCall(candidate=cand, arguments=args, arguments_source=source, force=force))
        if first_error is not None:
            # The best match needs arguments the question does not give. A runner-up that is almost as
            # relevant and can be called with what the question says is preferred; otherwise 422.
            top = eligible[0].scores.composite
            margin = self.settings.routing.callable_margin
            if not calls or calls[0].candidate.scores.composite < top - margin:
                raise first_error
        return calls

    def _context(self, req: QueryRequest, d: Decision, deadline: float) -> StrategyContext:
        perf = self.stats.perf()
        res = self.settings.resilience

        def hedge_delay(backend: str) -> float:
            snap = lookup_perf(perf, backend, d.intent)
            if snap is None or snap.count < 5:
                return min(res.hedge_default_delay_ms, res.hedge_max_delay_ms)
            # The p95, but no more than three medians: when over 5% of calls are slow the p95 is the slow
            # tail itself, and hedging only after it would never help.
            delay = min(snap.p95_latency_ms, 3 * snap.p50_latency_ms) if snap.p50_latency_ms else snap.p95_latency_ms
            return min(max(delay, res.hedge_min_delay_ms), res.hedge_max_delay_ms)

        def on_outcome(call: PlannedCall, outcome: CallOutcome) -> None:
            self.stats.record(call.backend, d.intent, outcome)

        call_ctx = CallContext(question=req.question, intent=d.intent, session_id=req.session_id,
                               parameters=req.parameters)
        return StrategyContext(executor=self.executor, settings=res, call=call_ctx, deadline=deadline,
                               timeout_for=lambda b: self._timeouts.get(b, 30.0), hedge_delay_ms=hedge_delay,
                               on_outcome=on_outcome, embed=self._embed, on_step=record_step)
