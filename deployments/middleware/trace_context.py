"""An incoming W3C `traceparent` makes the router's spans part of the caller's trace."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry.propagate import extract
from starlette.types import ASGIApp, Receive, Scope, Send


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
        token = otel_context.attach(extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            otel_context.detach(token)
