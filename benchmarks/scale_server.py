"""A cheap MCP server with many endpoints, one per simulated backend, for `benchmarks/scale.py`.

    python benchmarks/scale_server.py --port 9100 --endpoints 1000 --tools 20
    # http://127.0.0.1:9100/s0/mcp ... /s999/mcp; POST /admin/change {"fraction": 0.1}

One process, one MCP SDK `Server` and session manager (streamable HTTP with sessions): a request's path
says which endpoint it is for. Endpoint i offers `--tools` tools drawn from its own topic, with names and
descriptions a question can be routed by. `POST /admin/change` edits the tools of the first fraction of
the endpoints and announces it (`notifications/tools/list_changed`) on each of their sessions.
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

TOPICS = ("weather", "invoices", "flights", "recipes", "tickets", "payroll", "genomes", "satellites", "contracts",
          "playlists", "warehouses", "vaccines", "mortgages", "telescopes", "tournaments", "podcasts", "pipelines",
          "greenhouses", "elections", "earthquakes", "museums", "shipments", "courses", "patents", "reservoirs")
VERBS = ("list", "get", "create", "update", "delete", "search", "count", "export", "archive", "summarize",
         "compare", "forecast", "validate", "translate", "schedule", "rank", "merge", "tag", "audit", "plot")
_PATH = re.compile(r"/s(\d+)/")


def topic(i: int) -> str:
    return f"{TOPICS[i % len(TOPICS)]} {i}"


def tools_of(i: int, count: int, revision: int) -> list[types.Tool]:
    subject = topic(i)
    note = f" Revision {revision}." if revision else ""
    return [types.Tool(name=f"{VERBS[j % len(VERBS)]}_{TOPICS[i % len(TOPICS)]}_{j}",
                       description=f"{VERBS[j % len(VERBS)].capitalize()} {subject} records (variant {j}).{note}",
                       input_schema={"type": "object", "properties": {"query": {"type": "string"}}})
            for j in range(count)]


def build(endpoints: int, tools: int) -> Starlette:
    revisions = [0] * endpoints
    sessions: dict[int, dict[str, Any]] = defaultdict(dict)  # endpoint -> session id -> session

    def endpoint(ctx: ServerRequestContext[Any, Any]) -> int:
        found = _PATH.search(ctx.request.url.path if ctx.request is not None else "")
        i = int(found.group(1)) if found else -1
        if not 0 <= i < endpoints:
            raise ValueError(f"no endpoint {i}")
        sid = ctx.request.headers.get("mcp-session-id") if ctx.request is not None else None
        if sid:
            sessions[i][sid] = ctx.session
        return i

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        i = endpoint(ctx)
        return types.ListToolsResult(tools=tools_of(i, tools, revisions[i]))

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        i = endpoint(ctx)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"s{i}/{params.name}: done")])

    server: Server[Any] = Server("scale-server", version="1.0.0", instructions="Simulated backends.",
                                 on_list_tools=list_tools, on_call_tool=call_tool)
    inner = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")

    async def change(request: Request) -> JSONResponse:
        fraction = float((await request.json()).get("fraction", 0.1))
        changed = list(range(int(endpoints * fraction)))
        notified = 0
        for i in changed:
            revisions[i] += 1
            for key, session in list(sessions[i].items()):
                try:
                    await session.send_notification(types.ToolListChangedNotification())
                    notified += 1
                except Exception:  # a session that has gone
                    sessions[i].pop(key, None)
        return JSONResponse({"changed": changed, "notified": notified, "revision": max(revisions)})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return Starlette(routes=[Route("/admin/change", change, methods=["POST"]), Mount("/s{i:int}", app=inner)],
                     lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--endpoints", type=int, default=1000)
    parser.add_argument("--tools", type=int, default=20)
    args = parser.parse_args()
    uvicorn.run(build(args.endpoints, args.tools), host="127.0.0.1", port=args.port, log_level="warning",
                backlog=4096)


if __name__ == "__main__":
    main()
