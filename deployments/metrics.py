"""Prometheus metrics through Ray's metrics API (`ray.util.metrics`).

Ray exports them on each node's metrics agent (the Prometheus endpoint Ray documents, with a
``ray_`` prefix); the README lists names and tags.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from router.errors import RouterError
from router.models import QueryResponse
from router.request import Request
from router.strategies import Executor
from router.values import BackendStatus, CallContext, CallOutcome, Capability

_HEALTH = {"healthy": 1.0, "degraded": 0.5, "starting": 0.5, "down": 0.0, "ejected": 0.0}
_BOUNDARIES: list[float] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000]


def _label(value: str | None, known: frozenset[str]) -> str:
    """A caller's value as a metric tag: only names from the configuration go out as themselves. A
    free-form value would make a new time series per request, and Ray's metrics refuse non-ASCII."""
    if not value:
        return "-"
    return value if value in known else "other"


class RouterMetrics:
    def __init__(self, enabled: bool = True, *, backends: Iterable[str] = (), intents: Iterable[str] = ()) -> None:
        self.enabled = enabled
        self._backends = frozenset(backends)
        self._intents = frozenset(intents)
        if not enabled:
            return
        from ray.util.metrics import Counter, Gauge, Histogram

        self.requests = Counter("mcp_router_requests_total", "Routed requests",
                                tag_keys=("backend", "intent", "mode", "outcome"))
        self.latency = Histogram("mcp_router_request_latency_ms", "End-to-end latency of routed requests",
                                 boundaries=_BOUNDARIES, tag_keys=("mode", "outcome"))
        self.calls = Counter("mcp_router_backend_calls_total", "Backend calls", tag_keys=("backend", "outcome"))
        self.call_latency = Histogram("mcp_router_backend_latency_ms", "Latency of backend calls",
                                      boundaries=_BOUNDARIES, tag_keys=("backend",))
        self.fallbacks = Counter("mcp_router_fallbacks_total", "Fallback attempts after a failure",
                                 tag_keys=("mode",))
        self.hedges = Counter("mcp_router_hedges_total", "Hedged second calls", tag_keys=("backend",))
        self.cache_hits = Counter("mcp_router_cache_hits_total", "Answers served from the response cache",
                                  tag_keys=("intent",))
        self.gateway = Counter("mcp_router_gateway_requests_total", "MCP requests relayed by the gateway",
                               tag_keys=("backend", "method", "outcome"))
        self.health = Gauge("mcp_router_backend_health", "1 healthy, 0.5 degraded, 0 down or ejected",
                            tag_keys=("backend",))

    async def track_query(self, request: Request, work: Awaitable[QueryResponse]) -> QueryResponse:
        started = time.perf_counter()
        mode = request.mode
        try:
            response = await work
        except RouterError as exc:
            if self.enabled:
                self.requests.inc(tags={"backend": _label(request.backend, self._backends),
                                        "intent": _label(request.intent, self._intents),
                                        "mode": mode, "outcome": exc.code})
                self.latency.observe((time.perf_counter() - started) * 1000, tags={"mode": mode,
                                                                                   "outcome": exc.code})
            raise
        if self.enabled:
            meta = response.routing
            outcome = "cached" if meta and meta.cached else "success"
            self.requests.inc(tags={"backend": response.backend, "intent": meta.intent if meta else "-",
                                    "mode": mode, "outcome": outcome})
            self.latency.observe((time.perf_counter() - started) * 1000, tags={"mode": mode, "outcome": outcome})
            if meta is not None:
                if meta.cached:
                    self.cache_hits.inc(tags={"intent": meta.intent})
                if meta.fallbacks_used:
                    self.fallbacks.inc(meta.fallbacks_used, tags={"mode": mode})
                # A hedge is a call sent while an earlier one still ran (not one sent after it failed).
                hedges = sum(any(a.started_ms < b.started_ms < a.started_ms + a.latency_ms for a in meta.attempts)
                             for b in meta.attempts) if mode == "hedged" else 0
                if hedges:
                    self.hedges.inc(hedges, tags={"backend": meta.attempts[0].backend})
        return response

    def gateway_request(self, backend: str, method: str, outcome: str, started: float) -> None:
        """A request the gateway relayed to `backend` (`method`: the MCP method), and how it ended."""
        if not self.enabled:
            return
        self.gateway.inc(tags={"backend": _label(backend, self._backends), "method": method, "outcome": outcome})
        self.call_latency.observe((time.perf_counter() - started) * 1000, tags={"backend": _label(backend,
                                                                                                self._backends)})

    def observe_health(self, statuses: Mapping[str, BackendStatus]) -> None:
        if not self.enabled:
            return
        for name, status in statuses.items():
            self.health.set(_HEALTH.get(status.health, 0.0), tags={"backend": name})

    def wrap_executor(self, executor: Executor) -> Executor:
        return executor if not self.enabled else _MeteredExecutor(executor, self)


class _MeteredExecutor:
    def __init__(self, inner: Executor, metrics: RouterMetrics) -> None:
        self._inner = inner
        self._m = metrics

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        outcome = await self._inner.call(capability, arguments, timeout_s=timeout_s, context=context, force=force)
        tags = {"backend": capability.backend}
        self._m.calls.inc(tags={**tags, "outcome": "success" if outcome.ok else str(outcome.error_kind or "error")})
        self._m.call_latency.observe(outcome.latency_ms, tags=tags)
        return outcome
