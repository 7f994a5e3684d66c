"""The MCP server at /mcp/backends/{name}/: one backend, as a faithful proxy within the caller's policy.

Tools, prompts, resources (read, templates, subscriptions), completion and the logging level are relayed
to the backend's held session (`deployments.gateway.forward`), with progress, log messages, cancellation
and the server's own requests (sampling, elicitation, roots) carried both ways. What the backend lists is
what its reviewed catalog serves to this caller: a tool the policy denies, or the catalog review holds,
is neither listed nor callable, and a listed item is what the review serves (`reviewed`). The handshake
answers with the backend's own capabilities, server info and instructions, without invisible characters.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server

from actors.backends.relay import SUBSCRIBER
from deployments.gateway.forward import outgoing, versioned
from deployments.gateway.gate import Gate
from router.trust.untrusted import clean_strings, strip_invisible
from router.values import Capability, Catalog

# 2026-07-28 list and read results need cache hints, which a 2025 server does not send.
CACHE_HINTS: dict[Any, CacheHint] = {m: CacheHint(ttl_ms=0, scope="private")
               for m in ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")}
_LISTS = {"tools/list": ("tools", "tool"), "prompts/list": ("prompts", "prompt"),
          "resources/list": ("resources", "resource")}


def build_backend_server(gate: Gate, name: str) -> Server[Any]:
    server: Server[Any] = Server(f"mcp-router/{name}", version="0.1.0", cache_hints=CACHE_HINTS)

    async def listed(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        caller = gate.caller()
        catalog = gate.backend(caller, name)
        key, kind = _LISTS[ctx.method]
        result = await gate.relay(ctx, caller, name, ctx.method, _plain(ctx))
        served = {c.name: c for c in catalog.capabilities if c.kind == kind}
        return {**result, key: [reviewed(item, served[item["name"]]) for item in result.get(key) or []
                                if isinstance(item, dict) and item.get("name") in served]}

    async def called(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        caller = gate.caller()
        catalog = gate.backend(caller, name)
        kind = "tool" if ctx.method == "tools/call" else "prompt"
        capability = gate.capability(caller, catalog, kind, params.name)
        return await gate.relay(ctx, caller, name, ctx.method, _plain(ctx), capability)

    async def by_uri(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        caller = gate.caller()
        catalog = gate.backend(caller, name)
        uri = str(params.uri)
        _check_uri(gate, caller, catalog, uri)
        params = _plain(ctx)
        session = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
        if session and ctx.method != "resources/read":  # the backend's session is shared: it counts subscribers
            params[SUBSCRIBER] = session
        subscribed = gate.seen(ctx, name)
        if ctx.method == "resources/subscribe":
            gate.may_subscribe(caller, name, subscribed, uri)
        result = await gate.relay(ctx, caller, name, ctx.method, params)
        if ctx.method == "resources/subscribe":
            subscribed.add(uri)
        elif ctx.method == "resources/unsubscribe":
            subscribed.discard(uri)
        return result

    async def templates(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        caller = gate.caller()
        gate.backend(caller, name)
        if not gate.wholly_allowed(caller, name):  # a template may expand to any resource
            return {"resourceTemplates": []}
        return await gate.relay(ctx, caller, name, ctx.method, _plain(ctx))

    async def complete(ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams) -> HandlerResult:
        caller = gate.caller()
        catalog = gate.backend(caller, name)
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            gate.capability(caller, catalog, "prompt", ref.name)
        elif not gate.wholly_allowed(caller, name):
            return {"completion": {"values": [], "hasMore": False}}
        return await gate.relay(ctx, caller, name, ctx.method, _plain(ctx))

    async def set_level(ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams) -> HandlerResult:
        caller = gate.caller()
        gate.backend(caller, name)
        gate.remember_level(ctx, params.level)
        # The server's session is every client's: it is asked for everything, and each client's own level
        # filters what reaches that client (deployments.gateway.forward), so one client's level never
        # silences another's messages.
        return await gate.relay(ctx, caller, name, ctx.method, {**_plain(ctx), "level": "debug"})

    handlers: tuple[tuple[str, Any, Any], ...] = (
        ("tools/list", types.PaginatedRequestParams, listed), ("prompts/list", types.PaginatedRequestParams, listed),
        ("resources/list", types.PaginatedRequestParams, listed),
        ("tools/call", types.CallToolRequestParams, called), ("prompts/get", types.GetPromptRequestParams, called),
        ("resources/read", types.ReadResourceRequestParams, by_uri),
        ("resources/subscribe", types.SubscribeRequestParams, by_uri),
        ("resources/unsubscribe", types.UnsubscribeRequestParams, by_uri),
        ("resources/templates/list", types.PaginatedRequestParams, templates),
        ("completion/complete", types.CompleteRequestParams, complete),
        ("logging/setLevel", types.SetLevelRequestParams, set_level),
    )

    def tracked(handler: Any) -> Any:
        async def seen(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
            gate.seen(ctx, name)  # the session hears the backend's notifications from now on
            return await handler(ctx, params)

        return seen

    for method, params_type, handler in handlers:
        server.add_request_handler(method, params_type, versioned(tracked(handler)))

    server.middleware.append(_mirror(gate, name))
    return server


def _mirror(gate: Gate, name: str) -> Any:
    """Middleware: the handshake answers as the backend did (its capabilities, server info and instructions), a
    2025 client's `initialize` and a 2026-07-28 client's `server/discover` alike."""

    async def mirror(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method not in ("initialize", "server/discover"):
            return result
        found = await gate.identity(name)
        if found is None or not isinstance(result, dict):  # the SDK's handshake answers with a wire dict
            return result
        answer = dict(result)
        answer["capabilities"] = found["capabilities"]
        if found.get("serverInfo") and "serverInfo" in answer:
            answer["serverInfo"] = clean_strings(found["serverInfo"])
        if isinstance(found.get("instructions"), str) and found["instructions"]:
            answer["instructions"] = strip_invisible(found["instructions"])
        return answer

    return mirror


def reviewed(item: dict[str, Any], capability: Capability) -> dict[str, Any]:
    """A listed tool, prompt or resource as the catalog review serves it: its reviewed description, title and
    input schema (a poisoned one is cleaned, or held and not listed), the router's own verdict on whether a tool
    only reads (the backend's `read_only` setting, a claim held for approval), and no invisible characters in
    what the review does not read (an output schema, a prompt's arguments, icons)."""
    out: dict[str, Any] = clean_strings(item)
    for field, value in (("description", capability.description), ("title", capability.title)):
        if value or out.get(field):
            out[field] = value
    if capability.kind == "tool":
        out["inputSchema"] = capability.input_schema or {"type": "object"}
        declared = out.get("annotations")
        out["annotations"] = {**(declared if isinstance(declared, dict) else {}),
                              "readOnlyHint": capability.read_only, "idempotentHint": capability.idempotent}
    return out


def _plain(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    return outgoing(ctx.params)


def _check_uri(gate: Gate, caller: Any, catalog: Catalog, uri: str) -> None:
    """A listed resource by its own permission; any other URI (a template's) needs all of the backend."""
    listed = [c for c in catalog.capabilities if c.kind == "resource" and c.target == uri]
    held = any(c.kind == "resource" and c.target == uri for c in catalog.held)  # held for every caller alike
    if listed or (gate.wholly_allowed(caller, catalog.backend) and not held):
        return
    gate.capability(caller, catalog, "resource", uri)  # refuses: not a resource this caller may read
