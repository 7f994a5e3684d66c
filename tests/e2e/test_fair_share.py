"""A backend's call slots are shared fairly among principals, over real HTTP and the MCP gateway: one key's
flood of slow calls does not queue another key's call behind it (Ray Serve, a real slow MCP server)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from router.security.identity import key_hash, new_api_key
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, fresh_state, running_app, stdio

KEYS = {name: new_api_key() for name in ("alice", "bob")}
LATENCY_S = 1.0
FLOOD = 6  # three rounds of the backend's two slots


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any]) -> Iterator[str]:
    settings = RouterSettings.model_validate({
        "backends": [stdio("slow", EXAMPLES / "servers" / "faulty.py", "--name", "slow", "--latency-ms",
                           str(int(LATENCY_S * 1000)), "--jitter", "0", max_concurrency=2)],
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"], "auth": {
            "api_keys": [{"name": n, "sha256": key_hash(k), "policy": "operator"} for n, k in KEYS.items()]}},
        "state_dir": fresh_state(),
    })
    with running_app(settings, ray_local["url"]) as url:
        yield url


async def _query(url: str, who: str) -> float:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=60) as http:
        r = await http.post(f"{url}/v1/query", json={"question": "answer", "backend": "slow", "tool": "answer",
                                                     "arguments": {"query": who}})
    assert r.status_code == 200, r.text
    return time.monotonic()


async def _gateway_call(url: str, who: str) -> float:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEYS[who]}"}, timeout=60) as http, \
            Client(streamable_http_client(f"{url}/mcp/backends/slow/", http_client=http)) as client:
        result = await client.call_tool("answer", {"query": who})
    assert not result.is_error, result
    return time.monotonic()


@pytest.mark.parametrize("bobs_call", [_query, _gateway_call], ids=["http", "gateway"])
async def test_another_keys_call_is_not_queued_behind_one_keys_flood(app: str, bobs_call: Any) -> None:
    flood = [asyncio.create_task(_query(app, "alice")) for _ in range(FLOOD)]
    await asyncio.sleep(0.5 * LATENCY_S)  # alice holds both slots and four of her calls wait
    bob_done = await bobs_call(app, "bob")
    alice_done = sorted(await asyncio.gather(*flood))
    # Bob takes one of the first slots freed: alice's last round ends after him. Served first come, first
    # served, his call would wait for all three of her rounds and end last.
    assert bob_done < alice_done[-1] - 0.5 * LATENCY_S, (bob_done, alice_done)
