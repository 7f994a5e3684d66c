"""The RAG server deployed as its own Serve application, reached over streamable HTTP by MCP, with the
bearer token it refuses to serve without."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from ray import serve

from mcp_router.servers.knowledge_base.deployment import KnowledgeBase
from tests.conftest import EXAMPLES, wait_for

TOKEN = "kb-deployment-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def rag_url(ray_local: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store: Path = tmp_path_factory.mktemp("rag-store")
    options = {"num_cpus": 0, "runtime_env": {"env_vars": {"MCP_ROUTER_KB_TOKEN": TOKEN}}}
    application = KnowledgeBase.options(ray_actor_options=options).bind(  # type: ignore[attr-defined]
        ["--docs", str(EXAMPLES / "docs"), "--store", str(store)])
    serve.run(application, name="knowledge-base", route_prefix="/rag", blocking=False)
    proxy = ray_local["proxy_url"]  # through Serve's HTTP proxy, by route prefix
    wait_for(lambda: httpx.get(f"{proxy}/rag/health", headers=AUTH).status_code == 200, timeout=60)
    yield f"{proxy}/rag"
    serve.delete("knowledge-base")


async def test_rag_server_answers_over_mcp_through_serve(rag_url: str) -> None:
    async with httpx.AsyncClient(headers=AUTH) as http:
        health = (await http.get(f"{rag_url}/health")).json()
    assert health["chunks"] > 0 and health["collection"] == "knowledge-base"
    async with httpx2.AsyncClient(headers=AUTH) as http, \
            Client(streamable_http_client(f"{rag_url}/mcp", http_client=http)) as client:
        result = await client.call_tool("rag_query_with_chunks",
                                        {"question": "How is the composite score computed?", "k": 3})
        sections = {r.name: str(r.uri) for r in (await client.list_resources()).resources}
        read = await client.read_resource(sections["routing.md: The composite score"])
    assert len(sections) == 39 and read.contents[0].text.startswith("# The composite score\n\nEach candidate")
    body = result.structured_content
    assert not result.is_error and len(body["chunks"]) == 3
    assert "composite" in body["data"]["answer"].lower()
    assert set(body["chunks"][0]["scores"]) == {"dense", "bm25", "dense_norm", "bm25_norm", "hybrid"}


def test_on_the_public_port_it_answers_nobody_without_its_token(rag_url: str) -> None:
    for headers in ({}, {"Authorization": "Bearer guess"}):
        assert httpx.get(f"{rag_url}/health", headers=headers).status_code == 401
        assert httpx.post(f"{rag_url}/mcp", headers=headers, json={}).status_code == 401
