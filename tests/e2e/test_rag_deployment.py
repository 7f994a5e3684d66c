"""The RAG server deployed as its own Serve application, reached over streamable HTTP by MCP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from ray import serve

from deployments.rag.deployment import app as rag_app
from tests.conftest import EXAMPLES, wait_for


@pytest.fixture(scope="module")
def rag_url(ray_local: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store: Path = tmp_path_factory.mktemp("rag-store")
    serve.run(rag_app({"docs": str(EXAMPLES / "docs"), "store": str(store)}), name="knowledge-base",
              route_prefix="/rag", blocking=False)
    proxy = ray_local["proxy_url"]  # through Serve's HTTP proxy, by route prefix
    wait_for(lambda: httpx.get(f"{proxy}/rag/health").status_code == 200, timeout=60)
    yield f"{proxy}/rag"
    serve.delete("knowledge-base")


async def test_rag_server_answers_over_mcp_through_serve(rag_url: str) -> None:
    async with httpx.AsyncClient() as http:
        health = (await http.get(f"{rag_url}/health")).json()
    assert health["chunks"] > 0 and health["collection"] == "knowledge-base"
    async with Client(f"{rag_url}/mcp") as client:
        result = await client.call_tool("rag_query_with_chunks",
                                        {"question": "How is the composite score computed?", "k": 3})
    body = result.structured_content
    assert not result.is_error and len(body["chunks"]) == 3
    assert "composite" in body["data"]["answer"].lower()
    assert set(body["chunks"][0]["scores"]) == {"dense", "bm25", "dense_norm", "bm25_norm", "hybrid"}
