"""The HTTP adapter: FastAPI routes over the `RouterService`, input validation and error mapping.

    app = build_http_app(service, lifespan=...)       # deployments.asgi mounts MCP and the middleware

Every route hands the service the request's `Caller` (set by the guard). Every error leaves as
``{"error": {"type": ..., "message": ..., "details": ..., "request_id": ...}}`` with the status its
`RouterError` carries; malformed JSON, missing fields, wrong types and oversized bodies are 4xx responses
naming the problem, never a bare 500.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from deployments.caller import CURRENT, Caller
from deployments.console import add_console
from deployments.service import RouterService
from router.errors import InvalidRequest, MethodNotAllowed, NotFound, RouterError, internal_error
from router.models import (
    BackendDetail,
    BackendInfo,
    ChatRequest,
    ChatResponse,
    FeedbackRequest,
    FeedbackResponse,
    HealthResponse,
    LoadtestReport,
    QueryRequest,
    QueryResponse,
    RouteRequest,
    RouteResponse,
    ToolSelectRequest,
    ToolSelectResponse,
    describe_validation,
)

log = logging.getLogger("mcp_router.http")


async def current_caller() -> Caller:
    """The request's caller, as the guard admitted it (the app always runs behind the guard). Async: FastAPI
    runs a plain function dependency in its thread pool, a thread hand-off on every request."""
    caller = CURRENT.get()
    if caller is None:
        raise RuntimeError("the HTTP app runs behind deployments.middleware.Guard")
    return caller


Who = Annotated[Caller, Depends(current_caller)]


def _failed(error: RouterError) -> str | None:
    """The audit record names the error the request ended with; the request's id, for the answer."""
    caller = CURRENT.get()
    if caller is None:
        return None
    caller.fail(error)
    return caller.request_id


