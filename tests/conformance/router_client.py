"""The router as the client of the conformance suite's client scenarios: its own MCP backend code
(`actors.backends.McpHttpBackend`, what a backend actor runs) connects, lists and calls.

    conformance client --command "python tests/conformance/router_client.py" --scenario tools_call

The suite starts its scenario server and runs the command with the server's URL as the last argument
and the scenario's name in MCP_CONFORMANCE_SCENARIO; exit code 0 means the client did its part.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from actors.backends.mcp_http import McpHttpBackend
from router.settings import McpHttpSpec
from router.values import CallContext

# What each scenario asks of the client: the tool to call (None: connect and list only), its arguments.
SCENARIOS: dict[str, tuple[str | None, dict[str, object]]] = {
    "initialize": (None, {}),
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    # The server closes the call's SSE stream after a priming event; the client resumes it (SEP-1699).
    "sse-retry": ("test_reconnection", {}),
}


async def run(url: str, scenario: str) -> None:
    tool, arguments = SCENARIOS[scenario]
    backend = McpHttpBackend(McpHttpSpec(name="conformance", url=url))
    await backend.connect()
    try:
        catalog = await backend.list_capabilities()
        if tool is None:
            return
        capability = next(c for c in catalog.capabilities if c.name == tool)
        context = CallContext(question=scenario, intent="general")
        outcome = await backend.call(capability, arguments, timeout_s=30, context=context)
        print(outcome.text)
    finally:
        await backend.shutdown()


def main() -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if scenario not in SCENARIOS:
        print(f"scenario {scenario!r} does not apply to the router as a client", file=sys.stderr)
        return 2
    asyncio.run(run(sys.argv[-1], scenario))
    return 0


if __name__ == "__main__":
    sys.exit(main())
