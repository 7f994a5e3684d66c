"""A router replica that dies does not take the endpoint with it: Serve replaces it and the configured
address (HAProxy's) answers again, over HTTP and for a new MCP session at the same URL."""

from __future__ import annotations

import os
import signal
from typing import Any

import httpx
from mcp import Client

from mcp_router.cli.local import processes_mentioning
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, running_app, stdio, wait_for


def replica_pids() -> set[int]:
    """The processes of the router's ingress replicas (Ray names them in their process title)."""
    return processes_mentioning("ServeReplica:mcp-router:RouterIngress")


def answers(url: str) -> bool:
    try:
        r = httpx.post(f"{url}/v1/query", json={"question": "What is 2 plus 3?"}, timeout=10)
    except httpx.HTTPError:
        return False
    return r.status_code == 200 and r.json()["answer"].endswith("= 5")


async def test_the_configured_port_answers_again_after_the_router_replica_is_killed(ray_local: Any) -> None:
    settings = RouterSettings.model_validate({
        "backends": [stdio("calculator", EXAMPLES / "servers" / "calculator.py")],
        "server": {"port": ray_local["port"]}})
    with running_app(settings, ray_local["url"]) as url:
        assert answers(url)
        (victim,) = wait_for(replica_pids, timeout=10)
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: replica_pids() - {victim}, timeout=60)  # Serve started a replacement
        wait_for(lambda: answers(url), timeout=60, interval=0.25)  # ... behind the same address
        async with Client(f"{url}/mcp/") as client:  # a new MCP session at the same URL
            result = await client.call_tool("universal_query", {"question": "What is 2 plus 3?"})
        assert not result.is_error and "= 5" in result.content[0].text
