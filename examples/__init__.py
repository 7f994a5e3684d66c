"""The bundled example: a router configuration over five MCP servers, with those servers and the
documents of its knowledge base (installed as `mcp_router.examples`).

    mcp-router serve --config "$(python -c 'from mcp_router.examples import CONFIG; print(CONFIG)')"
"""

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
CONFIG = FOLDER / "router.yaml"
SECURE_CONFIG = FOLDER / "secure.yaml"

__all__ = ["CONFIG", "FOLDER", "SECURE_CONFIG"]
