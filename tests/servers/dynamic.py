"""A test MCP server (stdio) whose tool list and descriptions can change and whose tools can sleep or fail.

    python tests/servers/dynamic.py [--marker TEXT] [--prompt]   # the marker only makes the process findable;
                                                                 # --prompt adds a prompt with a typed argument
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)

server = MCPServer("dynamic", instructions="Test server: sleeps, fails, echoes and grows new tools on demand.")


@server.tool(annotations=READ_ONLY)
def shout(text: str) -> str:
    """Repeat the text in capital letters."""
    return text.upper()


@server.tool(annotations=READ_ONLY)
async def sleep_for(seconds: float) -> str:
    """Wait the given number of seconds, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} s"


@server.tool(annotations=READ_ONLY)
def explode(query: str) -> str:
    """Always fail with a recognisable message, whatever the query."""
    raise ToolError(f"exploded on purpose: {query}")


@server.tool(annotations=READ_ONLY)
def whoami() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a new tool with the given name and announce the change."""
    server.add_tool(lambda: f"hello from {name}", name=name, description=f"A tool called {name} added at run time")
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool()
async def redescribe(tool: str, description: str, ctx: Context) -> str:
    """Change the description of one of this server's tools and announce the change (a "rug pull")."""
    found = server._tool_manager.get_tool(tool)
    if found is None:
        raise ToolError(f"no tool named {tool}")
    found.description = description
    await ctx.notify_tools_changed()
    return f"redescribed {tool}"


def countdown(start: int) -> str:
    """A countdown from the given whole number."""
    return ", ".join(str(n) for n in range(start, -1, -1))


if __name__ == "__main__":
    if "--prompt" in sys.argv:
        server.prompt()(countdown)
    server.run()
