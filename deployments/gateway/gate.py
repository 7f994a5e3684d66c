"""What every gateway request goes through: who asks and what its policy lets it reach, the deadline, the
charge, the audit note and the metrics, then the backend's actor, with a read-only tool's identical copy
on another backend when the first cannot answer.

A gateway client names the backend it talks to, so its policy needs `backend_override`; within it, the
policy's allow and deny lists decide what is listed and callable, exactly as in routing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
import ray
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from actors.backends.relay import SUBSCRIBER
from deployments.caller import CURRENT, Caller
from deployments.gateway.forward import FAILOVER_KINDS, error_kind, forward, log_level, router_error
from deployments.service import RouterService
from router.bounds import bounded_arguments
from router.errors import (
    ErrorKind,
    InvalidRequest,
    LimitExceeded,
    RouterError,
    UnknownBackend,
    UnknownCapability,
    error_of_kind,
)
from router.values import Capability, Catalog

log = logging.getLogger("mcp_router.gateway")

_IDENTITY_TTL_S = 30.0
_NOTIFICATION: TypeAdapter[Any] = TypeAdapter(types.ServerNotification)
_MAX_SESSIONS = 10_000  # sessions (and log levels) remembered per backend; past it the longest unused go
# A tenth of what a backend's session holds subscribed for every caller (actors.backends.relay._MAX_SUBSCRIBED).
_MAX_SUBSCRIBED_PER_PRINCIPAL = 1_000
_RELEASE_TIMEOUT_S = 10.0
_LISTINGS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


class Gate:
    def __init__(self, service: RouterService) -> None:
        self.service = service
        self._identities: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self.levels: dict[str, str] = {}  # a 2025 session's `logging/setLevel`, by session id
        # Per backend, its 2025 sessions (by id, least recently used first) and the resources each subscribed
        # to: where the server's notifications outside requests go.
        self.sessions: dict[str, dict[str, tuple[Any, set[str]]]] = {}
        self._principals: dict[str, str] = {}  # each of those sessions' principal
        # Whether the SDK still serves a backend's session (the gateway says; an ended one is told nothing).
        self.alive: Callable[[str, str], bool] = lambda backend, session: True
        self._releasing: set[asyncio.Task[None]] = set()

    # -- who asks, and what it may reach ---------------------------------------------------------

    @staticmethod
    def caller() -> Caller:
        caller = CURRENT.get()
        if caller is None:
            raise RuntimeError("the gateway runs behind deployments.middleware.Guard")
        return caller

    def catalogs(self, caller: Caller) -> Mapping[str, Catalog]:
        """The catalogs of the backends the caller may reach through the gateway (their allowed part)."""
        access = caller.access
        if not access.policy.backend_override:
            raise self.refuse(caller, access.refuse("naming a backend (the gateway)"))
        return self.service.router.view(access).catalogs

    def backend(self, caller: Caller, name: str) -> Catalog:
        catalog = self.catalogs(caller).get(name)
        if catalog is None:  # unknown, not allowed, or not listed yet: all alike to the caller
            raise self.refuse(caller, UnknownBackend(f"unknown backend {name!r}", backend=name))
        return catalog

    def capability(self, caller: Caller, catalog: Catalog, kind: str, name: str) -> Capability:
        cap = next((c for c in catalog.capabilities if c.kind == kind and c.name == name), None)
        if cap is None:  # denied, held by the catalog review, or unknown: all alike to the caller
            raise self.refuse(caller, UnknownCapability(f"unknown {kind} {name!r}", backend=catalog.backend,
                                                        tool=name), code=types.INVALID_PARAMS)
        return cap

    def _bounded(self, caller: Caller, method: str, params: Mapping[str, Any]) -> None:
        """A tool call's arguments within the bounds a routed call's are held to, and any other request's params
        too (a prompt's arguments, a completion's value, a URI). NaN and infinities, which the MCP SDK reads but
        would send on as null, are refused rather than changed; so is a lone surrogate, which the SDK's newer
        wire path reads but its stdio client cannot write, ending the backend's session for every caller."""
        what, value = ("arguments", params.get("arguments")) if method == "tools/call" else ("params", dict(params))
        try:
            bounded_arguments(value if isinstance(value, dict) else None, what)
        except ValueError as exc:
            raise self.refuse(caller, InvalidRequest(f"{what}: {exc}"), code=types.INVALID_PARAMS) from None

    def wholly_allowed(self, caller: Caller, backend: str) -> bool:
        """Whether the policy allows all of the backend (what no listed capability names: resource templates)."""
        return caller.access.allows_all(backend)

    @staticmethod
    def refuse(caller: Caller, error: RouterError, code: int = types.INTERNAL_ERROR) -> MCPError:
        """The router's refusal as the client hears it: -32603 with `data.kind` (-32602 where a param is what
        was wrong; -32600 would tell the client its message itself was malformed)."""
        caller.fail(error)
        data: dict[str, Any] = {"kind": error.code}
        if "retry_after_s" in error.details:
            data["retry_after_s"] = error.details["retry_after_s"]
        return MCPError(code=code, message=error.message, data=data)

    def remember_level(self, ctx: ServerRequestContext[Any, Any], level: str) -> None:
        session = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
        if session:
            self.levels.pop(session, None)
            self.levels[session] = level  # last set goes last: past the bound, the longest unchanged go
            while len(self.levels) > _MAX_SESSIONS:
                del self.levels[next(iter(self.levels))]

    def seen(self, ctx: ServerRequestContext[Any, Any], backend: str) -> set[str]:
        """Keep the request's session (a 2025 one, with a standalone stream) for the backend's notifications;
        the resources it subscribed to."""
        session = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
        if not session:
            return set()
        known = self.sessions.setdefault(backend, {})
        caller = CURRENT.get()
        self._principals.setdefault(session, caller.access.principal.name if caller is not None else "-")
        entry = known.pop(session, None) or (ctx.session, set())
        known[session] = entry  # last used goes last
        if len(known) > _MAX_SESSIONS:
            for sid in [s for s in known if not self.alive(backend, s)]:
                self.forget(backend, sid)
            while len(known) > _MAX_SESSIONS:  # all open: the longest unused is told nothing more
                self.forget(backend, next(iter(known)))
        return entry[1]

    def may_subscribe(self, caller: Caller, backend: str, subscribed: set[str], uri: str) -> None:
        """A principal holds at most `_MAX_SUBSCRIBED_PER_PRINCIPAL` of a backend's resources subscribed, over all
        its sessions: the backend's one session with the server holds a bounded number for every caller."""
        principal = caller.access.principal.name
        if uri in subscribed:
            return
        held = sum(len(uris) for sid, (_, uris) in self.sessions.get(backend, {}).items()
                   if self._principals.get(sid) == principal)
        if held >= _MAX_SUBSCRIBED_PER_PRINCIPAL:
            raise self.refuse(caller, LimitExceeded(
                f"{principal!r} holds {held} subscriptions to resources of backend {backend!r}, its limit"))

    def forget(self, backend: str, session: str) -> None:
        """A session that ended (or is pushed out): nothing more is sent to it, and the resources it subscribed
        to are released at the backend, whose one session with the server carries every client's."""
        self.levels.pop(session, None)
        self._principals.pop(session, None)
        entry = self.sessions.get(backend, {}).pop(session, None)
        if entry is not None and entry[1]:
            task = asyncio.get_running_loop().create_task(self._release(backend, session, sorted(entry[1])))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)

    async def _release(self, backend: str, session: str, uris: list[str]) -> None:
        actor = self.service.directory.actors.get(backend)
        for uri in uris if actor is not None else ():
            try:
                stream = actor.relay.options(num_returns="streaming").remote(
                    "resources/unsubscribe", {"uri": uri, SUBSCRIBER: session}, _RELEASE_TIMEOUT_S)
                async with asyncio.timeout(_RELEASE_TIMEOUT_S + 1.0):
                    async for ref in stream:
                        await ref
            except Exception as exc:  # the backend or its actor is gone: its next session holds nothing anyway
                log.info("gateway: releasing %s's subscription to %s on %s failed: %r", session, uri, backend, exc)

    async def broadcast(self, backend: str, notification: dict[str, Any]) -> None:
        """A backend's notification to its sessions: a list change to all, a resource update to those that
        subscribed to it. A session the SDK no longer serves, or that fails, is forgotten."""
        message = _NOTIFICATION.validate_python(notification)
        uri = (notification.get("params") or {}).get("uri")
        known = self.sessions.get(backend, {})
        for sid, (session, subscribed) in list(known.items()):
            if not self.alive(backend, sid):
                self.forget(backend, sid)
                continue
            if uri is not None and uri not in subscribed:
                continue
            try:
                await session.send_notification(message)
            except Exception as exc:  # the client went away (or its session broke): nothing to tell it
                log.debug("dropping gateway session %s of %s: %r", sid, backend, exc)
                self.forget(backend, sid)

    # -- the backend -----------------------------------------------------------------------------

    async def identity(self, backend: str) -> dict[str, Any] | None:
        """What the backend said of itself in its handshake (cached briefly: it changes only on reconnect)."""
        hit = self._identities.get(backend)
        if hit is not None and time.monotonic() - hit[0] < _IDENTITY_TTL_S:
            return hit[1]
        actor = self.service.directory.actors.get(backend)
        # The actor waits up to the backend's connect timeout for a first connection; a host that never
        # answers (its node lost) leaves the handshake the router's own.
        wait_s = getattr(self.service.settings.backend(backend), "connect_timeout_s", 10.0) + 1.0
        try:
            found = await asyncio.wait_for(actor.identity.remote(), wait_s) if actor is not None else None
        except (TimeoutError, ray.exceptions.RayError):
            return None
        self._identities[backend] = (time.monotonic(), found)
        return found

    async def relay(self, ctx: ServerRequestContext[Any, Any], caller: Caller, backend: str, method: str,
                    params: Mapping[str, Any], capability: Capability | None = None) -> dict[str, Any]:
        """The request on `backend` within the caller's deadline, charged to the caller (every request sent
        to a backend, listings and reads too, each costs the backend work) and noted for the audit; a
        read-only tool's copies on other backends answer when `backend` cannot."""
        self._bounded(caller, method, params)
        service = self.service
        access = caller.access
        timeout_s = access.deadline(None, service.settings.resilience.deadline_s)
        caller.note(mode="gateway", backend=backend, mcp_method=method,
                    **({"tool": capability.name} if capability is not None else {}))
        charge = service.charge(caller)
        targets = [backend, *self._copies(caller, backend, method, capability)]
        error: MCPError | None = None
        ends = time.monotonic() + timeout_s  # one deadline for the request, however many copies are tried
        for target in targets:
            actor = service.directory.actors.get(target)
            left = ends - time.monotonic()
            if actor is None or left <= 0:
                continue
            if charge is not None:  # every call sent counts against the caller's budget
                try:
                    await charge(1)
                except RouterError as exc:
                    if error is None:
                        raise self.refuse(caller, exc) from None
                    break
                left = ends - time.monotonic()  # the budget may have made it wait
                if left <= 0:
                    error = error or router_error(ErrorKind.DEADLINE_EXCEEDED, f"the request deadline of "
                                                                               f"{timeout_s:g} s passed")
                    break
            started = time.perf_counter()
            try:
                result = await forward(ctx, actor, method, {**params, **({"name": capability.name}
                                                                       if capability is not None else {})},
                                       left, log_level(ctx, self.levels),
                                       None if access.principal.anonymous else access.principal.name)
            except MCPError as exc:
                service.metrics.gateway_request(target, method, error_kind(exc) or "error", started)
                error = exc
                if error_kind(exc) not in FAILOVER_KINDS:
                    break
                continue
            service.metrics.gateway_request(target, method, "success", started)
            if target != backend:
                caller.note(served_by=target)
            return result
        error = error or router_error(ErrorKind.BACKEND_UNAVAILABLE, f"backend {backend!r} has no actor")
        kind = error_kind(error)
        if kind is not None:
            caller.fail(error_of_kind(ErrorKind(kind), error.error.message))
        raise error

    def _copies(self, caller: Caller, backend: str, method: str, capability: Capability | None) -> list[str]:
        """Other backends the caller may reach that can answer instead, healthiest first: for a read-only
        capability, those offering the same one; for a listing, those offering all of the backend's."""
        catalogs = self.catalogs(caller)
        if capability is not None:
            if not capability.read_only:
                return []
            copies = [c.backend for cat in catalogs.values() if cat.backend != backend
                      for c in cat.capabilities if c.same_as(capability) and c.read_only]
        elif method in _LISTINGS and backend in catalogs:
            mine = catalogs[backend].capabilities
            copies = [cat.backend for cat in catalogs.values() if cat.backend != backend and mine and
                      all(any(c.same_as(m) for c in cat.capabilities) for m in mine)]
        else:
            return []
        statuses = self.service.directory.statuses()
        return sorted(copies, key=lambda b: statuses[b].health != "healthy" if b in statuses else True)
