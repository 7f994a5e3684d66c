"""The conformance suite's "everything server" on the MCP SDK's low-level `Server`: every tool, resource and
prompt the server scenarios of @modelcontextprotocol/conformance 0.1.16 call (after the suite's own
TypeScript example server), plus `test_slow` and `cancelled_count` for the gateway's cancellation test.

    python tests/conformance/everything_server.py --port 3100       # http://127.0.0.1:3100/mcp

Stateful streamable HTTP with SSE responses, an in-memory event store and a retry interval (SEP-1699
resumption): sampling and elicitation need the session's back-channel, log and progress notifications
during a call the request's SSE stream.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any, get_args

import anyio
import mcp_types as types
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
EMPTY = {"type": "object", "properties": {}}
SEVERITY = get_args(types.LoggingLevel)  # least to most severe
LEVELS: dict[str, str] = {}  # session -> the least severe log message its client asked for (logging/setLevel)


def session_of(ctx: ServerRequestContext) -> str:
    return (ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None) or ""


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}

SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}

SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option",
                           "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Select one option with titles",
                         "oneOf": [{"const": "value1", "title": "First Option"},
                                   {"const": "value2", "title": "Second Option"},
                                   {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                       "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1,
                        "maxItems": 3,
                        "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                            {"const": "value2", "title": "Second Choice"},
                                            {"const": "value3", "title": "Third Choice"}]}},
    },
    "required": [],
}


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or EMPTY)


TOOLS = [
    tool("test_simple_text", "Tests simple text content response"),
    tool("test_image_content", "Tests image content response"),
    tool("test_audio_content", "Tests audio content response"),
    tool("test_embedded_resource", "Tests embedded resource content response"),
    tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)"),
    tool("test_tool_with_logging", "Tests tool that emits log messages during execution"),
    tool("test_tool_with_progress", "Tests tool that reports progress notifications"),
    tool("test_error_handling", "Tests error response handling"),
    tool("test_reconnection", "Closes the SSE stream mid-call to test client reconnection (SEP-1699)"),
    tool("test_sampling", "Tests server-initiated sampling (LLM completion request)",
         {"type": "object", "required": ["prompt"],
          "properties": {"prompt": {"type": "string", "description": "The prompt to send to the LLM"}}}),
    tool("test_elicitation", "Tests server-initiated elicitation (user input request)",
         {"type": "object", "required": ["message"],
          "properties": {"message": {"type": "string", "description": "The message to show the user"}}}),
    tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
    tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330"),
    tool("test_slow", "Sleeps 10 s, or until cancelled"),
    tool("cancelled_count", "How many test_slow calls were cancelled"),
    tool("test_notify_changes", "Announces a changed tool list and an update of test://watched-resource"),
    tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
         JSON_SCHEMA_2020_12),
]


def text(t: str) -> types.TextContent:
    return types.TextContent(type="text", text=t)


class MemoryEventStore(EventStore):
    """Unbounded in-memory event store (fine for a test server)."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, types.JSONRPCMessage | None]] = []  # (event_id, stream_id, message)
        self._n = 0

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        self._n += 1
        event_id = f"{stream_id}::{self._n}"
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        idx = next((i for i, (eid, _, _) in enumerate(self._events) if eid == last_event_id), None)
        if idx is None:
            return None
        stream_id = self._events[idx][1]
        for eid, sid, msg in self._events[idx + 1:]:
            if sid == stream_id and msg is not None:
                await send_callback(EventMessage(msg, eid))
        return stream_id


