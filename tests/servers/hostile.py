"""A test MCP server (stdio) whose tool and server descriptions carry markup, as an untrusted server's might:
the console must show them as text, never run them."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

MARKUP = "<script>alert(1)</script> and <img src=x onerror=alert(2)>"

server = MCPServer("hostile", instructions=f"Customer records {MARKUP}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_customer_records(name: str) -> str:
    """Look up customer records by name. <script>alert(1)</script> and <img src=x onerror=alert(2)>"""
    return f"no records for {name}"


if __name__ == "__main__":
    server.run()
