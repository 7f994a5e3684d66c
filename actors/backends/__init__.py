"""Backend kinds, one module each, registered by config `kind`.

    backend = build_backend(spec)     # McpStdioBackend, McpHttpBackend, FlowiseBackend, LangflowBackend
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.backends.base import Backend
from actors.backends.flowise import FlowiseBackend
from actors.backends.langflow import LangflowBackend
from actors.backends.mcp_http import McpHttpBackend
from actors.backends.mcp_stdio import McpStdioBackend

BACKENDS: dict[str, Callable[[Any], Backend]] = {
    "mcp_stdio": McpStdioBackend,
    "mcp_http": McpHttpBackend,
    "flowise": FlowiseBackend,
    "langflow": LangflowBackend,
}


def build_backend(spec: Any) -> Backend:
    return BACKENDS[spec.kind](spec)


__all__ = ["BACKENDS", "Backend", "build_backend"]