async def request_elicitation(ctx: ServerRequestContext, message: str, schema: dict[str, Any]) -> types.ElicitResult:
    # elicit_form() takes requestedSchema as a plain dict (ElicitRequestedSchema = dict[str, Any]),
    # so oneOf/anyOf/enumNames/default survive untouched.
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    rid = ctx.request_id
    if name == "test_simple_text":
        return types.CallToolResult(content=[text("This is a simple text response for testing.")])
    if name == "test_image_content":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
    if name == "test_embedded_resource":
        embedded = types.TextResourceContents(uri="test://embedded-resource", mime_type="text/plain",
                                              text="This is an embedded resource content.")
        return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=embedded)])
    if name == "test_multiple_content_types":
        return types.CallToolResult(content=[
            text("Multiple content types test:"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
                uri="test://mixed-content-resource", mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}))),
        ])
    if name == "test_tool_with_logging":
        for i, msg in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if i:
                await anyio.sleep(0.05)
            # related_request_id routes the notification onto this POST's SSE stream.
            if SEVERITY.index(LEVELS.get(session_of(ctx), "debug")) <= SEVERITY.index("info"):
                await ctx.session.send_log_message("info", msg, logger="conformance", related_request_id=rid)
        return types.CallToolResult(content=[text("Tool with logging executed successfully")])
    if name == "test_tool_with_progress":
        for i, p in enumerate((0, 50, 100)):
            if i:
                await anyio.sleep(0.05)
            # No-op when the caller sent no _meta.progressToken; uses the caller's token otherwise.
            await ctx.session.report_progress(p, 100, f"Completed step {p} of 100")
        token = (ctx.meta or {}).get("progress_token")  # ctx.meta's keys are snake_case
        return types.CallToolResult(content=[text(str(token))])
    if name == "test_error_handling":
        return types.CallToolResult(is_error=True,
                                    content=[text("This tool intentionally returns an error for testing")])
    if name == "test_reconnection":
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await anyio.sleep(0.1)
        return types.CallToolResult(content=[text("Reconnection test completed successfully.")])
    if name == "test_sampling":
        result = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=text(str(args.get("prompt", ""))))],
            max_tokens=100, related_request_id=rid)
        content = result.content
        reply = content.text if isinstance(content, types.TextContent) else str(content)
        return types.CallToolResult(content=[text(f"LLM response: {reply}")])
    if name == "test_elicitation":
        r = await request_elicitation(ctx, str(args.get("message", "")), {
            "type": "object",
            "properties": {"username": {"type": "string", "description": "User's response"},
                           "email": {"type": "string", "description": "User's email address"}},
            "required": ["username", "email"]})
        return types.CallToolResult(content=[text(f"User response: action={r.action}, "
                                                  f"content={json.dumps(r.content or {})}")])
    if name == "test_elicitation_sep1034_defaults":
        r = await request_elicitation(ctx, "Please review and update the form fields with defaults", SEP1034_SCHEMA)
        return types.CallToolResult(content=[text(f"Elicitation completed: action={r.action}, "
                                                  f"content={json.dumps(r.content or {})}")])
    if name == "test_elicitation_sep1330_enums":
        r = await request_elicitation(ctx, "Please select options from the enum fields", SEP1330_SCHEMA)
        return types.CallToolResult(content=[text(f"Elicitation completed: action={r.action}, "
                                                  f"content={json.dumps(r.content or {})}")])
    if name == "test_slow":
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            CANCELLED.append(rid)
            raise
        return types.CallToolResult(content=[text("slow done")])
    if name == "test_notify_changes":  # outside the request: on the session's standalone stream
        await ctx.session.send_notification(types.ToolListChangedNotification())
        if "test://watched-resource" in SUBSCRIPTIONS:
            await ctx.session.send_notification(types.ResourceUpdatedNotification(
                params=types.ResourceUpdatedNotificationParams(uri="test://watched-resource")))
        return types.CallToolResult(content=[text("notified")])
    if name == "cancelled_count":
        return types.CallToolResult(content=[text(str(len(CANCELLED)))])
    if name == "json_schema_2020_12_tool":
        return types.CallToolResult(content=[text(f"JSON Schema 2020-12 tool called with: {json.dumps(args)}")])
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


STATIC = {
    "test://static-text": ("static-text", "A static text resource for testing", "text/plain"),
    "test://static-binary": ("static-binary", "A static binary resource (image) for testing", "image/png"),
    "test://watched-resource": ("watched-resource", "A resource that can be subscribed to", "text/plain"),
}


async def list_resources(ctx: ServerRequestContext, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[
        types.Resource(uri=uri, name=n, description=d, mime_type=m) for uri, (n, d, m) in STATIC.items()])


async def list_templates(ctx: ServerRequestContext, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
        uri_template="test://template/{id}/data", name="template",
        description="A resource template with parameter substitution", mime_type="application/json")])


