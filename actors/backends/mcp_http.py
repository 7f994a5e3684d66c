"""An MCP server reached over streamable HTTP (configured headers on every request)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from actors.backends.mcp import McpBackend
from router.config import McpHttpSpec


class McpHttpBackend(McpBackend):
    kind = "mcp_http"
    transport = "streamable-http"

    def __init__(self, spec: McpHttpSpec) -> None:
        super().__init__(spec)
        self.http_spec = spec

    async def _target(self, stack: AsyncExitStack) -> Any:
        s = self.http_spec
        headers = {k: v.get_secret_value() for k, v in s.headers.items()}
        timeout = httpx2.Timeout(s.connect_timeout_s, read=max(s.timeout_s, 30.0))
        client = await stack.enter_async_context(create_mcp_http_client(headers=headers, timeout=timeout))
        return streamable_http_client(s.url, http_client=client)
