"""`python -m mcp_router.servers.knowledge_base ...`: the server's command line (see `server`)."""

from mcp_router.servers.knowledge_base.server import main

main()
