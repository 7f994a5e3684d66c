"""RayExecutor: the router's `Executor`, calling backend actors by name.

A replica on the same node as a backend's actor calls it over the actor's Unix-socket channel
(`actors.channel`), which skips Ray's task machinery: about 2 ms and a thread hand-over per call.
Callers on other nodes use Ray actor calls. There, a call to a backend whose actor has no call of
this replica in flight goes alone; calls made while one is in flight are gathered until the end of
the event-loop turn and travel as one actor call (`call_many`), because a Ray actor call costs
about 0.8 ms of CPU on each side whatever it carries. On either path, cancelling a call cancels it
inside the actor (and so the MCP request) without touching the calls it travelled with.

When an actor is restarting or its node is gone (`ActorUnavailableError`, `ActorDiedError`, a
closed channel), the handle is looked up again by name and the call retried with backoff until its
timeout, so a node loss costs only the calls that were in flight on it. The W3C trace context
travels with the call (the actor attaches it, and the MCP SDK forwards it in the request's `_meta`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import replace
from typing import Any

import ray
from opentelemetry.propagate import inject

from actors.channel import ChannelCallError, ChannelClient, ChannelClosed
from actors.registry import get_backend_actor
from router.models import CallOutcome, Capability
from router.strategies import CallContext

_RETRYABLE = (ray.exceptions.ActorUnavailableError, ray.exceptions.ActorDiedError, ray.exceptions.RayActorError,
              ChannelClosed)


_CHANNEL_RETRY_S = 30.0
_call_ids = itertools.count()
log = logging.getLogger("mcp_router.executor")


class _Coalescer:
    """One backend actor's calls: alone while none is in flight, else gathered until the loop turn ends."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._inflight = 0
        self.gathered = 0  # calls that travelled with others
        self._pending: list[tuple[str, tuple[Any, ...], asyncio.Future[CallOutcome]]] = []
        self._deliveries: set[asyncio.Task[None]] = set()

    async def call(self, args: tuple[Any, ...]) -> CallOutcome:
        if self._inflight or self._pending:
            return await self._gathered(args)
        self._inflight += 1
        ref = self.handle.call.remote(*args)
        try:
            return await ref
        except asyncio.CancelledError:
            ray.cancel(ref)  # reaches the actor's coroutine, which cancels the MCP request
            raise
        finally:
            self._inflight -= 1

    async def _gathered(self, args: tuple[Any, ...]) -> CallOutcome:
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self._flush)
        call_id = f"{id(self):x}-{next(_call_ids)}"
        future: asyncio.Future[CallOutcome] = loop.create_future()
        self._pending.append((call_id, args, future))
        try:
            return await future
        except asyncio.CancelledError:
            self.handle.cancel_calls.remote([call_id])  # stops this call's task in the actor, not the others
            raise

    def _flush(self) -> None:
        batch = [p for p in self._pending if not p[2].done()]  # a call cancelled before it left stays home
        self._pending = []
        if batch:
            self._inflight += 1
            self.gathered += len(batch)
            ref = self.handle.call_many.remote([(call_id, args) for call_id, args, _ in batch])
            delivery = asyncio.get_running_loop().create_task(self._deliver(ref, [f for _, _, f in batch]))
            self._deliveries.add(delivery)  # held until done: the loop keeps only weak references to tasks
            delivery.add_done_callback(self._deliveries.discard)

    async def _deliver(self, ref: Any, futures: list[asyncio.Future[CallOutcome]]) -> None:
        try:
            outcomes = await ref
        except BaseException as exc:  # every waiting call sees the failure and decides for itself
            for f in futures:
                if not f.done():
                    f.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        finally:
            self._inflight -= 1
        for f, outcome in zip(futures, outcomes, strict=True):
            if not f.done():
                f.set_result(outcome)


class _Route:
    """How this replica reaches one backend actor: its channel when on the same node, else Ray."""

    def __init__(self, handle: Any, via: ChannelClient | _Coalescer, retry_channel_at: float | None = None) -> None:
        self.handle = handle
        self.via = via
        self.retry_channel_at = retry_channel_at  # Ray stands in for a channel that could not be opened
        self.loop = asyncio.get_running_loop()

    async def close(self) -> None:
        if isinstance(self.via, ChannelClient) and self.loop is asyncio.get_running_loop():
            await self.via.close()

    def usable(self, handle: Any) -> bool:
        if handle is not self.handle or self.loop is not asyncio.get_running_loop():
            return False
        if isinstance(self.via, ChannelClient):
            return not self.via.closed
        return self.retry_channel_at is None or time.monotonic() < self.retry_channel_at


