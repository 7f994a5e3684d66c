"""The router's own MCP endpoint at /mcp, used with the official MCP client over streamable HTTP."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client

from router.settings import RouterSettings
from tests.conftest import EXAMPLES, ROOT, fresh_state, running_app, stdio


@pytest.fixture(scope="module")
def url(ray_local: dict[str, Any]) -> Iterator[str]:
    settings = RouterSettings.model_validate({
        "backends": [stdio("calculator", EXAMPLES / "servers" / "calculator.py"),
                     {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time"}],
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"]},
        "state_dir": fresh_state(),
    })
    with running_app(settings, ray_local["url"]) as url:
        yield url


async def test_tools_list_offers_universal_query_with_intent_and_mode_enums(url: str) -> None:
    async with Client(f"{url}/mcp/") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"universal_query", "list_backends", "explain_route"} <= set(tools)
    props = tools["universal_query"].input_schema["properties"]
    assert tools["universal_query"].input_schema["required"] == ["question"]
    schema_text = json.dumps(props)
    for value in ("auto", "document-qa", "hedged"):
        assert value in schema_text
    # Backend names are not in the schema: each caller learns those its policy allows from list_backends.
    assert '"calculator"' not in schema_text


async def test_universal_query_answers_with_a_routing_info_block_and_structured_content(url: str) -> None:
    async with Client(f"{url}/mcp/") as client:
        result = await client.call_tool("universal_query", {"question": "What is 6 times 7?"})
        bare = await client.call_tool("universal_query", {"question": "What is 6 times 7?",
                                                          "include_routing_metadata": False})
    text = result.content[0].text
    assert not result.is_error and text.startswith("6 * 7 = 42") and "Routing Info" in text
    assert "- backend: calculator" in text and "- fallbacks used: 0" in text
    assert result.structured_content["backend"] == "calculator"
    assert result.structured_content["routing"]["chosen"]["capability"] == "calculate"
    assert bare.content[0].text == "6 * 7 = 42" and "routing" not in bare.structured_content


async def test_routing_errors_come_back_as_tool_errors(url: str) -> None:
    async with Client(f"{url}/mcp/") as client:
        result = await client.call_tool("universal_query", {"question": "  "})
        unknown = await client.call_tool("universal_query", {"question": "hi", "backend": "nope"})
    assert result.is_error and "question" in result.content[0].text
    assert unknown.is_error


async def test_list_backends_and_explain_route(url: str) -> None:
    async with Client(f"{url}/mcp/") as client:
        backends = await client.call_tool("list_backends", {})
        route = await client.call_tool("explain_route", {"question": "What time is it in Tokyo?"})
    names = {b["name"] for b in backends.structured_content["result"]}
    assert names == {"calculator", "time"}
    assert route.structured_content["candidates"][0]["backend"] == "time"


def test_malformed_json_rpc_gets_a_json_rpc_error(url: str) -> None:
    r = httpx.post(f"{url}/mcp/", content=b'{"jsonrpc": "2.0", "id": 1, "method": ',
                   headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    assert 400 <= r.status_code < 500
    assert r.json()["error"]["code"] in (-32700, -32600)


def test_a_standing_stream_on_the_stateless_face_is_refused_not_held_open(url: str) -> None:
    # it stayed open and idle, one of the replica's standing-stream places each, for as long as a client liked
    r = httpx.get(f"{url}/mcp/", headers={"accept": "text/event-stream"}, timeout=10)
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_mcp_inspector_cli_lists_and_calls_tools(url: str) -> None:
    # The MCP Inspector CLI and its Node, installed by `make setup` (tests/conformance/package.json).
    bin_dir = ROOT / "tests" / "conformance" / "node_modules" / ".bin"
    if not (bin_dir / "mcp-inspector").exists():
        pytest.fail("the MCP Inspector is not installed: run `make setup` (npm ci in tests/conformance)")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    for endpoint, tool, question in ((f"{url}/mcp/", "universal_query", "question=What is 2 plus 2?"),
                                     (f"{url}/mcp/backends/calculator/", "calculate", "query=2 plus 2")):
        base = [str(bin_dir / "mcp-inspector"), "--cli", endpoint, "--transport", "http"]
        listed = subprocess.run([*base, "--method", "tools/list"], capture_output=True, text=True, timeout=180,
                                env=env)
        assert tool in listed.stdout, listed.stderr
        called = subprocess.run([*base, "--method", "tools/call", "--tool-name", tool, "--tool-arg", question],
                                capture_output=True, text=True, timeout=180, env=env)
        assert "= 4" in called.stdout, called.stderr


async def test_select_tools_returns_openai_function_tools(url: str) -> None:
    async with Client(f"{url}/mcp/") as client:
        result = await client.call_tool("select_tools", {"messages": [{"role": "user", "content": "time in Oslo?"}]})
    body = result.structured_content
    assert not result.is_error and body["metrics"]["path"] == "below_threshold"
    assert {t["function"]["name"] for t in body["tools"]} >= {"time__get_current_time", "calculator__calculate"}
