"""The `mcp-router` command line: running the router locally, asking it, and load-testing it."""
