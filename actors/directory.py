"""BackendDirectory: a replica's local view of the backends, refreshed in the background.

Once a second it reads every backend actor's status and the PerformanceActor's snapshot; when a
backend's catalog version changes it fetches the catalog and rebuilds the hybrid index (tool
vectors come from the embedder deployment through an on-disk cache, so only new texts are
embedded). Outcomes are buffered and sent to the PerformanceActor in batches. The request path
only ever reads these local copies (this is the router's `StatsView`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import ray

from actors.background import Background
from actors.executor import ActorTable
from actors.host import BackendRef
from router.retrieval.catalog import MAX_PROBES, CatalogIndex, CatalogTexts
from router.retrieval.embeddings import CachedEmbedder
from router.settings import FlowiseSpec, LangflowSpec, RouterSettings
from router.stages.scoring import PerfSnapshot
from router.values import BackendStatus, CallOutcome, Catalog

log = logging.getLogger("mcp_router.directory")
_FLUSH_S = 0.2
# Catalogs announced together (a deploy touching many servers) change within a second or so of each other:
# waiting this long after the first, then fetching every changed one, indexes them in one rebuild.
_SETTLE_S = 0.5
_FRESH_WAIT_S = 5.0  # what a reader of the statuses waits for a refresh before reading the last ones
_RETRY_S, _RETRY_MAX_S = 5.0, 300.0  # embedding a catalog again after the model failed: first wait, longest
# A replica's start waits for its first index's fusion weights up to this many capabilities, so that a small
# catalog answers its first question as every later one; tuning embeds at most twice as many short texts.
_TUNED_BEFORE_READY = MAX_PROBES


class BackendDirectory:
    def __init__(self, settings: RouterSettings, actors: ActorTable, perf_actor: Any,
                 embedder: CachedEmbedder | None,
                 on_index: Callable[[list[Catalog], CatalogIndex], None],
                 on_status: Callable[[Mapping[str, BackendStatus]], None] | None = None,
                 prepare: Callable[[list[Catalog], CatalogIndex], Callable[[], None]] | None = None) -> None:
        """`on_index`: the router's set_catalogs, a new index replaces the old one; `prepare`: work to run in a
        thread before it does (the router's views_for)."""
        self.settings = settings
        self._on_index = on_index
        self._prepare = prepare
        self.actors = actors
        self.perf_actor = perf_actor
        self.embedder = embedder
        self._on_status = on_status
        self._statuses: dict[str, BackendStatus] = {}
        self._statuses_at = float("-inf")
        self._refreshing: asyncio.Future[None] | None = None
        self._syncing: asyncio.Future[None] | None = None
        self._tuning: asyncio.Future[None] | None = None
        self._perf: dict[tuple[str, str], PerfSnapshot] = {}
        self._catalogs: dict[str, Catalog] = {}
        self._pending: list[tuple[str, str, float, float, bool, str | None, str | None]] = []
        self._background = Background()
        self._rebuild_lock = asyncio.Lock()
        self.index_built_at: float | None = None
        self._index: CatalogIndex | None = None
        self.provisional = 0  # descriptions the index holds on a previous vector, until embedded
        self.dense_error: str | None = None  # why the last rebuild could not embed the catalog
        self._dense_failures = 0
        self._dense_retry_at = float("inf")

    # -- StatsView -----------------------------------------------------------------------------

    def statuses(self) -> Mapping[str, BackendStatus]:
        return self._statuses

    def perf(self) -> Mapping[tuple[str, str], PerfSnapshot]:
        return self._perf

    def record(self, backend: str, intent: str, outcome: CallOutcome, caller: str | None = None) -> None:
        # The history is every caller's view of the backend: it keeps what the outcome says of the backend
        # itself (a tool error the caller provoked is an answer), and nothing of a call that says nothing;
        # whose call it was keeps one caller's calls from speaking for the others (PerformanceHistory).
        answered = outcome.backend_answered
        if answered is not None:
            self._pending.append((backend, intent, time.time(), outcome.latency_ms, answered,
                                  outcome.error_kind.value if outcome.error_kind else None, caller))

    # -- background work -----------------------------------------------------------------------

    def start(self) -> None:
        self._background.start((self.refresh, self.settings.resilience.stats_refresh_s), (self.flush, _FLUSH_S))

    async def stop(self) -> None:
        await self._background.stop()
        for task in (self._syncing, self._tuning):
            if task is not None:
                task.cancel()
        await self.flush()

    async def flush(self) -> None:
        if not self._pending or self.perf_actor is None:
            return
        batch, self._pending = self._pending, []
        self.perf_actor.record_many.remote(batch)  # fire and forget: the request path never waits

    async def refresh(self) -> None:
        await asyncio.gather(self.refresh_statuses(), self.refresh_perf())

    async def refresh_perf(self) -> None:
        if self.perf_actor is not None:
            self._perf = await asyncio.wait_for(self.perf_actor.snapshot.remote(), 5)

    async def fresh_statuses(self, max_age_s: float) -> None:
        """Statuses no older than `max_age_s`: concurrent callers share one refresh."""
        if time.monotonic() - self._statuses_at <= max_age_s:
            return
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.ensure_future(self.refresh_statuses())
        # A reader waits a moment for the refresh, then reads the last statuses: one that waits on a pool
        # being replaced, or hosts that do not answer, must not hold up `/health`.
        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._refreshing), _FRESH_WAIT_S)

    async def refresh_statuses(self, settle_s: float = _SETTLE_S) -> None:
        """Read every backend's status; when a catalog changed, index the changes (in the background, so
        that a reader of the statuses never waits for a rebuild)."""
        self._statuses_at = time.monotonic()
        handles = dict(self.actors.handles)
        results = await _per_host(handles, "get_statuses", lambda members: (members,))
        statuses: dict[str, BackendStatus] = {}
        unreachable: dict[int, str] = {}  # host -> one of its backends that did not answer
        for name, res in results.items():
            if isinstance(res, BackendStatus):
                statuses[name] = res
                continue
            unreachable.setdefault(id(getattr(handles[name], "host", handles[name])), name)
            spec = self.settings.backend(name)
            statuses[name] = BackendStatus(name=name, kind=spec.kind if spec else "?", transport="?",
                                           health="down", last_error=f"backend actor unreachable: {res}")
        self._statuses = statuses  # published before the pool is asked, which may take a minute
        if self._on_status is not None:
            self._on_status(statuses)
        # Gone, retired, or pinned to a node that is lost (its host then neither answers nor dies): the pool
        # has the current place of every backend, asked once per host, all at once; the next refresh sees it.
        await asyncio.gather(*(self.actors.refresh(handles[name], name) for name in unreachable.values()),
                             return_exceptions=True)
        changed = [n for n, s in statuses.items()
                   if s.catalog_version and s.catalog_version != getattr(self._catalogs.get(n), "version", None)]
        if (changed or self._embed_again()) and (self._syncing is None or self._syncing.done()):
            self._syncing = asyncio.ensure_future(self._sync_changes(settle_s))

    def _embed_again(self) -> bool:
        return self.dense_error is not None and time.monotonic() >= self._dense_retry_at

    async def _sync_changes(self, settle_s: float) -> None:
        await asyncio.sleep(settle_s)
        try:
            # every catalog that changed by now, not only those the poll saw; else the catalog the model failed
            if not await self.sync_catalogs() and self._embed_again():
                await self.rebuild()
        except (ray.exceptions.RayError, TimeoutError) as exc:  # the next poll sees the changes and tries again
            log.warning("indexing the changed catalogs failed: %s", exc)
        except Exception:  # a fault of ours building the index: said with its traceback, and tried again too
            log.exception("indexing the changed catalogs failed")

    async def sync_catalogs(self, names: list[str] | None = None) -> bool:
        """Fetch changed catalogs and rebuild the index; True when the index changed."""
        names = list(self.actors.handles) if names is None else names
        handles = {n: self.actors.handles[n] for n in names if n in self.actors.handles}
        known = {n: getattr(self._catalogs.get(n), "version", None) for n in handles}
        results = await _per_host(handles, "catalogs", lambda members: ({m: known[_name(m)] for m in members},),
                                  timeout_s=10)
        changed = False
        for name, res in results.items():
            if isinstance(res, Catalog):
                self._catalogs[name] = res
                changed = True
            elif isinstance(res, BaseException):
                log.warning("backend %s: fetching its catalog failed: %s", name, f"{type(res).__name__}: {res}"[:300])
        if changed:
            await self.rebuild()
        return changed

    async def rebuild(self) -> None:
        async with self._rebuild_lock:
            order = [b.name for b in self.settings.enabled_backends]
            catalogs = [self._catalogs[n] for n in order if n in self._catalogs]
            # Building the texts and the index takes seconds at tens of thousands of capabilities: off the
            # event loop, which keeps answering requests on the previous index meanwhile.
            started = time.monotonic()
            texts = await asyncio.to_thread(CatalogTexts.build, catalogs, self._flow_targets())
            cached = None
            try:
                cached = await self._publish_provisional(catalogs, texts)
            except Exception as exc:  # the full rebuild below still runs, and says what failed
                log.warning("serving the changed catalogs before embedding them failed: %s", exc)
            tool_vecs, server_vecs = await self._vectors(texts, cached)
            provisional = 0
            if tool_vecs is None and self.dense_error is not None:
                tool_vecs, server_vecs, provisional = await self._stand_ins(texts, cached)
            embedded = time.monotonic()
            before = self._index  # its fusion weights serve until this catalog's own are tuned
            alphas = (before.tools.alpha, before.servers.alpha) if before is not None and before.tools.dense else None
            index = await asyncio.to_thread(CatalogIndex, texts, tool_vecs, server_vecs, self.settings.routing,
                                            alphas)
            await self._publish(catalogs, index, provisional=provisional)
            log.info("index rebuilt: %d backends, %d capabilities, dense=%s, in %.1f s (%.1f s embedding)",
                     len(catalogs), len(index), tool_vecs is not None, time.monotonic() - started,
                     embedded - started)
            if self._tuning is not None:
                self._tuning.cancel()
            if (tool_vecs is not None and not provisional and self.embedder is not None
                    and self.settings.routing.self_tune_alpha):
                self._tuning = asyncio.ensure_future(self._tune(catalogs, index))

    async def _tune(self, catalogs: list[Catalog], index: CatalogIndex) -> None:
        """Tune the new index's fusion weights and serve them, unless a newer index is served by then. Served
        first and tuned after: tuning embeds up to 400 pseudo-queries and searches with each (seconds at
        tens of thousands of capabilities), which a new catalog need not wait for."""
        assert self.embedder is not None
        tuned = index.with_alphas(self.settings.routing.alpha, self.settings.routing.alpha)
        started = time.monotonic()
        try:
            await tuned.tune_alpha(self.embedder.embed)
        except Exception as exc:  # the weights served still route; the next rebuild retries
            log.warning("tuning the fusion weight failed, keeping routing.alpha: %s", exc)
            return
        async with self._rebuild_lock:
            if self._index is not index:
                return  # a newer index is served: its own tuning follows
            if (tuned.tools.alpha, tuned.servers.alpha) != (index.tools.alpha, index.servers.alpha):
                await self._publish(catalogs, tuned, provisional=0)
        log.info("fusion weight tuned: tools %.1f, servers %.1f, in %.1f s", tuned.tools.alpha, tuned.servers.alpha,
                 time.monotonic() - started)

    async def tuned(self) -> None:
        """Wait for the fusion weights of the index being served, if they are being tuned."""
        if self._tuning is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._tuning)

    async def _publish(self, catalogs: list[Catalog], index: CatalogIndex, provisional: int) -> None:
        if self._prepare is not None:
            try:
                await asyncio.to_thread(self._prepare(catalogs, index))
            except Exception:  # the index is served all the same; a view not prepared is built when asked for
                log.exception("preparing the callers' views of the new index failed")
        self._on_index(catalogs, index)
        self._index, self.provisional = index, provisional
        self.index_built_at = time.time()

    async def _publish_provisional(self, catalogs: list[Catalog],
                                   texts: CatalogTexts) -> list[np.ndarray | None] | None:
        """Serve changed catalogs before their changed descriptions are embedded: a capability (or server)
        already in the index keeps its vector until its new one is computed; a new one is embedded first.
        What can be called, and BM25 over the new texts, change at once; the dense half catches up with
        the full rebuild that follows (a few seconds for a hundred descriptions on a small machine).
        Returns what the embedding cache held of every text, so that the rebuild does not read it again."""
        before, embedder = self._index, self.embedder
        if before is None or embedder is None or not texts.tool_dense or before.tools.vectors([]) is None:
            return None  # nothing served yet (a cold start waits for every vector), or no dense half
        every = [*texts.tool_dense, *texts.server_dense]
        cached = await asyncio.to_thread(embedder.cached, every)
        found = list(cached)
        kept = self._previous_vectors(texts, found)
        if not kept:
            return cached  # nothing changed that the index already holds: the full rebuild is as soon
        new = [i for i, v in enumerate(found) if v is None]
        if new:
            for i, vec in zip(new, await embedder.embed([every[i] for i in new]), strict=True):
                found[i] = cached[i] = vec  # in the cache now: the rebuild does not embed it again
        vectors = np.stack([v for v in found if v is not None])
        n = len(texts.tool_dense)
        index = await asyncio.to_thread(CatalogIndex, texts, vectors[:n], vectors[n:], self.settings.routing,
                                        (before.tools.alpha, before.servers.alpha))
        await self._publish(catalogs, index, provisional=kept)
        log.info("changed catalogs served at once: %d descriptions on their previous vectors until embedded", kept)
        return cached

    def _previous_vectors(self, texts: CatalogTexts, found: list[np.ndarray | None]) -> int:
        """Fill each missing vector of `found` (the tool texts, then the server texts) with the one the served
        index holds for the same capability or server; how many were filled."""
        before = self._index
        if before is None or not before.tools.dense:
            return 0
        n = len(texts.tool_dense)
        rows = {c.key: i for i, c in enumerate(before.texts.capabilities)}
        servers = {c.backend: j for j, c in enumerate(before.texts.catalogs)}
        kept = 0
        for i in (i for i, v in enumerate(found) if v is None):
            row = rows.get(texts.capabilities[i].key) if i < n else servers.get(texts.catalogs[i - n].backend)
            previous = None if row is None else (before.tools if i < n else before.servers).vectors([row])
            if previous is not None:
                found[i], kept = previous[0], kept + 1
        return kept

    async def _stand_ins(self, texts: CatalogTexts, cached: list[np.ndarray | None] | None
                         ) -> tuple[np.ndarray | None, np.ndarray | None, int]:
        """The model failed: every text on the vector the cache or the served index has for it, and a zero
        vector (matched by its words alone) where neither has one, so that one failure does not take the dense
        half from every capability. Returns the vectors and how many texts are not on their own; a rebuild
        retries (`refresh_statuses`)."""
        assert self.embedder is not None
        if cached is None:
            cached = await asyncio.to_thread(self.embedder.cached, [*texts.tool_dense, *texts.server_dense])
        found = list(cached)
        self._previous_vectors(texts, found)
        known = [v for v in found if v is not None]
        if not known:
            return None, None, 0
        zero = np.zeros_like(known[0])
        vectors = np.stack([zero if v is None else v for v in found])
        n = len(texts.tool_dense)
        return vectors[:n], vectors[n:], sum(v is None for v in cached)

    def _flow_targets(self) -> dict[str, str]:
        """A flow backend that lists no flows is run, when chosen by its description, on the first flow its
        config names (see router.retrieval)."""
        return {b.name: b.flows[0].id for b in self.settings.enabled_backends
                if isinstance(b, FlowiseSpec | LangflowSpec) and b.flows}

    async def _vectors(self, texts: CatalogTexts, cached: list[np.ndarray | None] | None = None
                       ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Every text's vector; `cached`: what the embedding cache already gave of them (only the rest is
        asked for)."""
        if self.embedder is None or not texts.tool_dense:
            return None, None
        every = [*texts.tool_dense, *texts.server_dense]
        try:
            vecs = await self.embedder.embed(every, found=cached)
        except Exception as exc:
            # The router still routes, on what vectors it has (`_stand_ins`); the status poll retries, later
            # each time, so that a model down for long is not asked every second.
            self.dense_error = str(exc)
            self._dense_failures += 1
            self._dense_retry_at = time.monotonic() + min(_RETRY_MAX_S, _RETRY_S * 2 ** (self._dense_failures - 1))
            log.warning("embedding the catalog failed: %s", exc)
            return None, None
        self.dense_error, self._dense_failures = None, 0
        n = len(texts.tool_dense)
        return vecs[:n], vecs[n:]

    @property
    def catalogs(self) -> Mapping[str, Catalog]:
        return self._catalogs

    async def wait_ready(self, timeout_s: float) -> None:
        """Wait (bounded) for every backend's first connection attempt, then build the first index."""
        await _per_host(dict(self.actors.handles), "start_all", lambda members: (members, timeout_s),
                        timeout_s=timeout_s + 5)
        await self.refresh_statuses(settle_s=0)
        if self._syncing is not None:
            await self._syncing
        if not self._catalogs:
            await self.rebuild()
        if self._index is not None and len(self._index) <= _TUNED_BEFORE_READY:
            await self.tuned()  # a larger catalog is served at once, and tuned after
        with contextlib.suppress(ray.exceptions.RayError, asyncio.TimeoutError):
            await self.refresh_perf()



def _name(member: str) -> str:
    return member.split("@", 1)[0]


async def _per_host(handles: Mapping[str, BackendRef], many: str, args: Callable[[list[str]], tuple[Any, ...]],
                    timeout_s: float = 5.0) -> dict[str, Any]:
    """One `many` call per host for the backends it holds (`args` from its members), whose answer maps
    members to results: by backend name, its result, or the exception its host's call raised. A member
    missing from an answer is missing here too (a catalog the replica already has)."""
    hosts: dict[int, tuple[Any, list[str]]] = {}
    for ref in handles.values():
        hosts.setdefault(id(ref.host), (ref.host, []))[1].append(ref.member)
    results = await asyncio.gather(*(asyncio.wait_for(getattr(host, many).remote(*args(members)), timeout_s)
                                     for host, members in hosts.values()), return_exceptions=True)
    out: dict[str, Any] = {}
    for (_, members), res in zip(hosts.values(), results, strict=True):
        for member in members:
            if isinstance(res, BaseException):
                out[_name(member)] = res
            elif isinstance(res, dict) and member in res:
                out[_name(member)] = res[member]
    return out
