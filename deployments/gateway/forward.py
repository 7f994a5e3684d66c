"""One gateway request carried to a backend's actor and back (the ingress half of `actors.backends.relay`).

    result = await forward(ctx, actor, "tools/call", {"name": "add", "arguments": {...}}, timeout_s=30)

The actor's events come over a Ray streaming call: progress and log messages go to the client on its
request's stream, the server's own requests (sampling, elicitation, roots) to the client and their
answers back to the actor; the last event is the result, or an error raised as `MCPError` with the
server's code, message and data (the router's own errors carry `data.kind`). A client that goes away
cancels the actor's side too.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, get_args

import mcp_types as types
import ray
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from router.errors import ErrorKind

Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]
# A server's request to the client: the request type to send and the result type to expect.
_SERVER_REQUESTS: dict[str, tuple[type[Any], type[Any]]] = {
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}
# The router's own errors after which another copy of a read-only tool may answer instead.
FAILOVER_KINDS = frozenset({ErrorKind.BACKEND_UNAVAILABLE.value, ErrorKind.BACKEND_TIMEOUT.value,
                            ErrorKind.BACKEND_FAILED.value})


class RouterMCPError(MCPError):
    """The router's own error (a refusal, a backend it could not reach), as the gateway's client sees it: a
    JSON-RPC internal error whose `data.kind` names it. A backend's own error is a plain `MCPError`, whatever
    its data says."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(code=types.INTERNAL_ERROR, message=message, data={"kind": kind.value})
        self.kind = kind


def router_error(kind: ErrorKind, message: str) -> RouterMCPError:
    return RouterMCPError(kind, message)


def error_kind(error: MCPError) -> str | None:
    """The router's kind of an error the gateway raised (None: the backend's own JSON-RPC error)."""
    return error.kind.value if isinstance(error, RouterMCPError) else None


def outgoing(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client's params as the backend gets them: `_meta` is this hop's (its progress token is answered
    here, and the reserved keys are re-stamped by the router's own session)."""
    return {k: v for k, v in (params or {}).items() if k != "_meta"}


def log_level(ctx: ServerRequestContext[Any, Any], levels: Mapping[str, str]) -> str | None:
    """The least severe log message the client wants during its request: a 2026-07-28 client's opt-in, a
    2025 client's `logging/setLevel` (`levels`, by session), else everything the server sends."""
    meta = (ctx.params or {}).get("_meta") or {}
    if LOG_LEVEL_META_KEY in meta:
        return str(meta[LOG_LEVEL_META_KEY])
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    session = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
    return levels.get(session or "", "debug")


_SEVERITY = get_args(types.LoggingLevel)  # least to most severe, as MCP (RFC 5424) orders them


def _at_least(level: Any, wanted: str | None) -> bool:
    """Whether a log message of `level` is one the client asked for (`wanted`: its least severe; None: all)."""
    if wanted not in _SEVERITY or level not in _SEVERITY:
        return True
    return _SEVERITY.index(level) >= _SEVERITY.index(wanted)


async def forward(ctx: ServerRequestContext[Any, Any], actor: Any, method: str, params: Mapping[str, Any],
                  timeout_s: float, level: str | None = None, principal: str | None = None) -> dict[str, Any]:
    stream = actor.relay.options(num_returns="streaming").remote(method, dict(params), timeout_s, level, principal)
    relay_id = None
    done = asking = False
    try:
        # The deadline covers the whole request, waiting for a call slot included, as a routed call's does; the
        # actor ends the server's part at `timeout_s`, and the extra second guards the hop to it (a host on a
        # lost node neither answers nor ends).
        async with asyncio.timeout(timeout_s + 1.0):
            async for ref in stream:
                event = await ref
                kind = event["event"]
                if kind == "relay":
                    relay_id = event["id"]
                elif kind == "progress":
                    await ctx.session.report_progress(event["progress"], event.get("total"), event.get("message"))
                elif kind == "log":
                    if _at_least(event["params"].get("level"), level):
                        await _log(ctx, event["params"])
                elif kind == "request":
                    asking = True
                    answer = await _ask_client(ctx, event["method"], event.get("params"))
                    asking = False
                    await actor.answer.remote(relay_id, event["id"], answer)
                elif kind == "result":
                    done = True
                    result: dict[str, Any] = event["result"]
                    return result
                else:
                    done = True
                    if event.get("router"):  # the actor's own error, not one the server sent
                        raise router_error(ErrorKind(event["data"]["kind"]), event["message"])
                    raise MCPError(code=event["code"], message=event["message"], data=event.get("data"))
    except ray.exceptions.RayError as exc:
        done = True
        raise router_error(ErrorKind.BACKEND_UNAVAILABLE, f"the backend's actor is unavailable: "
                                                          f"{type(exc).__name__}") from None
    except TimeoutError:
        if asking:  # the client's own doing: not a backend's timeout, and no reason to try a copy
            raise router_error(ErrorKind.DEADLINE_EXCEEDED, f"the client did not answer the server's request "
                                                            f"within {timeout_s:.1f} s") from None
        raise router_error(ErrorKind.BACKEND_TIMEOUT, f"the backend's actor did not answer within "
                                                      f"{timeout_s:.1f} s") from None
    finally:
        if not done:  # the client went away (or cancelled): so does the backend's side
            ray.cancel(stream)
    raise router_error(ErrorKind.BACKEND_FAILED, "the backend's actor ended the request without an answer")


async def _log(ctx: ServerRequestContext[Any, Any], params: Mapping[str, Any]) -> None:
    message = types.LoggingMessageNotificationParams.model_validate(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in 2026-07-28, where it honours the request's own opt-in
        await ctx.session.send_log_message(message.level, message.data, message.logger,
                                           related_request_id=ctx.request_id)


async def _ask_client(ctx: ServerRequestContext[Any, Any], method: str,
                      params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The server's request, asked of the client on the request's own stream; its answer or its error."""
    request_type, result_type = _SERVER_REQUESTS[method]
    if method == "sampling/createMessage" and params and (params.get("tools") or params.get("toolChoice")):
        result_type = types.CreateMessageResultWithTools
    try:
        request = request_type.model_validate({"method": method, **({"params": params} if params else {})})
        result = await ctx.session.send_request(request, result_type,
                                                metadata=ServerMessageMetadata(related_request_id=ctx.request_id))
    except MCPError as exc:
        return {"error": exc.error.model_dump(mode="json", exclude_none=True)}
    except Exception as exc:  # no back-channel (a 2026-07-28 client), an answer of the wrong shape
        return {"error": {"code": types.INTERNAL_ERROR, "message": f"{method}: the client could not be asked "
                                                                   f"({type(exc).__name__})"}}
    return {"result": result.model_dump(by_alias=True, mode="json", exclude_none=True)}


def versioned(handler: Handler) -> Handler:
    """A gateway handler whose result is in the client's protocol version (the SDK checks a handler's result
    against it before any middleware sees it): a 2026-07-28 answer needs `resultType`, which a 2025
    server's result lacks; a 2025 answer has none. The backend's own cache hints are dropped for the
    gateway's (`private`, kept 0 ms): the backend has one client, the router, and may call an answer `public`,
    but what the gateway answers is filtered by the caller's policy, and a shared cache would serve it to others."""

    async def answer(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        result = await handler(ctx, params)
        if isinstance(result, dict):
            result.pop("cacheScope", None)
            result.pop("ttlMs", None)
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                result.setdefault("resultType", "complete")
            else:
                result.pop("resultType", None)
        return result

    return answer
