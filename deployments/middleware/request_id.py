"""JSON-RPC requests whose id MCP forbids are refused (400), not taken for notifications."""

from __future__ import annotations

import json

import mcp_types as types
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


def bad_request_id(body: bytes) -> str | None:
    """Why a JSON-RPC request's id is one MCP does not allow (a string or an integer; never null, a
    float or a boolean), or None. Bodies that are not JSON, or not a request, are left to the SDK."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    rid = message["id"]
    if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
        return None
    return f"Invalid Request: id must be a string or an integer, not {type(rid).__name__}"


class RequestIdCheck:
    """Answers a request whose id MCP forbids with a JSON-RPC Invalid Request error (400). The SDK
    would take it for a notification and answer 202 with no body, leaving the caller waiting for an
    answer that never comes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []  # the ingress's body limit bounds what is read here
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        problem = bad_request_id(body)
        if problem is not None:
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": problem}}
            await JSONResponse(error, status_code=400)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
