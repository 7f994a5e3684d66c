"""MCP servers of the project's own, routed to like any other backend (installed as `mcp_router.servers`)."""
