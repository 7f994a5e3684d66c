"""RayExecutor: the router's `Executor`: one Ray actor call per backend call.

Every call is its own actor task, so a fast call never waits behind a slow one to the same backend,
and cancelling a call (a parallel or hedged loser, a request whose client went away) cancels that
task inside the actor, which cancels the MCP request (the server receives
`notifications/cancelled`). The W3C trace context travels with the call.

When an actor is restarting (`ActorUnavailableError`) the call is retried with backoff until its
timeout; when it is gone for good (`ActorDiedError`: replaced by a redeploy, or its owner restarted)
the executor asks the application's `BackendPool` for the current actors, once for all the calls
that found it gone, and retries on the new one. A call that may act is sent again only where it cannot
have run: refused by an actor restarting, or by one the pool ended after draining it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import ray
from opentelemetry.propagate import inject
from ray.serve.exceptions import RayServeException

from actors.host import member_gone
from router.errors import ErrorKind
from router.values import CallContext, CallOutcome, Capability

log = logging.getLogger("mcp_router.executor")
# Asks the pool for the current actors: backend name -> actor handle.
AcquireFn = Callable[[], Awaitable[dict[str, Any]]]
ACQUIRE_TIMEOUT_S = 60.0  # the pool may be placing many backends again (a lost node); longer, it is not answering


class ActorTable:
    """A replica's handles to its backend actors, shared by the executor and the directory."""

    def __init__(self, handles: dict[str, Any], acquire: AcquireFn | None = None) -> None:
        self.handles = handles
        self._acquire = acquire
        self._refreshing: asyncio.Future[None] | None = None
        self.reacquired = 0  # how often the pool was asked again (a replaced or lost actor)

    def get(self, backend: str) -> Any:
        return self.handles.get(backend)

    async def refresh(self, stale: Any, backend: str) -> bool:
        """Ask the pool for the current actors once, however many callers found `stale` gone; False
        when there is no pool to ask (a pool that cannot answer yet is asked again on the next try)."""
        if self.handles.get(backend) is not stale:
            return True  # another caller already replaced it
        if self._acquire is None:
            return False
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.ensure_future(self._reacquire())
            self.reacquired += 1
        try:
            await asyncio.shield(self._refreshing)
        except (ray.exceptions.RayError, RayServeException, TimeoutError) as exc:
            # The pool is restarting too: the caller's backoff tries again.
            log.warning("asking the backend pool for the current actors failed: %r", exc)
        return True

    async def _reacquire(self) -> None:
        assert self._acquire is not None
        # Updated here, not by the waiting callers: a caller that fails after this finishes must see the
        # new handles, not start another round. Bounded: a call to a pool with no live replica waits for one.
        self.handles.update(await asyncio.wait_for(self._acquire(), ACQUIRE_TIMEOUT_S))


class RayExecutor:
    def __init__(self, actors: ActorTable) -> None:
        self.actors = actors

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        carrier: dict[str, str] = {}
        inject(carrier)  # the current (attempt) span's context travels into the actor and on to the backend
        context = replace(context, trace=carrier)
        # What the backend needs of the capability to call it: its description and schema would only be
        # serialized into every call (the most of what a call costs Ray here).
        sent = replace(capability, description="", input_schema={}, intents=(), tags=())
        started = time.monotonic()
        delay = 0.05
        while True:
            handle = self.actors.get(capability.backend)
            if handle is None:
                return _failed(capability, started, f"no actor for backend {capability.backend!r}", sent=False)
            left = timeout_s - (time.monotonic() - started)  # a call sent again has what is left of its time
            ref = handle.call.remote(sent, arguments, left, context, force)
            try:
                return await ref
            except asyncio.CancelledError:
                ray.cancel(ref)  # reaches the actor's coroutine, which cancels the MCP request
                raise
            except ray.exceptions.ActorDiedError as exc:  # gone for good: the pool has its successor
                found = await self.actors.refresh(handle, capability.backend)
                if not capability.repeatable and not _ended_by_the_pool(exc):  # not drained first: it may
                    return _failed(capability, started, _maybe_acted(exc))   # have run, or still be running
                if not found:
                    return _failed(capability, started, f"backend actor gone: {type(exc).__name__}")
            except (ray.exceptions.ActorUnavailableError, ray.exceptions.RayActorError) as exc:
                unsent = _refused_while_restarting(exc)
                if not capability.repeatable and not unsent:  # lost mid-call: it may have run, or still run
                    return _failed(capability, started, _maybe_acted(exc))
                if timeout_s - (time.monotonic() - started) <= delay:
                    return _failed(capability, started, f"backend actor unavailable: {type(exc).__name__}",
                                   sent=not unsent)
            except ray.exceptions.RayTaskError as exc:
                if not member_gone(exc):  # a fault in the actor itself
                    return _failed(capability, started, str(exc)[:500], ErrorKind.BACKEND_FAILED)
                # Retired from its host (its configuration changed): the pool has its new place.
                if not await self.actors.refresh(handle, capability.backend):
                    return _failed(capability, started, "backend retired", sent=False)
            if timeout_s - (time.monotonic() - started) <= delay:
                return _failed(capability, started, "backend actor unavailable")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


def _refused_while_restarting(exc: Exception) -> bool:
    """Ray refused the call because the actor was restarting when it was submitted: it never reached it."""
    return isinstance(exc, ray.exceptions.ActorUnavailableError) and "is restarting" in str(exc)


def _ended_by_the_pool(exc: ray.exceptions.ActorDiedError) -> bool:
    """The pool ended the host (`ray.kill`) after draining it: its calls in flight had finished or been
    cancelled by then, so this call never ran there. Any other end (its owner died, its node was lost) may
    have come in the middle of the call."""
    return "killed by `ray.kill`" in str(exc)


def _maybe_acted(exc: Exception) -> str:
    # Ray cannot say whether the actor ran the call before it was lost: a tool that may act is not sent twice.
    return (f"backend actor lost during the call ({type(exc).__name__}): the call may have run, and the tool "
            "is not declared read-only or idempotent, so it is not sent again")


def _failed(capability: Capability, started: float, error: str,
            kind: ErrorKind = ErrorKind.BACKEND_UNAVAILABLE, sent: bool = True) -> CallOutcome:
    return CallOutcome.failed(capability, kind, error, (time.monotonic() - started) * 1000, sent=sent)
