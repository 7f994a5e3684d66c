"""The MCP adapter: the router as an MCP server at /mcp (streamable HTTP, stateless, so any replica answers).

    server = build_mcp_server(service, settings)
    app = mcp_app(server, settings)          # deployments.asgi mounts it at /mcp and runs its session manager

Tools: `universal_query` (one tool for everything), `list_backends`, `explain_route` (the /v1/route dry
run), `select_tools` (smart tool selection) and `feedback` (whether an answer was routed right, by its
request id; the router learns from it). Each hands the service the request's `Caller` (set by the
guard). Routing errors come back as tool errors with the router's message; malformed protocol messages
are answered by the SDK with JSON-RPC errors.

    async with mcp.Client("http://127.0.0.1:8000/mcp/") as client:
        result = await client.call_tool("universal_query", {"question": "What time is it in Tokyo?"})
"""

# No `from __future__ import annotations`: the SDK reads the tools' signatures at run time, and
# their enums (intents, backend names) are built from the configuration in local scope.
import logging
import uuid
from typing import Annotated, Any, Literal, TypeVar

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from deployments.caller import CURRENT, Caller
from deployments.middleware.hosts import host_check
from deployments.middleware.reply import reply
from deployments.middleware.request_id import RequestIdCheck
from deployments.service import RouterService
from router.errors import InvalidRequest, RouterError, internal_error
from router.literals import Mode
from router.models import (
    FeedbackRequest,
    Parameters,
    QueryRequest,
    QueryResponse,
    RouteRequest,
    ToolSelectRequest,
    describe_validation,
)
from router.settings import RouterSettings

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger("mcp_router.mcp")


def routing_info(response: QueryResponse) -> str:
    """The human-readable "Routing Info" block appended to an answer."""
    meta = response.routing
    if meta is None:
        return ""
    lines = ["", "---", "Routing Info", f"- backend: {response.backend}",
             f"- {'flow' if response.kind == 'flow' else 'tool'}: {response.capability} ({response.kind})"]
    if meta.chosen is not None:
        s = meta.chosen.scores
        lines.append(f"- selection: {meta.method} ({meta.decision}), score {s.composite:.3f} (match {s.match:.3f}, "
                     f"confidence {s.confidence:.2f}, tool confidence {s.tool_confidence:.2f}, "
                     f"health {s.health:.2f}, perf {s.perf:.2f}); intent {meta.intent} "
                     f"({meta.intent_source})")
    elif meta.cached:
        lines.append("- selection: cached answer (every candidate backend was unavailable)")
    lines += [f"- execution: {meta.execution_ms:.1f} ms (decision {meta.decision_ms:.1f} ms, "
              f"total {meta.total_ms:.1f} ms)", f"- mode: {meta.mode}", f"- session: {meta.session_id or '-'}",
              f"- fallbacks used: {meta.fallbacks_used}"]
    if meta.request_id:
        lines.append(f"- request id: {meta.request_id} (for the feedback tool)")
    if meta.agreement is not None:
        lines.append(f"- agreement: {meta.agreement:.2f}" + (f"; disagreed: {', '.join(meta.disagreed)}"
                                                            if meta.disagreed else ""))
    return "\n".join(lines)


