"""An MCP server launched as a subprocess and spoken to over stdin/stdout."""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import AsyncExitStack
from pathlib import Path

from mcp import StdioServerParameters

from actors.backends.mcp import McpBackend
from router.settings import McpStdioSpec


def resolve_command(command: str) -> str:
    """``python`` means the router's own interpreter; other bare names are looked up beside it
    (its virtualenv's ``bin``) before ``PATH``, so servers installed with the router are found even
    when the virtualenv is not activated."""
    if os.path.isabs(command) or os.sep in command:
        return command
    if command in ("python", "python3"):
        return sys.executable
    beside = Path(sys.executable).parent / command
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(command) or command


_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None


class McpStdioBackend(McpBackend):
    kind = "mcp_stdio"
    transport = "stdio"

    def __init__(self, spec: McpStdioSpec) -> None:
        super().__init__(spec)
        self.stdio_spec = spec

    async def _target(self, stack: AsyncExitStack) -> StdioServerParameters:
        s = self.stdio_spec
        command, args = resolve_command(s.command), list(s.args)
        if _SETPRIV is not None:
            # The server gets SIGTERM if the actor's process dies without closing the session (a kill,
            # a lost node): no server outlives the backend that started it.
            command, args = _SETPRIV, ["--pdeathsig", "TERM", "--", command, *args]
        return StdioServerParameters(command=command, args=args, env=dict(s.env) or None, cwd=s.cwd)
