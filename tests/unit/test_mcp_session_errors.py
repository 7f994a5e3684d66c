"""What an MCP server's errors say of the router's session with it (no server, no Ray): a 2026-07-28 server
with no tools is alive when it answers the listing that stands in for ping, and a 2025 HTTP server that forgot
the session ends it (the supervisor connects again) rather than failing every call until a health check."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from actors.backends.mcp_http import McpHttpBackend
from router.errors import BackendFailed, BackendUnavailable
from router.settings import RouterSettings


class Client:
    def __init__(self, protocol_version: str, error: MCPError) -> None:
        self.protocol_version = protocol_version
        self.error = error

    async def list_tools(self) -> Any:
        raise self.error

    async def send_ping(self) -> Any:
        raise self.error


def web() -> McpHttpBackend:
    settings = RouterSettings.model_validate({"backends": [{"name": "web", "kind": "mcp_http",
                                                             "url": "http://127.0.0.1:9/mcp"}]})
    return McpHttpBackend(settings.backends[0])  # type: ignore[arg-type]


async def checked(protocol: str, error: MCPError) -> McpHttpBackend:
    backend = web()
    backend._client = Client(protocol, error)  # type: ignore[assignment]
    backend._owner = asyncio.ensure_future(backend._stop.wait())  # a session that is open
    try:
        await backend.health(1.0)
    finally:
        backend._owner.cancel()
    return backend


async def test_a_modern_server_without_tools_is_alive_when_it_answers_the_listing() -> None:
    await checked("2026-07-28", MCPError(code=types.METHOD_NOT_FOUND, message="Method not found"))
    with pytest.raises(BackendFailed):  # a 2025 server that refuses ping is another matter
        await checked("2025-11-25", MCPError(code=types.METHOD_NOT_FOUND, message="Method not found"))


@pytest.mark.parametrize("message", ["Session terminated", "Not Found: Session not found"])
async def test_a_session_the_server_forgot_ends_the_session(message: str) -> None:
    backend = web()
    error = backend._translate(MCPError(code=types.INVALID_REQUEST, message=message), "tool 't'")
    assert isinstance(error, BackendUnavailable) and "no longer knows the session" in error.message
    assert backend._stop.is_set()  # the session's owner ends it; the supervisor connects again
    other = backend._translate(MCPError(code=types.INVALID_REQUEST, message="bad cursor"), "tools/list")
    assert isinstance(other, BackendFailed)
