"""The HTTP surface of the ingress: FastAPI routes, input validation and error mapping.

Every error leaves as ``{"error": {"type": ..., "message": ..., "details": ...}}`` with the status
its `RouterError` carries; malformed JSON, missing fields, wrong types and oversized bodies are
4xx responses naming the problem, never a bare 500.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from opentelemetry import context as otel_context
from opentelemetry.propagate import extract
from starlette.types import ASGIApp, Receive, Scope, Send

from deployments.guard import CURRENT
from router.errors import ErrorKind, InvalidRequest, PayloadTooLarge, RouterError
from router.models import (
    BackendDetail,
    BackendInfo,
    ChatRequest,
    ChatResponse,
    FeedbackRequest,
    FeedbackResponse,
    HealthResponse,
    QueryRequest,
    QueryResponse,
    RouteRequest,
    RouteResponse,
    ToolSelectRequest,
    ToolSelectResponse,
)

if TYPE_CHECKING:
    from deployments.ingress import RouterIngress

log = logging.getLogger("mcp_router.http")


def describe_validation(errors: list[Any]) -> str:
    """One readable sentence from pydantic/FastAPI validation errors: field path and problem."""
    parts = []
    for err in errors[:5]:
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        if err.get("type") == "json_invalid":
            parts.append(f"request body is not valid JSON ({err.get('ctx', {}).get('error', 'parse error')})")
            continue
        where = ".".join(loc) or "body"
        msg = err.get("msg", "invalid")
        if err.get("type") == "missing":
            msg = "field required"
        elif err.get("type") == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


class BodyLimit:
    """Rejects request bodies over `limit` bytes with 413 before any parsing."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(self.limit, send)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise PayloadTooLarge(f"request body exceeds {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


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


async def _too_large(limit: int, send: Send) -> None:
    response = JSONResponse(PayloadTooLarge(f"request body exceeds {limit} bytes").payload(), status_code=413)
    await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def _failed(error: RouterError) -> str | None:
    """The audit record names the error the request ended with; the request's id, for the answer."""
    scope = CURRENT.get()
    if scope is None:
        return None
    scope.fail(error)
    return scope.request_id


def build_http_app(ingress: RouterIngress,
                   lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None) -> FastAPI:
    app = FastAPI(title="mcp-router", version="0.1.0", lifespan=lifespan,
                  description="Routes each question to the MCP server, Flowise or Langflow flow that should "
                              "answer it, and explains the decision.")

    @app.exception_handler(RouterError)
    async def _router_error(_: Request, exc: RouterError) -> JSONResponse:
        return JSONResponse(exc.payload(_failed(exc)), status_code=exc.status_code, headers=exc.headers())

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = InvalidRequest(describe_validation(list(exc.errors())))
        return JSONResponse(err.payload(_failed(err)), status_code=400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # The one top-level boundary: anything unforeseen is logged with a request id, and the caller
        # gets that id and a generic message; exception text can hold internals and never goes out.
        scope = CURRENT.get()
        rid = scope.request_id if scope is not None else uuid.uuid4().hex
        log.error("unhandled error in %s %s (request id %s)", request.method, request.url.path, rid,
                  exc_info=(type(exc), exc, exc.__traceback__))
        body = {"error": {"type": ErrorKind.INTERNAL.value, "request_id": rid,
                          "message": f"internal error; the router's log has the details under request id {rid}"}}
        return JSONResponse(body, status_code=500)

    @app.post("/v1/query", response_model=QueryResponse, response_model_exclude_none=True,
              summary="Route a question to the best backend and return its answer with routing metadata")
    async def query(body: QueryRequest) -> QueryResponse:
        return await ingress.query(body)

    @app.post("/v1/route", response_model=RouteResponse,
              summary="Dry run: the ranked candidates with every score component, calling nothing")
    async def route(body: RouteRequest) -> RouteResponse:
        return await ingress.route(body)

    @app.post("/v1/tools/select", response_model=ToolSelectResponse,
              summary="Smart tool selection: the relevant servers' tools in OpenAI function format")
    async def select_tools(body: ToolSelectRequest) -> ToolSelectResponse:
        return await ingress.select_tools(body)

    @app.post("/v1/chat", response_model=ChatResponse,
              summary="An LLM tool-calling conversation over the relevant servers' tools (needs llm settings)")
    async def chat(body: ChatRequest) -> ChatResponse:
        return await ingress.chat(body)

    @app.get("/v1/backends", response_model=list[BackendInfo], summary="Every configured backend and its state")
    async def backends() -> list[BackendInfo]:
        return await ingress.backends()

    @app.get("/v1/backends/{name}", response_model=BackendDetail,
             summary="One backend: its state and its labelled examples")
    async def backend(name: str) -> BackendDetail:
        return await ingress.backend(name)

    @app.delete("/v1/backends/{name}/examples", summary="Remove every labelled example of a backend")
    async def delete_examples(name: str) -> dict[str, Any]:
        return await ingress.delete_examples(name)

    @app.post("/v1/feedback", response_model=FeedbackResponse,
              summary="Say whether a query was routed right (by its routing.request_id); the router learns from it")
    async def feedback(body: FeedbackRequest) -> FeedbackResponse:
        return await ingress.feedback(body)

    @app.get("/v1/stats", summary="Recent performance per backend and intent")
    async def stats() -> dict[str, Any]:
        return await ingress.stats()

    @app.get("/health", response_model=HealthResponse,
             summary="ok, degraded (some backends down; still 200) or down (503)")
    async def health() -> JSONResponse:
        report = await ingress.health()
        return JSONResponse(report.model_dump(), status_code=503 if report.status == "down" else 200)

    ingress.extend_http(app)
    return app
