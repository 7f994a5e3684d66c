"""RayExecutor: the router's `Executor`, calling backend actors by name.

Cancelling a call cancels the Ray task (and so the MCP request inside the actor). When an actor
is restarting or its node is gone (`ActorUnavailableError`, `ActorDiedError`), the handle is looked
up again by name and the call retried with backoff until its timeout, so a node loss costs only
the calls that were in flight on it. The W3C trace context travels with the call (the actor
attaches it, and the MCP SDK forwards it in the request's `_meta`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import ray
from opentelemetry.propagate import inject

from actors.registry import get_backend_actor
from router.models import CallOutcome, Capability
from router.strategies import CallContext

_RETRYABLE = (ray.exceptions.ActorUnavailableError, ray.exceptions.ActorDiedError, ray.exceptions.RayActorError)


class RayExecutor:
    def __init__(self, namespace: str, actors: dict[str, Any]) -> None:
        self.namespace = namespace
        self.actors = actors

    async def _handle(self, backend: str, refresh: bool = False) -> Any:
        if refresh or backend not in self.actors:
            self.actors[backend] = await asyncio.to_thread(get_backend_actor, backend, self.namespace)
        return self.actors[backend]

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        carrier: dict[str, str] = {}
        inject(carrier)  # the current (attempt) span's context travels into the actor and on to the backend
        return await self._call(capability, arguments, timeout_s, replace(context, trace=carrier), force)

    async def _call(self, capability: Capability, arguments: dict[str, Any], timeout_s: float,
                    context: CallContext, force: bool) -> CallOutcome:
        started = time.monotonic()
        delay = 0.1
        refresh = False
        while True:
            ref = None
            try:
                handle = await self._handle(capability.backend, refresh)
                ref = handle.call.remote(capability, arguments, timeout_s, context, force)
                return await ref
            except asyncio.CancelledError:
                if ref is not None:
                    ray.cancel(ref)  # reaches the actor's coroutine, which cancels the MCP request
                raise
            except _RETRYABLE as exc:
                remaining = timeout_s - (time.monotonic() - started)
                if remaining <= delay:
                    return CallOutcome(backend=capability.backend, capability=capability.name, ok=False,
                                       latency_ms=(time.monotonic() - started) * 1000,
                                       error_type="backend_unavailable",
                                       error=f"backend actor unavailable: {type(exc).__name__}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                refresh = True
            except ValueError:
                # No actor by that name (yet): it is being re-created after a restart budget ran out.
                return CallOutcome(backend=capability.backend, capability=capability.name, ok=False,
                                   latency_ms=(time.monotonic() - started) * 1000, error_type="backend_unavailable",
                                   error=f"no actor for backend {capability.backend!r}")
