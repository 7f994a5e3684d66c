"""The router wired in one process, without Ray: for benchmarks and experiments.

    async with InProcessRouter(settings) as local:      # connects every enabled MCP backend
        response = await local.router.query(QueryRequest(question="who wrote Hamlet?", mode="hedged"))
        local.reset()                                   # forget history and ejections between runs

The pieces mirror the Ray deployment: `LocalBackend` does what `BackendSupervisor.call` does
(outlier detection, a concurrency bound, backend errors turned into failed outcomes),
`LocalExecutor` is the router's `Executor` over those, and `LocalStats` is its `StatsView`,
backed by `PerformanceHistory` and refreshed at most every `stats_refresh_s` like the replica's
`BackendDirectory`. The index is BM25 only; `hashed_embed` gives consensus deterministic vectors.
Unlike the supervisor, nothing reconnects a backend whose session ended: it stays down.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import numpy as np

from actors.backends.mcp_stdio import McpStdioBackend
from router.config import McpStdioSpec, ResilienceSettings, RouterSettings
from router.core import EmbedFn, Router
from router.errors import RouterError
from router.health import OutlierDetector
from router.models import BackendStatus, CallOutcome, Capability, Catalog, HealthState
from router.performance import CallRecord, PerformanceHistory
from router.retrieval import CatalogIndex, CatalogTexts
from router.scoring import PerfSnapshot
from router.strategies import CallContext
from router.text import words


class LocalBackend:
    """One connected MCP stdio backend and its outlier detector."""

    def __init__(self, spec: McpStdioSpec, resilience: ResilienceSettings) -> None:
        self.spec = spec
        self.resilience = resilience
        self.backend = McpStdioBackend(spec)
        self.detector = OutlierDetector(resilience.ejection)
        self.catalog: Catalog | None = None
        self.inflight = 0
        self.sent = 0  # calls that reached the server (refusals by the outlier detector are not sent)
        self.last_error: str | None = None
        self._sem = asyncio.Semaphore(spec.max_concurrency)

    async def start(self) -> Catalog:
        await self.backend.connect()
        self.catalog = await self.backend.list_capabilities()
        return self.catalog

    def reset(self) -> None:
        self.detector = OutlierDetector(self.resilience.ejection)
        self.last_error = None

    async def call(self, capability: Capability, arguments: dict[str, Any], timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        # As in BackendSupervisor.call: a cancelled call propagates and records nothing.
        admission = self.detector.admit(force)
        if not admission.allowed:
            return CallOutcome(backend=self.spec.name, capability=capability.name, ok=False, latency_ms=0.0,
                               error_type="backend_unavailable",
                               error=f"backend {self.spec.name!r} is ejected for another "
                                     f"{self.detector.remaining_s():.1f} s after repeated failures")
        started = time.perf_counter()
        self.inflight += 1
        self.sent += 1
        try:
            async with self._sem:
                outcome = await self.backend.call(capability, arguments, timeout_s=timeout_s, context=context)
        except RouterError as exc:
            outcome = CallOutcome(backend=self.spec.name, capability=capability.name, ok=False,
                                  latency_ms=(time.perf_counter() - started) * 1000, error_type=exc.code,
                                  error=exc.message)
        finally:
            self.inflight -= 1
        self.detector.record(outcome.ok, admission.probe, admission.forced_in)
        if not outcome.ok:
            self.last_error = outcome.error
        return outcome

    def status(self) -> BackendStatus:
        health: HealthState = "healthy" if self.backend.connected else "down"
        if health == "healthy" and self.detector.ejected:
            health = "ejected"
        elif health == "healthy" and self.detector.state == "half_open":
            health = "degraded"
        cat = self.catalog
        return BackendStatus(name=self.spec.name, kind=self.spec.kind, transport=self.backend.transport,
                             health=health, description=cat.description if cat else "",
                             catalog_version=cat.version if cat else None,
                             tool_count=len(cat.capabilities) if cat else 0, last_error=self.last_error,
                             consecutive_failures=self.detector.consecutive_failures,
                             ejections=self.detector.ejections, inflight=self.inflight)


class LocalExecutor:
    """The router's `Executor`: calls the named `LocalBackend` directly."""

    def __init__(self, backends: Mapping[str, LocalBackend]) -> None:
        self.backends = backends

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        backend = self.backends.get(capability.backend)
        if backend is None:
            return CallOutcome(backend=capability.backend, capability=capability.name, ok=False,
                               latency_ms=0.0, error_type="backend_unavailable",
                               error=f"no backend {capability.backend!r}")
        return await backend.call(capability, arguments, timeout_s, context, force)


