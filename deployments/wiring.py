"""What a router replica is built from, in one place: `build_service` wires the service's collaborators.

    service = await build_service(settings, pool, embedder_handle, generation)

The question embedder (in the replica, or the `Embedder` deployment for large models), the backend actors
and the performance actor from the application's pool, the replica's view of the backends (`directory`),
the labelled examples, the router core, tool selection and chat, rate limits and metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray

from actors.directory import BackendDirectory
from actors.executor import ActorTable, RayExecutor
from actors.feedback import FeedbackView
from deployments.metrics import RouterMetrics
from deployments.service import RouterService
from router.core import Router
from router.errors import LLMNotConfigured
from router.llm.chat import ChatService
from router.llm.client import LLMClient
from router.llm.selection import ToolSelector
from router.retrieval.embeddings import CachedEmbedder, Embedder, EmbeddingCache, MicroBatcher, build_embedder
from router.retrieval.intent import IntentClassifier
from router.security.limits import GrantFn, Limiter
from router.settings import RouterSettings
from router.telemetry import configure_tracing

log = logging.getLogger("mcp_router.ingress")


async def build_service(settings: RouterSettings, pool: Any, embedder: Any, generation: float) -> RouterService:
    """Everything one replica serves with, connected to the application's pool (its backend actors, the
    performance and feedback actors, the shared rate limits) and ready: the first index is built."""
    configure_tracing(settings.telemetry.service_name)
    metrics = RouterMetrics(settings.telemetry.metrics, backends=(b.name for b in settings.backends),
                            intents=settings.intents.intents)
    query_embedder = await _query_embedder(settings, embedder)
    cached = CachedEmbedder(query_embedder, EmbeddingCache(f"{settings.state_dir}/embeddings"))

    async def acquire() -> tuple[dict[str, Any], Any]:
        """This configuration's backend actors and the performance actor, from the application's pool."""
        handles, performance = await pool.acquire.remote(settings.enabled_backends, settings.resilience, generation)
        return dict(handles), performance

    async def backends_only() -> dict[str, Any]:
        return (await acquire())[0]

    handles, perf_actor = await acquire()
    actors = ActorTable(handles, backends_only)
    llm, llm_error = _llm_client(settings)
    prototypes = IntentClassifier.prototype_texts(settings.intents)
    proto_vecs = {name: await cached.embed(texts) for name, texts in prototypes.items()}
    learning = FeedbackView(settings.learning, await pool.feedback.remote(settings.state_dir, settings.learning),
                            min_confidence=settings.routing.min_confidence)
    # The directory hands each new index to the router (defined next) and is the router's live view.
    directory = BackendDirectory(settings, actors, perf_actor, cached,
                                 on_index=lambda catalogs, index: router.set_catalogs(catalogs, index),
                                 prepare=lambda catalogs, index: router.views_for(catalogs, index),
                                 on_status=metrics.observe_health)
    router = Router(settings, executor=metrics.wrap_executor(RayExecutor(actors)), embed=query_embedder.embed,
                    stats=directory, classifier=IntentClassifier(settings.intents, proto_vecs), llm=llm,
                    learning=learning)
    # The examples are read while the backends connect: the feedback actor may be a process still starting.
    examples = asyncio.create_task(learning.refresh())
    await directory.wait_ready(timeout_s=min(20.0, max(b.connect_timeout_s for b in settings.enabled_backends))
                               if settings.enabled_backends else 1.0)
    with contextlib.suppress(ray.exceptions.RayError, TimeoutError):  # else they come with the next refresh
        await examples
    selector = ToolSelector(settings.tool_selection, query_embedder.embed, chooser=llm)
    directory.start()
    learning.start()
    log.info("router ready: %d backends, %d capabilities", len(handles), len(router.index) if router.index else 0)
    return RouterService(
        settings=settings, router=router, directory=directory, learning=learning, selector=selector,
        chat_service=ChatService(llm, selector, router.executor, not_configured=llm_error,
                                 max_turns=settings.llm.max_tool_turns,
                                 tool_timeouts={b.name: b.timeout_s for b in settings.backends}),
        limiter=Limiter(settings.server.replicas, grant=await _shared_rate_limits(settings, pool)),
        metrics=metrics, perf_actor=perf_actor, query_embed=query_embedder.embed)


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
        return MicroBatcher(build_embedder(settings.embeddings), settings.embeddings.batch_size)
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
