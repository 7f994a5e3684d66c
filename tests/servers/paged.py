"""A test MCP server (stdio) that lists its tools, prompts and resources two to a page, as a server with a large
catalog may: a client that reads only the first page misses the rest."""

from __future__ import annotations

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

PAGE = 2
TOOLS = [types.Tool(name=f"tool_{i}", description=f"Tool number {i}.", input_schema={"type": "object"})
         for i in range(5)]
PROMPTS = [types.Prompt(name=f"prompt_{i}", description=f"Prompt number {i}.") for i in range(3)]
RESOURCES = [types.Resource(uri=f"paged://doc/{i}", name=f"doc_{i}", description=f"Document number {i}.")
             for i in range(5)]


def page(items: list, params: types.PaginatedRequestParams | None) -> tuple[list, str | None]:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    return items[start:end], str(end) if end < len(items) else None


async def list_tools(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    tools, cursor = page(TOOLS, params)
    return types.ListToolsResult(tools=tools, next_cursor=cursor)


async def list_prompts(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    prompts, cursor = page(PROMPTS, params)
    return types.ListPromptsResult(prompts=prompts, next_cursor=cursor)


async def list_resources(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    resources, cursor = page(RESOURCES, params)
    return types.ListResourcesResult(resources=resources, next_cursor=cursor)


async def read_resource(ctx: object, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text=f"read {params.uri}")])


async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])


server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool, on_list_prompts=list_prompts,
                on_list_resources=list_resources, on_read_resource=read_resource)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