class RayExecutor:
    def __init__(self, namespace: str, actors: dict[str, Any], *, same_node_channel: bool = True) -> None:
        self.namespace = namespace
        self.actors = actors
        self.same_node_channel = same_node_channel
        self.opened = 0  # routes opened, first ones included
        self._node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        self._routes: dict[str, _Route] = {}
        self._opening: dict[str, asyncio.Lock] = {}

    def transport(self, backend: str) -> str | None:
        """"channel" or "ray" for a backend this executor has called, else None."""
        route = self._routes.get(backend)
        return None if route is None else "channel" if isinstance(route.via, ChannelClient) else "ray"

    async def _route(self, backend: str, failed: _Route | None = None, refresh: bool = False) -> _Route:
        """The route to `backend`. After a failure (`refresh`), `failed` is the route it happened on:
        only a caller whose failed route is still the current one looks the actor up again and opens
        a new route, so calls that failed together do not each replace the one the first opened."""
        def current() -> _Route | None:
            route = self._routes.get(backend)
            stale = refresh and route is failed
            return route if route is not None and not stale and route.usable(self.actors.get(backend)) else None

        if (route := current()) is not None:
            return route
        async with self._opening.setdefault(backend, asyncio.Lock()):  # one connection, however many callers
            if (route := current()) is not None:
                return route
            old = self._routes.get(backend)
            if (refresh and old is failed) or backend not in self.actors:
                self.actors[backend] = await asyncio.to_thread(get_backend_actor, backend, self.namespace)
            if old is not None:
                await old.close()  # the actor restarted or moved, or its channel closed
            route = self._routes[backend] = await self._open(self.actors[backend])
            self.opened += 1
            return route

    async def _open(self, handle: Any) -> _Route:
        if not self.same_node_channel or self._node_id is None:
            return _Route(handle, _Coalescer(handle))
        try:
            address = await handle.channel_address.remote()
            if address is None or address[0] != self._node_id:
                return _Route(handle, _Coalescer(handle))  # another node: Ray carries the calls
            return _Route(handle, await ChannelClient.connect(address[1], address[2]))
        except (ray.exceptions.RayTaskError, AttributeError, ChannelClosed) as exc:
            # The actor could not open its channel, predates it, or its socket is gone: Ray carries the
            # calls for a while, then the channel is tried again.
            log.warning("backend actor channel unavailable, using Ray calls: %s", f"{type(exc).__name__}: {exc}"[:300])
            return _Route(handle, _Coalescer(handle), time.monotonic() + _CHANNEL_RETRY_S)

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        carrier: dict[str, str] = {}
        inject(carrier)  # the current (attempt) span's context travels into the actor and on to the backend
        return await self._call(capability, arguments, timeout_s, replace(context, trace=carrier), force)

    async def _call(self, capability: Capability, arguments: dict[str, Any], timeout_s: float,
                    context: CallContext, force: bool) -> CallOutcome:
        started = time.monotonic()
        delay = 0.1
        failed: _Route | None = None
        refresh = False
        while True:
            route = None
            try:
                route = await self._route(capability.backend, failed, refresh)
                return await route.via.call((capability, arguments, timeout_s, context, force))
            except _RETRYABLE as exc:
                # Before sleeping: by the time this caller wakes, another may have opened a new route.
                failed, refresh = route or self._routes.get(capability.backend), True
                remaining = timeout_s - (time.monotonic() - started)
                if remaining <= delay:
                    return self._failed(capability, started, f"backend actor unavailable: {type(exc).__name__}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            except ValueError:
                # No actor by that name (yet): it is being re-created after a restart budget ran out.
                return self._failed(capability, started, f"no actor for backend {capability.backend!r}")
            except (ChannelCallError, ray.exceptions.RayTaskError) as exc:  # a fault in the actor itself
                return self._failed(capability, started, str(exc)[:500], "backend_failed")

    @staticmethod
    def _failed(capability: Capability, started: float, error: str,
                error_type: str = "backend_unavailable") -> CallOutcome:
        return CallOutcome(backend=capability.backend, capability=capability.name, ok=False,
                           latency_ms=(time.monotonic() - started) * 1000, error_type=error_type, error=error)