def build_mcp_server(service: RouterService, settings: RouterSettings) -> MCPServer:
    """The router's MCP server: its tools over the service."""
    intents = tuple(settings.intents.intents)
    IntentName = Literal[intents]  # type: ignore[valid-type]
    # Backend names are not listed in the tools' schemas: a caller sees only those its policy allows
    # (`list_backends`), and an unknown name is answered like a denied one.
    BackendName = Annotated[str, Field(max_length=64, description="A backend (see list_backends), or auto.")]
    server = MCPServer(
        "mcp-router",
        instructions="One tool for everything: universal_query routes a question to the MCP server, Flowise "
                     "or Langflow flow that should answer it, and says why.",
    )

    async def universal_query(
        question: Annotated[str, Field(description="The question or instruction to route.")],
        intent: Annotated[IntentName | None, Field(description="Override the classified intent.")] = None,
        backend: BackendName = "auto",
        session_id: Annotated[str | None, Field(description="Keeps a conversation on one backend.")] = None,
        parameters: Parameters | None = None,
        include_routing_metadata: bool = True,
        mode: Annotated[Mode | None, Field(description="How backends are tried; default resilience.default_mode.")]
        = None,
    ) -> types.CallToolResult:
        """Answer any question by routing it to the best backend (MCP tools, prompts, resources, flows)."""
        request = _parse(QueryRequest, question=question, intent=intent, backend=backend, session_id=session_id,
                         parameters=parameters, mode=mode, include_routing_metadata=True)
        response = await _run(service.query(request, _caller()))
        text = response.answer + (routing_info(response) if include_routing_metadata else "")
        if not include_routing_metadata:
            response = response.model_copy(update={"routing": None})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=response.model_dump(mode="json", exclude_none=True))

    async def list_backends() -> list[dict[str, Any]]:
        """Every configured backend with its kind, transport, health, capability counts and last error."""
        return [b.model_dump(mode="json") for b in await _run(service.backends(_caller()))]

    async def explain_route(
        question: str, intent: IntentName | None = None, backend: BackendName = "auto",
    ) -> dict[str, Any]:
        """Dry run: what universal_query would do with the question (the calls it would make, or the refusal it
        would answer) and the ranked candidates with every score component; calls nothing."""
        req = _parse(RouteRequest, question=question, intent=intent, backend=None if backend == "auto" else backend)
        return (await _run(service.route(req, _caller()))).model_dump(mode="json")

    async def select_tools(
        messages: Annotated[list[dict[str, Any]], Field(description="The conversation, OpenAI style.")],
        session_id: str | None = None, max_servers: int | None = None,
    ) -> dict[str, Any]:
        """Smart tool selection: the tools of the servers relevant to a conversation, in OpenAI format."""
        req = _parse(ToolSelectRequest, messages=messages, session_id=session_id, max_servers=max_servers)
        return (await _run(service.select_tools(req, _caller()))).model_dump(mode="json")

    async def feedback(
        request_id: Annotated[str, Field(description="The request id in an answer's routing info, or in the "
                                                     "error of a question the router declined or asked about.")],
        correct: Annotated[bool, Field(description="Whether the router chose the right backend and tool.")],
        backend: Annotated[str | None, Field(description="If not: the backend that should have answered.")] = None,
        tool: Annotated[str | None, Field(description="If not: the tool that should have answered.")] = None,
    ) -> dict[str, Any]:
        """Tell the router whether it routed a question right; similar questions are routed accordingly."""
        req = _parse(FeedbackRequest, request_id=request_id, correct=correct, backend=backend, tool=tool)
        return (await _run(service.feedback(req, _caller()))).model_dump(mode="json")

    for fn in (universal_query, list_backends, explain_route, select_tools, feedback):
        server.add_tool(fn)

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        # The router's face has no prompts or resource templates whose arguments could be completed.
        return types.Completion(values=[])

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        # Accepted as the protocol asks; the router's own face sends no log messages (its logs are its own,
        # and a backend's reach a client through the gateway, /mcp/backends/).
        return types.EmptyResult()

    # No public accessor in the SDK 2.3 for a handler MCPServer lacks (its own decorators use this one).
    server._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    return server


def mcp_app(server: MCPServer, settings: RouterSettings) -> ASGIApp:
    """The server as a stateless streamable-HTTP app at its mount's root, behind the JSON-RPC id check."""
    app = server.streamable_http_app(streamable_http_path="/", stateless_http=True, json_response=True,
                                     host=settings.server.host,
                                     transport_security=host_check(settings.server.allowed_hosts))
    return _NoStandingStream(RequestIdCheck(app))


class _NoStandingStream:
    """A GET is a session's standing stream, for messages outside its requests. The stateless face has no
    session and sends nothing outside a request, so the SDK's stream stayed open, idle, holding one of the
    replica's standing-stream places for as long as the client liked: answered 405, as the transport allows."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await reply(send, {"jsonrpc": "2.0", "id": None, "error": {
                "code": types.INVALID_REQUEST, "message": "Method Not Allowed: this endpoint keeps no session, "
                "and so no stream outside a request"}}, 405, {"Allow": "POST"})
            return
        await self.app(scope, receive, send)


def _caller() -> Caller:
    caller = CURRENT.get()
    if caller is None:
        raise RuntimeError("the MCP app runs behind deployments.middleware.Guard")
    return caller


async def _run(work: Any) -> Any:
    try:
        return await work
    except RouterError as exc:
        raise _refused(exc) from None
    except Exception as exc:
        # The tool call's top-level boundary, as the HTTP adapter's: logged under the request id, which the
        # caller gets with a generic message; the audit records a failure, not the SDK's bare 200.
        caller = CURRENT.get()
        rid = caller.request_id if caller is not None else uuid.uuid4().hex
        log.error("unhandled error in an MCP tool call (request id %s)", rid, exc_info=exc)
        raise _refused(internal_error(rid)) from None


def _refused(error: RouterError) -> ToolError:
    """A routing error as an MCP tool error; the audit record still says how the request ended (an MCP
    tool error is an HTTP 200)."""
    caller = CURRENT.get()
    if caller is not None:
        caller.fail(error)
    # A question the router declined or asked about can still be given feedback on.
    feedback = f" (request id: {error.details['request_id']}, for the feedback tool)" \
        if "request_id" in error.details else ""
    return ToolError(f"{error.code}: {error.message}{feedback}")


def _parse(model: type[M], **fields: Any) -> M:
    try:
        return model(**fields)
    except ValidationError as exc:
        raise _refused(InvalidRequest(describe_validation(list(exc.errors())))) from None