async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "test://static-text":
        c: Any = types.TextResourceContents(uri=uri, mime_type="text/plain",
                                            text="This is the content of the static text resource.")
    elif uri == "test://static-binary":
        c = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == "test://watched-resource":
        c = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content")
    elif uri.startswith("test://template/") and uri.endswith("/data"):
        rid = uri[len("test://template/"):-len("/data")]
        c = types.TextResourceContents(uri=uri, mime_type="application/json",
                                       text=json.dumps({"id": rid, "templateTest": True,
                                                        "data": f"Data for ID: {rid}"}))
    else:
        raise MCPError(code=-32002,
                       message=f"Resource not found: {uri}")
    return types.ReadResourceResult(contents=[c])


SUBSCRIPTIONS: set[str] = set()
CANCELLED: list[types.RequestId | None] = []


async def subscribe(ctx: ServerRequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIPTIONS.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIPTIONS.discard(str(params.uri))
    return types.EmptyResult()


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    types.Prompt(name="test_prompt_with_arguments", description="A prompt with required arguments", arguments=[
        types.PromptArgument(name="arg1", description="First test argument", required=True),
        types.PromptArgument(name="arg2", description="Second test argument", required=True)]),
    types.Prompt(name="test_prompt_with_embedded_resource", description="A prompt that includes an embedded resource",
                 arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource to embed",
                                                 required=True)]),
    types.Prompt(name="test_prompt_with_image", description="A prompt that includes image content"),
]


async def list_prompts(ctx: ServerRequestContext, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: ServerRequestContext, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    a = params.arguments or {}
    user = lambda c: types.PromptMessage(role="user", content=c)  # noqa: E731
    if params.name == "test_simple_prompt":
        msgs = [user(text("This is a simple prompt for testing."))]
    elif params.name == "test_prompt_with_arguments":
        msgs = [user(text(f"Prompt with arguments: arg1='{a.get('arg1')}', arg2='{a.get('arg2')}'"))]
    elif params.name == "test_prompt_with_embedded_resource":
        msgs = [user(types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
                    uri=a.get("resourceUri", "test://example-resource"), mime_type="text/plain",
                    text="Embedded resource content for testing."))),
                user(text("Please process the embedded resource above."))]
    elif params.name == "test_prompt_with_image":
        msgs = [user(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
                user(text("Please analyze the image above."))]
    else:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
    return types.GetPromptResult(messages=msgs)


async def complete(ctx: ServerRequestContext, params: types.CompleteRequestParams) -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))


async def set_level(ctx: ServerRequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
    LEVELS[session_of(ctx)] = params.level  # honoured, as a server should: for this session from now on
    return types.EmptyResult()


def build_server() -> Server:
    server = Server(
        "python-everything-server", version="1.0.0",
        on_list_tools=list_tools, on_call_tool=call_tool,
        on_list_resources=list_resources, on_list_resource_templates=list_templates, on_read_resource=read_resource,
        on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_completion=complete,
        # A server with one audience may call its answers public (2026-07-28): a gateway in front of it may not.
        cache_hints={m: CacheHint(ttl_ms=3_600_000, scope="public") for m in ("tools/list", "resources/read")},
    )
    # logging/setLevel via add_request_handler avoids the constructor's MCPDeprecationWarning
    # (on_set_logging_level=...); get_capabilities() derives `logging` from the registered method.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    return server


def speaking_only(server: Server, version: str) -> None:
    """Make the server one of an older generation that speaks only `version`: it does not know
    `server/discover` (2026-07-28) and answers the handshake with `version`, whatever the client offers."""

    async def only(ctx: ServerRequestContext, call_next: CallNext) -> HandlerResult:
        if ctx.method == "server/discover":
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            result = {**result, "protocolVersion": version}
        return result

    server.middleware.insert(0, only)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=3100)
    ap.add_argument("--only-version", help="speak only this handshake protocol version (e.g. 2025-06-18)")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    server = build_server()
    if a.only_version:
        speaking_only(server, a.only_version)
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        event_store=MemoryEventStore(), retry_interval=500,
        host="127.0.0.1",  # => TransportSecuritySettings(allowed_hosts 127.0.0.1:*/localhost:*/[::1]:*)
    )
    uvicorn.run(app, host="127.0.0.1", port=a.port, log_level="warning")


if __name__ == "__main__":
    main()
