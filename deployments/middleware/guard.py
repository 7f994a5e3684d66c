"""The edge every HTTP and MCP request passes: header bounds, the hosts answered, authentication, the
replica's in-flight bound, the principal's rate limits, and the audit record.

A refusal is answered here, before any route or JSON-RPC runs (the MCP authorization spec expects a
resource server to answer 401 at the HTTP level). An admitted request runs with its `Caller` in
`deployments.caller.CURRENT`, which the adapters hand to the service and fill with the route taken and
how it ended, for the audit record.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Mapping

from opentelemetry import trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deployments.caller import CURRENT, Caller
from deployments.middleware.hosts import AnsweredHosts
from deployments.middleware.reply import reply
from router.errors import HeadersTooLarge, RouterError
from router.security.audit import CLIENT_CLOSED, AuditLog
from router.security.identity import Authenticator, Principal
from router.security.limits import InFlight, Limiter
from router.security.policy import PUBLIC_POLICY, Access
from router.settings import AuthSettings
from router.telemetry import TRACER

log = logging.getLogger("mcp_router.guard")

# Readable without a credential: liveness, the API's own description, and the console's files (the page
# asks for a key; everything it shows comes from the API under that key).
PUBLIC_PATHS = frozenset({"/health", "/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"})


def standing_stream(scope: Scope) -> bool:
    """An MCP client's standing stream: the GET a session opens to hear the server outside its requests,
    open as long as the session is, and idle most of it."""
    return scope.get("method") == "GET" and str(scope.get("path", "")).startswith("/mcp")


def public(path: str) -> bool:
    return path in PUBLIC_PATHS or path == "/ui" or path.startswith("/ui/")


_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def client_request_id(headers: Mapping[str, str]) -> str | None:
    """The caller's own `x-request-id` when it is a plain token: kept beside the router's, never instead."""
    given = headers.get("x-request-id", "")
    return given if _REQUEST_ID.match(given) else None


class Guard:
    def __init__(self, app: ASGIApp, settings: AuthSettings, *, max_header_bytes: int, max_in_flight: int,
                 audit: AuditLog, limiter: Limiter, hosts: AnsweredHosts | None = None) -> None:
        self.app = app
        self.hosts = hosts
        self.settings = settings
        self.auth = Authenticator(settings)
        self.limiter = limiter
        self.in_flight = InFlight(max_in_flight)
        # MCP sessions' standing streams stay open while idle: apart, they never fill the requests' slots.
        self.streams = InFlight(max_in_flight, "standing streams open")
        self.max_header_bytes = max_header_bytes
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The request's own span carries the audit record as an event (when tracing is on).
        with TRACER.start_as_current_span("router.http", kind=trace.SpanKind.SERVER) as span:
            span.set_attribute("url.path", str(scope.get("path", ""))[:256])
            try:
                await self._guarded(scope, receive, send, span)
            finally:
                # The route's template, not the path a caller chose: a span-to-metrics pipeline groups by it.
                route = scope.get("route")
                span.set_attribute("http.route", getattr(route, "path", None) or "unmatched")

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, span: trace.Span) -> None:
        started = time.perf_counter()
        raw = scope.get("headers") or []
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
        rid, client_rid = uuid.uuid4().hex, client_request_id(headers)
        path = scope.get("path", "")
        status = {"code": 500}
        principal: Principal | None = None
        request: Caller | None = None
        refusal: RouterError | None = None
        admitted = counted = False
        standing = standing_stream(scope)
        slots = self.streams if standing else self.in_flight
        try:
            if sum(len(k) + len(v) for k, v in raw) > self.max_header_bytes:
                raise HeadersTooLarge(f"request headers exceed {self.max_header_bytes} bytes")
            if self.hosts is not None and not public(path) and (refused := self.hosts.refusal(headers)):
                raise refused
            if public(path):
                principal = await self._optional_principal(headers)
            else:
                principal = await self.auth.authenticate(headers)
            access = Access.of(principal, self.settings)
            slots.enter()
            counted = True
            if not public(path):
                await self.limiter.admit(principal.name, access.policy.rate_limit, standing)
                admitted = True
            request = Caller(access, rid)
        except RouterError as err:
            status["code"] = err.status_code
            refusal = err
            await _refuse(err, rid, send)
        else:
            token = CURRENT.set(request)

            async def tracked(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status["code"] = message["status"]
                    status["started"] = 1
                await send(message)

            try:
                await self.app(scope, receive, tracked)
            except asyncio.CancelledError:
                if "started" not in status:  # the caller left before the answer: not a failure of ours
                    status["code"] = CLIENT_CLOSED
                raise
            finally:
                CURRENT.reset(token)
        finally:
            if counted:
                slots.exit()
            if admitted and principal is not None:
                self.limiter.release(principal.name, standing)
            if not public(path) or status["code"] >= 400:
                self.audit.record(principal=principal.name if principal else "-", method=scope.get("method", ""),
                                  path=path, status=status["code"], request_id=rid, client_request_id=client_rid,
                                  latency_ms=(time.perf_counter() - started) * 1000,
                                  route=request.route if request else None, span=span,
                                  error=request.error if request else refusal)

    async def _optional_principal(self, headers: dict[str, str]) -> Principal:
        """Public paths: a valid credential still identifies the caller (to filter what it sees)."""
        try:
            return await self.auth.authenticate(headers)
        except RouterError:
            # Without a credential on a secured router: nobody in particular, with a policy that grants nothing.
            return Principal("public", PUBLIC_POLICY, "public") if self.auth.enabled else self.auth.anonymous()


async def _refuse(err: RouterError, rid: str, send: Send) -> None:
    await reply(send, err.payload(rid), err.status_code, err.headers())