class LocalStats:
    """The router's `StatsView`: statuses and performance snapshots refreshed at most every `refresh_s`."""

    def __init__(self, backends: Mapping[str, LocalBackend], window: int, refresh_s: float) -> None:
        self.backends = backends
        self.window = window
        self.refresh_s = refresh_s
        self.history = PerformanceHistory(window)
        self._statuses: dict[str, BackendStatus] = {}
        self._perf: dict[tuple[str, str], PerfSnapshot] = {}
        self._at = float("-inf")

    def reset(self) -> None:
        self.history = PerformanceHistory(self.window)
        self._at = float("-inf")

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._at >= self.refresh_s:
            self._statuses = {name: b.status() for name, b in self.backends.items()}
            self._perf = self.history.snapshots()
            self._at = now

    def statuses(self) -> Mapping[str, BackendStatus]:
        self._refresh()
        return self._statuses

    def perf(self) -> Mapping[tuple[str, str], PerfSnapshot]:
        self._refresh()
        return self._perf

    def record(self, backend: str, intent: str, outcome: CallOutcome) -> None:
        self.history.record(backend, intent, CallRecord(time.time(), outcome.latency_ms, outcome.ok,
                                                        outcome.error_type))


def _hashed(text: str, dim: int) -> np.ndarray:
    vec = np.zeros(dim, dtype=np.float32)
    for w in words(text):
        h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
        vec[h % dim] += 1.0 if (h >> 63) & 1 else -1.0
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm else vec


def hashed_embed(dim: int = 256) -> EmbedFn:
    """A deterministic bag-of-words embedding (signed feature hashing), L2-normalised."""

    async def embed(texts: list[str]) -> np.ndarray:
        return np.stack([_hashed(t, dim) for t in texts]) if texts else np.zeros((0, dim), dtype=np.float32)

    return embed


class InProcessRouter:
    """Connects the settings' stdio backends and builds a `Router` over them (BM25 index)."""

    def __init__(self, settings: RouterSettings, *, refresh_s: float | None = None) -> None:
        specs = [s for s in settings.enabled_backends if isinstance(s, McpStdioSpec)]
        if len(specs) != len(settings.enabled_backends):
            raise ValueError("the in-process router runs mcp_stdio backends only")
        res = settings.resilience
        self.settings = settings
        self.backends = {s.name: LocalBackend(s, res) for s in specs}
        self.stats = LocalStats(self.backends, res.perf_window,
                                res.stats_refresh_s if refresh_s is None else refresh_s)
        self.executor = LocalExecutor(self.backends)
        self.embed = hashed_embed()
        self.router = Router(settings, executor=self.executor, embed=self.embed, stats=self.stats)

    async def __aenter__(self) -> InProcessRouter:
        try:
            catalogs = await asyncio.gather(*(b.start() for b in self.backends.values()))
        except BaseException:
            await self.close()
            raise
        index = CatalogIndex(CatalogTexts.build(catalogs), None, None, self.settings.routing)
        self.router.set_catalogs(catalogs, index)
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await asyncio.gather(*(b.backend.close() for b in self.backends.values()), return_exceptions=True)

    def reset(self) -> None:
        """Start over: empty performance history, no ejections, a fresh router (no caches or sessions)."""
        for b in self.backends.values():
            b.reset()
        self.stats.reset()
        catalogs, index = list(self.router.catalogs.values()), self.router.index
        self.router = Router(self.settings, executor=self.executor, embed=self.embed, stats=self.stats)
        if index is not None:
            self.router.set_catalogs(catalogs, index)