def _answer_errors(app: FastAPI) -> None:
    """Every error as the API's error body: a router error with its status, invalid input as a 400 naming
    the field, the framework's own refusals (no route, wrong method, an unreadable body) with theirs, anything
    else a generic 500 with a request id."""

    @app.exception_handler(RouterError)
    async def _router_error(_: Request, exc: RouterError) -> JSONResponse:
        return JSONResponse(exc.payload(_failed(exc)), status_code=exc.status_code, headers=exc.headers())

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = InvalidRequest(describe_validation(list(exc.errors())))
        return JSONResponse(err.payload(_failed(err)), status_code=400)

    @app.exception_handler(HTTPException)
    async def _framework_refusal(request: Request, exc: HTTPException) -> JSONResponse:
        err = _refusal(request, exc)
        # The framework's status stands, unless the refusal is the router's own (the body limit's 413).
        status = err.status_code if err is exc.__cause__ else exc.status_code
        headers = {**(exc.headers or {}), **err.headers()}  # a 405's `Allow`
        return JSONResponse(err.payload(_failed(err)), status_code=status, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # The one top-level boundary: anything unforeseen is logged with a request id, and the caller
        # gets that id and a generic message; exception text can hold internals and never goes out.
        scope = CURRENT.get()
        rid = scope.request_id if scope is not None else uuid.uuid4().hex
        log.error("unhandled error in %s %s (request id %s)", request.method, request.url.path, rid,
                  exc_info=(type(exc), exc, exc.__traceback__))
        return JSONResponse(internal_error(rid).payload(rid), status_code=500)


def _refusal(request: Request, exc: HTTPException) -> RouterError:
    """Starlette's and FastAPI's own refusals (no such route, a wrong method, a body that cannot be read) as the
    router errors they are."""
    cause = exc.__cause__
    if isinstance(cause, RouterError):  # the body limit, raised while FastAPI read a streamed body
        return cause
    if isinstance(cause, UnicodeDecodeError):
        return InvalidRequest(f"request body is not UTF-8 JSON (invalid byte at position {cause.start})")
    where = f"{request.method} {request.url.path}"
    if exc.status_code == 404:
        return NotFound(f"{where}: no such endpoint (the API is described at /docs)")
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        return MethodNotAllowed(f"{where}: method not allowed here" + (f"; allowed: {allowed}" if allowed else ""))
    return InvalidRequest(f"{where}: {exc.detail}")


def build_http_app(service: RouterService,
                   lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None) -> FastAPI:
    app = FastAPI(title="mcp-router", version="0.1.0", lifespan=lifespan,
                  description="Routes each question to the MCP server, Flowise or Langflow flow that should "
                              "answer it, and explains the decision.")

    _answer_errors(app)

    @app.post("/v1/query", response_model=QueryResponse, response_model_exclude_none=True,
              summary="Route a question to the best backend and return its answer with routing metadata")
    async def query(body: QueryRequest, caller: Who) -> QueryResponse:
        return await service.query(body, caller)

    @app.post("/v1/route", response_model=RouteResponse,
              summary="Dry run: the ranked candidates with every score component, calling nothing")
    async def route(body: RouteRequest, caller: Who) -> RouteResponse:
        return await service.route(body, caller)

    @app.post("/v1/tools/select", response_model=ToolSelectResponse,
              summary="Smart tool selection: the relevant servers' tools in OpenAI function format")
    async def select_tools(body: ToolSelectRequest, caller: Who) -> ToolSelectResponse:
        return await service.select_tools(body, caller)

    @app.post("/v1/chat", response_model=ChatResponse,
              summary="An LLM tool-calling conversation over the relevant servers' tools (needs llm settings)")
    async def chat(body: ChatRequest, caller: Who) -> ChatResponse:
        return await service.chat(body, caller)

    @app.get("/v1/backends", response_model=list[BackendInfo], summary="Every configured backend and its state")
    async def backends(caller: Who) -> list[BackendInfo]:
        return await service.backends(caller)

    @app.get("/v1/backends/{name}", response_model=BackendDetail,
             summary="One backend: its state and its labelled examples")
    async def backend(name: str, caller: Who) -> BackendDetail:
        return await service.backend(name, caller)

    @app.delete("/v1/backends/{name}/examples", summary="Remove every labelled example of a backend")
    async def delete_examples(name: str, caller: Who) -> dict[str, Any]:
        return await service.delete_examples(name, caller)

    @app.post("/v1/feedback", response_model=FeedbackResponse,
              summary="Say whether a query was routed right (by its routing.request_id); the router learns from it")
    async def feedback(body: FeedbackRequest, caller: Who) -> FeedbackResponse:
        return await service.feedback(body, caller)

    @app.get("/v1/whoami", summary="Who the caller is to the router: principal, policy, operator right")
    async def whoami(caller: Who) -> dict[str, Any]:
        return service.whoami(caller)

    @app.get("/v1/decisions", summary="The newest routing decisions, with how each went (operators)")
    async def decisions(caller: Who, limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[dict[str, Any]]:
        return await service.decisions(limit, caller)

    @app.get("/v1/loadtest", response_model=LoadtestReport, summary="The last `mcp-router loadtest` report (operators)")
    async def loadtest(caller: Who) -> dict[str, Any]:
        report = await service.loadtest(caller)
        if report is None:
            raise NotFound("no load test report yet: run `mcp-router loadtest` against this router")
        return report

    @app.post("/v1/loadtest", response_model=LoadtestReport, summary="Keep a load test report (operators)")
    async def keep_loadtest(body: LoadtestReport, caller: Who) -> dict[str, Any]:
        return await service.loadtest(caller, body.model_dump()) or {}

    @app.get("/v1/stats", summary="Recent performance per backend and intent")
    async def stats(caller: Who) -> dict[str, Any]:
        return await service.stats(caller)

    @app.get("/health", response_model=HealthResponse,
             summary="ok, degraded (some backends down; still 200) or down (503)")
    async def health(caller: Who) -> JSONResponse:
        report = await service.health(caller)
        return JSONResponse(report.model_dump(), status_code=503 if report.status == "down" else 200)

    add_console(app)
    return app
