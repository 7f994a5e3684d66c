"""An incoming W3C `traceparent` makes the router's spans part of the caller's trace.

Only the trace context (`traceparent`, `tracestate`) is taken, never the caller's `baggage`: what the router
sends on to backends would carry it, and a backend or collector that reads baggage (a tenant, a role) would
take the caller's word for it.
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.types import ASGIApp, Receive, Scope, Send

_W3C = TraceContextTextMapPropagator()


class TraceContext:
    """An incoming W3C `traceparent` makes the router's spans part of the caller's trace."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope.get("headers") or []
        if scope["type"] != "http" or not any(k == b"traceparent" for k, _ in headers):
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
        token = otel_context.attach(_W3C.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            otel_context.detach(token)
