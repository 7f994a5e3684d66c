"""The README's endpoint table and MCP tool list say what the app serves: every route and tool, no more."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from deployments.http import build_http_app
from deployments.mcp import build_mcp_server
from router.settings import RouterSettings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
# FastAPI's own documentation routes (the README names `/docs`, for all of them).
BUILT_IN = {"GET /openapi.json", "GET /docs/oauth2-redirect", "GET /redoc"}


class NoService:
    settings = RouterSettings()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"building the app called the service's {name}")


def readme_rows() -> list[str]:
    table = README[README.index("| endpoint | what it does |"):].split("\n\n", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", table, re.M)


def test_the_readme_endpoint_table_lists_every_http_route_and_nothing_else() -> None:
    app = build_http_app(NoService())  # type: ignore[arg-type]
    # The console's files (`/ui/`, listed without a method) are not part of the API.
    served = {f"{method} {route.path}" for route in app.routes for method in getattr(route, "methods", ())
              if method != "HEAD" and not route.path.startswith("/ui")} - BUILT_IN
    listed = {row for row in readme_rows() if " " in row}
    assert listed == served


async def test_the_readme_lists_every_mcp_tool_of_the_routers_endpoint() -> None:
    mcp_row = next(line for line in README.splitlines() if line.startswith("| `/mcp/` |"))
    listed = set(re.findall(r"`(\w+)`", mcp_row.split("|")[2]))
    server = build_mcp_server(NoService(), RouterSettings())  # type: ignore[arg-type]
    assert listed == {tool.name for tool in await server.list_tools()}


def test_the_api_docs_error_table_names_every_error_type() -> None:
    from router.errors import ErrorKind

    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")
    table = api[api.index("| status | `type` |"):].split("\n\n", 1)[0]
    # A configuration error stops start-up, and `cancelled` is an attempt's outcome: neither is an answer.
    never_answered = {ErrorKind.CONFIG, ErrorKind.CANCELLED}
    missing = [k.value for k in ErrorKind if f"`{k.value}`" not in table and k not in never_answered]
    assert missing == []
