"""The MCP server at /mcp/backends/: every backend the caller may reach, as one server.

Tools (and flows, as tools taking a `question`) and prompts are named `<backend>__<name>`; resources keep
their URIs. A tool's name is made what function-calling APIs accept (letters, digits, `_` and `-`, at most
64 characters; a flow's name has spaces) and unique, as `/v1/chat` names them. `search_tools` ranks them for
a task with the router's own retrieval, so a client with hundreds of tools can load the few it needs. A call
goes to its backend like one on that backend's own endpoint (`deployments.gateway.backend`); a flow is called
through the router's query path.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from pydantic import ValidationError

from deployments.caller import Caller
from deployments.gateway.backend import CACHE_HINTS
from deployments.gateway.forward import outgoing, versioned
from deployments.gateway.gate import Gate
from router.errors import InvalidRequest, RouterError, UnknownCapability
from router.llm.tool_loop import unique_tool_names
from router.models import QueryRequest, RouteRequest, describe_validation
from router.values import Capability

SEPARATOR = "__"
SEARCH = "search_tools"
INSTRUCTIONS = ("Every tool you may use on the servers behind this router, named <server>__<tool>. With many "
                "tools, call search_tools with the task first and load only what it returns.")
_SEARCH_TOOL = {
    "name": SEARCH, "title": "Search tools",
    "description": "The tools for a task, best first, ranked by the router (its retrieval, the same scores it "
                   "routes with). Each result names a tool of this server, with its description and input schema.",
    "inputSchema": {"type": "object", "required": ["query"], "additionalProperties": False, "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "The task, in words."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}}},
    "annotations": {"readOnlyHint": True, "idempotentHint": True},
}


def namespaced(capability: Capability) -> str:
    return f"{capability.backend}{SEPARATOR}{capability.name}"


def build_aggregate_server(gate: Gate) -> Server[Any]:
    server: Server[Any] = Server("mcp-router", version="0.1.0", instructions=INSTRUCTIONS, cache_hints=CACHE_HINTS)

    def served(caller: Caller, kinds: tuple[str, ...]) -> Iterator[Capability]:
        for catalog in gate.catalogs(caller).values():
            yield from (c for c in catalog.capabilities if c.kind in kinds and not c.server_level)

    def find(caller: Caller, kinds: tuple[str, ...], name: str) -> Capability:
        found = next((c for c in served(caller, kinds) if namespaced(c) == name), None)
        if found is None:
            raise gate.refuse(caller, UnknownCapability(f"unknown {kinds[0]} {name!r}", tool=name),
                              code=types.INVALID_PARAMS)
        return found

    def tools(caller: Caller) -> dict[str, Capability]:
        return unique_tool_names(list(served(caller, ("tool", "flow"))))

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        caller = gate.caller()
        return {"tools": [_SEARCH_TOOL, *(_tool(name, c) for name, c in tools(caller).items())]}

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        caller = gate.caller()
        if params.name == SEARCH:
            return await _search(gate, caller, params.arguments or {}, tools(caller))
        capability = tools(caller).get(params.name)
        if capability is None:
            raise gate.refuse(caller, UnknownCapability(f"unknown tool {params.name!r}", tool=params.name),
                              code=types.INVALID_PARAMS)
        if capability.kind == "flow":
            return await _call_flow(gate, caller, capability, params.arguments or {})
        return await gate.relay(ctx, caller, capability.backend, "tools/call", outgoing(ctx.params), capability)

    async def list_prompts(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        caller = gate.caller()
        return {"prompts": [_present({"name": namespaced(c), "title": c.title, "description": c.description,
                                      "arguments": _prompt_arguments(c)}) for c in served(caller, ("prompt",))]}

    async def get_prompt(ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams) -> Any:
        caller = gate.caller()
        capability = find(caller, ("prompt",), params.name)
        return await gate.relay(ctx, caller, capability.backend, "prompts/get", outgoing(ctx.params), capability)

    async def list_resources(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        caller = gate.caller()
        return {"resources": [_present({"uri": c.target, "name": namespaced(c), "title": c.title,
                                        "description": c.description})
                              for c in served(caller, ("resource",)) if c.target]}

    async def read_resource(ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams) -> Any:
        caller = gate.caller()
        uri = str(params.uri)
        capability = next((c for c in served(caller, ("resource",)) if c.target == uri), None)
        if capability is None:
            raise gate.refuse(caller, UnknownCapability(f"unknown resource {uri!r}", tool=uri),
                              code=types.INVALID_PARAMS)
        return await gate.relay(ctx, caller, capability.backend, "resources/read", outgoing(ctx.params))

    async def set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> Any:
        gate.remember_level(ctx, params.level)  # for this session's requests, whichever backend they reach
        return {}

    handlers: tuple[tuple[str, Any, Any], ...] = (
        ("tools/list", types.PaginatedRequestParams, list_tools),
        ("tools/call", types.CallToolRequestParams, call_tool),
        ("prompts/list", types.PaginatedRequestParams, list_prompts),
        ("prompts/get", types.GetPromptRequestParams, get_prompt),
        ("resources/list", types.PaginatedRequestParams, list_resources),
        ("resources/read", types.ReadResourceRequestParams, read_resource),
        ("logging/setLevel", types.SetLevelRequestParams, set_level),
    )
    for method, params_type, handler in handlers:
        server.add_request_handler(method, params_type, versioned(handler))
    return server


def _tool(name: str, c: Capability) -> dict[str, Any]:
    return _present({"name": name, "title": c.title, "description": c.description,
                     "inputSchema": c.input_schema or {"type": "object"},
                     "annotations": {"readOnlyHint": c.read_only, "idempotentHint": c.idempotent}})


def _present(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None}


def _prompt_arguments(c: Capability) -> list[dict[str, Any]]:
    props: Mapping[str, Any] = c.input_schema.get("properties") or {}
    required = set(c.input_schema.get("required") or ())
    return [_present({"name": n, "description": (p or {}).get("description") or None, "required": n in required})
            for n, p in props.items()]


async def _search(gate: Gate, caller: Caller, arguments: Mapping[str, Any],
                  tools: Mapping[str, Capability]) -> dict[str, Any]:
    query, limit = arguments.get("query"), arguments.get("limit", 10)
    if not isinstance(query, str) or not query.strip() or not isinstance(limit, int) or not 1 <= limit <= 50:
        return _text_error("search_tools needs `query` (a non-empty string) and an optional `limit` from 1 to 50")
    try:
        route = await gate.service.route(RouteRequest(question=query, k=min(100, limit * 3)), caller)
    except ValidationError as exc:
        return _text_error(describe_validation(list(exc.errors())))
    except RouterError as exc:
        return _text_error(exc.message)
    named = {(c.backend, c.kind, c.name): name for name, c in tools.items()}
    found = []
    for c in route.candidates:
        name = named.get((c.backend, c.kind, c.capability))
        if name is None:  # not a tool or flow the caller may call here
            continue
        found.append({**_tool(name, tools[name]), "score": c.scores.composite, "confidence": c.scores.confidence})
        if len(found) == limit:
            break
    text = "\n".join(f"{t['name']}: {t['description'][:200]}" for t in found) or "no tool fits this task"
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"tools": found}, "isError": False}


async def _call_flow(gate: Gate, caller: Caller, flow: Capability, arguments: Mapping[str, Any]) -> dict[str, Any]:
    try:
        request = QueryRequest(question=str(arguments.get("question") or ""), arguments=dict(arguments),
                               backend=flow.backend, tool=flow.name)
        answer = await gate.service.query(request, caller)
    except ValidationError as exc:
        return _text_error(describe_validation(list(exc.errors())))
    except InvalidRequest as exc:
        return _text_error(exc.message)
    except RouterError as exc:
        caller.fail(exc)
        return _text_error(f"{exc.code}: {exc.message}")
    return {"content": [{"type": "text", "text": answer.answer}], "isError": False}


def _text_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}
