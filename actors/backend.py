"""BackendSupervisor: one backend's connection, catalog cache and health, inside a host actor.

Plain async (testable without Ray); a `BackendHost` actor (`actors.host`) holds one or many, which the
application's `BackendPool` creates and owns (`actors.pool`), and router replicas call each through its
`BackendRef` as they would an actor of its own:

    outcome = await ref.call.remote(capability, {"query": "..."}, 10.0, call_context)

A supervisor task connects, refreshes the catalog when its TTL expires or the server says it
changed, runs a health check every `health_interval_s` (bounded by `health_timeout_s`; a backend no
call reached since its last check only every `health_idle_interval_s`), and
reconnects with exponential backoff after a failure. Calls share the one session, bounded by
`max_concurrency` slots shared fairly among the principals calling (`actors.slots`). Calls never raise
for backend faults: they return a failed `CallOutcome`, which also feeds the outlier detector that
ejects a failing backend; an unexpected exception inside a call is a failed outcome too, so it releases
what the call took (its slot, a half-open probe). Each call is its own Ray task: cancelling it cancels
the MCP request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import ray

from actors.backends import build_backend
from actors.backends.relay import router_error_event
from actors.served import ServedCatalog
from actors.slots import FairSlots, NoSlot
from router.errors import BackendBusy, BackendTimeout, BackendUnreachable, ErrorKind, RouterError
from router.literals import HealthState
from router.resilience.outlier import Admission, OutlierDetector
from router.settings import BackendSpec, ResilienceSettings, SecuritySettings
from router.trust.review import CatalogGuard
from router.values import BackendStatus, CallContext, CallOutcome, Capability, Catalog, json_bytes

log = logging.getLogger("mcp_router.backend")
_MAX_BACKOFF_S = 30.0
_RELIST_S = 1.0  # the shortest time between two listings of a backend's catalog on its changes
# Health intervals vary by this fraction (Envoy's interval jitter): backends that connected together spread out.
_JITTER = 0.1
# When Ray kills an actor, the worker kills its child processes (a stdio server, a launched one) before
# the process ends, and a call in flight can see the closed connection in between. Reporting that
# failure only after this pause lets a dying actor die first, so its caller sees the actor's death and
# retries on the restarted actor instead of taking a healthy backend's failure for real.
_DYING_GRACE_S = 0.25
# A call that had at least this share of the backend's own timeout and ran out of it timed out on the backend's
# account, not on its caller's deadline.
_OWN_TIMEOUT_SHARE = 0.9
_NAMED = {"tools/call": "tool", "prompts/get": "prompt"}  # relayed requests naming a capability: its kind


class BackendSupervisor:
    def __init__(self, spec: BackendSpec, resilience: ResilienceSettings, security: SecuritySettings | None = None,
                 state_dir: str | None = None) -> None:
        self.spec = spec
        # What the backend lists is checked, cleaned and pinned before it is served (router.trust.review).
        security = security or SecuritySettings()
        self.served = ServedCatalog(spec, CatalogGuard(spec.name, security, state_dir=state_dir,
                                                       trust_changes=spec.trust_changes))
        self._max_answer = security.max_answer_bytes
        self.backend = build_backend(spec)
        self.backend.on_change = self._mark_stale
        if hasattr(self.backend, "max_answer_bytes"):  # a flow's body stops being read past it
            self.backend.max_answer_bytes = self._max_answer
        self.detector = OutlierDetector(resilience.ejection)
        self._slots = FairSlots(spec.max_concurrency)
        self._starting_waiters = 0
        self._catalog_at = 0.0
        self._catalog_refreshed_at: float | None = None
        self._stale = False
        self._health: HealthState = "starting"
        self._shown: tuple[HealthState, float] = ("starting", time.time())  # the health last reported, since
        self._last_error: str | None = None
        self._last_error_at: float | None = None
        self._last_check_at: float | None = None
        self._checked_at = time.monotonic()  # the last check (or the start): idle backends wait longer
        self._called_at = float("-inf")  # the last call or relayed request
        self._inflight = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._first_attempt = asyncio.Event()
        self._closing = False
        self._node_id = _current_node_id()

    # -- lifecycle ---------------------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._supervise(), name=f"supervise-{self.spec.name}")

    async def start(self, wait_s: float = 0.0) -> BackendStatus:
        """Start supervising; wait up to `wait_s` for the first connection attempt to finish."""
        self._ensure_started()
        if wait_s > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first_attempt.wait(), wait_s)
        return self.status()

    async def shutdown(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.backend.shutdown()

    async def _supervise(self) -> None:
        backoff = 0.5
        while not self._closing:
            if not getattr(self.backend, "connected", True) or self._health in ("starting", "down"):
                try:
                    await self.backend.connect()
                    await self._refresh_catalog()
                    self._set_health_ok()
                    backoff = 0.5
                except Exception as exc:  # whatever ends a connection attempt, the loop tries again
                    self._fail(_describe(exc, self.spec.name, "connect"))
                    self._first_attempt.set()
                    await self._sleep(backoff * (0.8 + 0.4 * random.random()))
                    backoff = min(backoff * 2, _MAX_BACKOFF_S)
                    continue
                self._first_attempt.set()
            await self._sleep(self.spec.health_interval_s * random.uniform(1 - _JITTER, 1 + _JITTER))
            if self._closing:
                break
            if not self._check_due():
                continue
            await self._check()

    def _check_due(self) -> bool:
        """Whether the health check is due: at every interval once a call reached the backend since the last
        check, or once something is pending (a changed catalog, an approval); idle, at the idle interval."""
        idle = self.spec.health_idle_interval_s or 6 * self.spec.health_interval_s
        return (self._called_at > self._checked_at or self._stale or time.monotonic() - self._checked_at >= idle
                or self.served.approvals_pending())

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def _check(self) -> None:
        try:
            if self._stale:  # a server announcing changes on end is listed at most once a _RELIST_S
                await asyncio.sleep(max(0.0, _RELIST_S - (time.monotonic() - self._catalog_at)))
            if self._stale or time.monotonic() - self._catalog_at > self.spec.catalog_ttl_s:
                await self._refresh_catalog()
            elif self.served.approvals_pending() and self.served.listed is not None:
                await self.served.serve(self.served.listed)  # an approval: what was held may be served now
            await self.backend.health(self.spec.health_timeout_s)
            self._set_health_ok()
        except Exception as exc:  # the health loop outlives any failure of one check
            self._fail(_describe(exc, self.spec.name, "health check"))
            # A ping unanswered while calls run: the server is busy (one of them may hold its loop); down to new
            # calls until a check passes, but the session is kept for the calls it carries, which closing it
            # failed as calls that may have acted. Anything else (a lost connection) is closed and reopened.
            if not (isinstance(exc, BackendTimeout) and self._inflight):
                await self.backend.close()
        finally:
            self._last_check_at, self._checked_at = time.time(), time.monotonic()

    async def _refresh_catalog(self) -> Catalog:
        self._stale = False
        listed = await self.backend.list_capabilities()
        self._catalog_at, self._catalog_refreshed_at = time.monotonic(), time.time()
        return await self.served.serve(listed)

    def _mark_stale(self) -> None:
        self._stale = True
        self._wake.set()

    def _set_health_ok(self) -> None:
        self._health = "healthy"
        self._last_check_at, self._checked_at = time.time(), time.monotonic()

    def _fail(self, message: str) -> None:
        self._health = "down"
        self._last_error, self._last_error_at = message, time.time()
        log.warning("backend %s is down: %s", self.spec.name, message)

    # -- API -----------------------------------------------------------------------------------

    async def call(self, capability: Capability, arguments: dict[str, Any], timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        if self.served.held(capability.kind, capability.name):
            return CallOutcome.failed(capability, ErrorKind.BACKEND_NOT_CALLABLE,
                                      self.served.held_message(capability.name), 0.0, sent=False)
        entered = time.perf_counter()
        admission, refusal = await self._admit(capability, timeout_s, force, context.principal)
        if refusal is not None:
            return refusal
        self._called_at = time.monotonic()
        started = time.perf_counter()
        timeout_s -= started - entered  # a wait for a restarting backend's first connection is the call's time too
        self._inflight += 1
        given = timeout_s  # what the backend had, once a call slot was free
        try:
            async with self._slots.held(context.principal, timeout_s):  # the wait for a slot is the call's time too
                given = timeout_s - (time.perf_counter() - started)
                if capability.kind == "tool":
                    arguments = self.served.with_fixed(capability.name, arguments)
                outcome = await self.backend.call(capability, arguments, timeout_s=given, context=context)
        except asyncio.CancelledError:
            self.detector.abandon(admission.probe)
            raise
        except Exception as exc:
            outcome = self._failure(capability, exc, given, started)
        finally:
            self._inflight -= 1
        self._judge(capability, outcome, admission, context.principal)
        if outcome.ok and outcome.answer_size() > self._max_answer:  # judged as answered: it did answer
            outcome = CallOutcome.failed(capability, ErrorKind.ANSWER_TOO_LARGE, self._too_large(),
                                         outcome.latency_ms)
        if outcome.error_kind is ErrorKind.BACKEND_UNAVAILABLE and self._health == "down":
            # The connection was lost (a busy backend is not down): paused after the outcome is recorded, so a
            # cancellation here leaves nothing held.
            await asyncio.sleep(_DYING_GRACE_S)
        return outcome

    async def relay(self, method: str, params: dict[str, Any], timeout_s: float, log_level: str | None = None,
                    principal: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """A gateway client's MCP request, relayed over the held session (actors.backends.relay): its events,
        the last the server's answer or the router's error (`data.kind` says which). Admitted, bounded and
        judged like a call: a backend that fails gateway requests is ejected for everyone alike."""
        what = Capability(backend=self.spec.name, name=method, kind="tool")
        if not hasattr(self.backend, "relay"):
            yield router_error_event(ErrorKind.BACKEND_NOT_CALLABLE, f"backend {self.spec.name!r} is not an MCP server")
            return
        named = params.get("name") if method in _NAMED else None
        held = named if isinstance(named, str) and self.served.held(_NAMED[method], named) else \
            params.get("uri") if method == "resources/read" and self.served.held_uri(params.get("uri")) else None
        if held is not None:
            yield router_error_event(ErrorKind.BACKEND_NOT_CALLABLE, self.served.held_message(str(held)))
            return
        if method == "tools/call" and isinstance(named, str) and isinstance(params.get("arguments") or {}, dict):
            params = {**params, "arguments": self.served.with_fixed(named, params.get("arguments") or {})}
        entered = time.perf_counter()
        admission, refusal = await self._admit(what, timeout_s, False, principal)
        if refusal is not None:
            yield router_error_event(ErrorKind.BACKEND_UNAVAILABLE, refusal.error or "")
            return
        self._called_at = time.monotonic()
        started = time.perf_counter()
        timeout_s -= started - entered
        self._inflight += 1
        outcome = CallOutcome(backend=self.spec.name, capability=method, ok=True, latency_ms=0.0)
        given = timeout_s
        failed: dict[str, Any] | None = None
        try:
            async with self._slots.held(principal, timeout_s):
                given = timeout_s - (time.perf_counter() - started)
                relayed = 0  # everything the server sends in a request counts, its log messages and errors too
                async with contextlib.aclosing(self.backend.relay(method, params, timeout_s=given,
                                                                  log_level=log_level)) as events:
                    async for event in events:
                        relayed += json_bytes(event)
                        if relayed > self._max_answer:  # the rest is not read: the request ends here
                            yield router_error_event(ErrorKind.ANSWER_TOO_LARGE, self._too_large())
                            break
                        yield event
        except (asyncio.CancelledError, GeneratorExit):
            self.detector.abandon(admission.probe)
            raise
        except Exception as exc:
            outcome = self._failure(what, exc, given, started)
            assert outcome.error_kind is not None
            failed = router_error_event(outcome.error_kind, outcome.error or "")
        finally:
            self._inflight -= 1
        self._judge(what, outcome, admission, principal)
        if failed is not None:  # yielded once judged: a client gone at this yield leaves no probe out
            yield failed

    async def watch(self) -> AsyncIterator[dict[str, Any]]:
        """The MCP server's notifications outside requests (lists changed, subscribed resources updated), for
        a gateway replica to pass to its clients; nothing from a backend of another kind."""
        hub = getattr(self.backend, "relays", None)
        if hub is None:
            return
        async for notification in hub.watch():
            yield notification

    def answer(self, relay_id: str, request_id: int, answer: dict[str, Any]) -> bool:
        """A gateway client's answer to the server's request in a relayed request (sampling, elicitation)."""
        hub = getattr(self.backend, "relays", None)
        return hub is not None and hub.answer(relay_id, request_id, answer)

    async def identity(self) -> dict[str, Any] | None:
        """What the MCP server said of itself in the handshake (None: not an MCP backend, or not connected)."""
        self._ensure_started()
        if self._health == "starting":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first_attempt.wait(), self.spec.connect_timeout_s)
        try:
            return self.backend.identity() if hasattr(self.backend, "identity") else None
        except RouterError:
            return None

    async def _admit(self, capability: Capability, timeout_s: float, force: bool,
                     caller: str | None) -> tuple[Admission, CallOutcome | None]:
        """Whether the backend's state lets `caller`'s call in (ejection, health); a refusal is a failed
        outcome."""
        self._ensure_started()
        if self._health == "starting":
            # A call that reaches a (re)starting actor waits for its first connection, within its timeout, and as
            # many wait as may wait for a call slot: each holds a place in the host its other backends need.
            if self._starting_waiters >= self._slots.max_waiting:
                return Admission(False, False), _refused(capability, f"backend {self.spec.name!r} is starting and "
                                                                     f"{self._starting_waiters} calls already wait "
                                                                     "for it; the call was not sent")
            self._starting_waiters += 1
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._first_attempt.wait(), timeout_s)
            finally:
                self._starting_waiters -= 1
        admission = self.detector.admit(force, caller)
        if not admission.allowed and self.detector.state != "ejected" and (own := self.detector.ejected_for(caller)):
            return admission, _refused(capability, f"backend {self.spec.name!r} is refused to {caller!r} for "
                                                   f"another {own:.1f} s: its own last "
                                                   f"{self.detector.settings.consecutive_failures} calls failed; "
                                                   "other callers are served")
        if not admission.allowed:
            return admission, _refused(capability, f"backend {self.spec.name!r} is ejected for another "
                                                   f"{self.detector.remaining_s():.1f} s after "
                                                   f"{self.detector.last_failures} failures")
        if self._health == "down" and not force:
            self.detector.abandon(admission.probe)
            return admission, _refused(capability, f"backend {self.spec.name!r} is down: {self._last_error}")
        return admission, None

    def _too_large(self) -> str:
        return f"backend {self.spec.name!r} answered more than security.max_answer_bytes ({self._max_answer})"

    def _failure(self, capability: Capability, exc: Exception, timeout_s: float, started: float) -> CallOutcome:
        """What an exception out of the backend says: a router error as its kind, anything else a fault in
        the backend's code (a failed call, never a stuck backend). `timeout_s`: what the backend was given,
        after any wait for a call slot (time other callers' calls took is not the backend's slowness)."""
        if not isinstance(exc, RouterError):
            log.exception("backend %s: unexpected error in a call to %s", self.spec.name, capability.name)
            return CallOutcome.failed(capability, ErrorKind.BACKEND_FAILED,
                                      f"backend {self.spec.name!r}: unexpected {type(exc).__name__}", _since(started))
        kind = exc.kind
        if kind is ErrorKind.BACKEND_TIMEOUT and timeout_s < _OWN_TIMEOUT_SHARE * self.spec.timeout_s:
            # The caller's deadline, well short of the backend's own timeout, ran out: the caller's choice,
            # which says nothing of the backend. (A deadline equal to the timeout, the defaults, leaves the
            # call a moment less than its timeout once routing took its share: still the backend's.)
            kind = ErrorKind.DEADLINE_EXCEEDED
        if kind is ErrorKind.BACKEND_UNAVAILABLE and not isinstance(exc, BackendBusy):
            self._fail(_call_fault(capability, kind))
            self._wake.set()  # reconnect now rather than at the next health check
        return CallOutcome.failed(capability, kind, exc.message, _since(started),
                                  sent=not isinstance(exc, NoSlot | BackendUnreachable))

    def _judge(self, capability: Capability, outcome: CallOutcome, admission: Admission, caller: str | None) -> None:
        """Only the backend's own faults count against it (and eject it), for every caller alike: an
        error the caller's request provoked is an answer, and the caller's own deadline says nothing.
        What the backend's state shows (`last_error`) is the router's own words, never a call's text:
        arguments and tool errors belong to the caller who sent them."""
        answered = outcome.backend_answered
        if answered is None:
            self.detector.abandon(admission.probe)
            return
        if self.detector.record(answered, admission.probe, admission.forced_in, caller):
            log.warning("backend %s ejected for %.1f s", self.spec.name, self.detector.remaining_s())
        if not answered:
            assert outcome.error_kind is not None
            self._last_error, self._last_error_at = _call_fault(capability, outcome.error_kind), time.time()

    async def catalog(self, known_version: str | None = None) -> Catalog | None:
        """The cached catalog, or None when the caller already has this version (or there is none)."""
        self._ensure_started()
        catalog = self.served.catalog
        return None if catalog is None or catalog.version == known_version else catalog

    async def refresh(self) -> Catalog | None:
        self._mark_stale()
        return self.served.catalog

    def status(self) -> BackendStatus:
        cat, review = self.served.catalog, self.served.review
        counts = Counter(c.kind for c in cat.capabilities) if cat else Counter()
        health: HealthState = self._health
        if health == "healthy" and self.detector.ejected:
            health = "ejected"
        elif health == "healthy" and self.detector.state == "half_open":
            health = "degraded"
        if health != self._shown[0]:
            self._shown = (health, time.time())
        return BackendStatus(
            name=self.spec.name, kind=self.spec.kind, transport=self.backend.transport, health=health,
            protocol=getattr(self.backend, "protocol_version", None), health_since=self._shown[1],
            catalog_refreshed_at=self._catalog_refreshed_at,
            description=cat.description if cat else self.spec.description,
            catalog_version=cat.version if cat else None, tool_count=counts["tool"],
            prompt_count=counts["prompt"], resource_count=counts["resource"], flow_count=counts["flow"],
            last_error=self._last_error, last_error_at=self._last_error_at, last_check_at=self._last_check_at,
            consecutive_failures=self.detector.consecutive_failures,
            ejected_until=(time.time() + self.detector.remaining_s()) if self.detector.ejected else None,
            ejected_by=self.detector.ejected_by,
            ejections=self.detector.ejections, inflight=self._inflight, node_id=self._node_id,
            catalog_error=review.error if review else None, sanitized=review.sanitized if review else (),
            held_tools=review.held if review else (), flagged_tools=review.flagged if review else (),
        )

    async def get_status(self) -> BackendStatus:
        self._ensure_started()
        return self.status()



def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _refused(capability: Capability, message: str) -> CallOutcome:
    """A call the backend's state refuses before sending it: another backend may still take it."""
    return CallOutcome.failed(capability, ErrorKind.BACKEND_UNAVAILABLE, message, sent=False)


def _call_fault(capability: Capability, kind: ErrorKind) -> str:
    """A call's failure as the backend's state shows it to everyone: how it failed, and neither the call's
    text nor its tool's name (a reader may not be allowed that tool)."""
    return f"a {capability.kind} call failed: {kind.value}"


def _describe(exc: Exception, backend: str, what: str) -> str:
    """A router error's own message; anything else is logged with its traceback and named by type."""
    if isinstance(exc, RouterError):
        return exc.message
    log.exception("backend %s: unexpected error during %s", backend, what)
    return f"unexpected {type(exc).__name__} during {what}: {exc}"[:500]


def _current_node_id() -> str | None:
    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
