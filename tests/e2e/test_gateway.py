"""The MCP gateway under Ray Serve, with real MCP clients pinned to each protocol version and real servers of
each generation behind the router (the conformance suite's everything server: tests/conformance).

Backends: `everything` (spoken to in the 2025 protocol), `modern` (the same server, spoken to in
2026-07-28), `older` (a server that speaks only 2025-06-18) and `primary` (another copy, stopped by the
last test). Principals: alice (everything), bob (one tool), carol (may not name a backend), dave (all of
`everything` but one resource), erin (a deadline of 2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_router.cli.local import free_port
from router.security.identity import key_hash, new_api_key
from router.settings import RouterSettings
from tests.conftest import fresh_state, running_app, stop_process, wait_for, wait_listening

SERVER = Path(__file__).resolve().parents[1] / "conformance" / "everything_server.py"
KEYS = {name: new_api_key() for name in ("alice", "bob", "carol", "dave", "erin")}
VERSIONS = ("2025-06-18", "2025-11-25", "2026-07-28")


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


@contextlib.contextmanager
def server(*args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port), *args])
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    audit = tmp_path_factory.mktemp("gateway") / "audit.jsonl"
    with server() as (main, _), server("--only-version", "2025-06-18") as (older, _), server() as (copy, proc):
        settings = RouterSettings.model_validate({
            "backends": [
                {"name": "everything", "kind": "mcp_http", "url": main, "protocol": "legacy", "read_only": True},
                {"name": "modern", "kind": "mcp_http", "url": main},
                {"name": "older", "kind": "mcp_http", "url": older},
                {"name": "primary", "kind": "mcp_http", "url": copy, "read_only": True, "health_interval_s": 0.5},
            ],
            "server": {"namespace": "mcp-router-test", "port": ray_local["port"], "auth": {
                "api_keys": [{"name": n, "sha256": key_hash(k), "policy": n} for n, k in KEYS.items()],
                "policies": {"alice": {}, "bob": {"allow": ["everything/test_simple_text"]},
                             "carol": {"backend_override": False},
                             "dave": {"allow": ["everything"], "deny": ["everything/static-binary"]},
                             "erin": {"max_deadline_s": 2}}}},
            "audit": {"path": str(audit)},
            "state_dir": fresh_state(),
        })
        with running_app(settings, ray_local["url"]) as url:
            yield {"url": url, "audit": audit, "primary": proc, "backends": {"modern": main}}


@contextlib.asynccontextmanager
async def connect(url: str, version: str, who: str = "alice", **callbacks: Any) -> AsyncIterator[Any]:
    """An MCP client session at exactly `version` (a 2025 one by its own handshake)."""
    async with httpx2.AsyncClient(headers=bearer(who), timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        if version in MODERN_PROTOCOL_VERSIONS:
            async with Client(transport, mode=version, **callbacks) as client:
                yield client
            return
        async with transport as (read, write), ClientSession(read, write, **callbacks) as session:
            init = await session.send_request(types.InitializeRequest(params=types.InitializeRequestParams(
                protocol_version=version, capabilities=types.ClientCapabilities(
                    sampling=types.SamplingCapability(), elicitation=types.ElicitationCapability()),
                client_info=types.Implementation(name="test", version="1"))), types.InitializeResult)
            assert init.protocol_version == version
            session.adopt(init)
            await session.send_notification(types.InitializedNotification())
            yield session


def text(result: types.CallToolResult) -> str:
    assert result.content and isinstance(result.content[0], types.TextContent), result
    return result.content[0].text


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_protocol_version_reaches_a_backend_and_all_of_them(app: dict[str, Any], version: str) -> None:
    async with connect(f"{app['url']}/mcp/backends/older/", version) as one:
        tools = {t.name for t in (await one.list_tools()).tools}
        assert {"test_simple_text", "test_image_content"} <= tools
        assert text(await one.call_tool("test_simple_text", {})) == "This is a simple text response for testing."
        image = await one.call_tool("test_image_content", {})
        assert image.content[0].type == "image" and image.content[0].mime_type == "image/png"
    async with connect(f"{app['url']}/mcp/backends/", version) as every:
        names = {t.name for t in (await every.list_tools()).tools}
        assert {"search_tools", "everything__test_simple_text", "modern__test_simple_text",
                "older__test_simple_text"} <= names
        assert text(await every.call_tool("modern__test_simple_text", {})).startswith("This is a simple text")


def test_the_router_speaks_each_version_to_the_backends(app: dict[str, Any]) -> None:
    backends = {b["name"]: b for b in httpx.get(f"{app['url']}/v1/backends", headers=bearer("alice")).json()}
    assert {n: backends[n]["protocol"] for n in ("everything", "modern", "older")} == {
        "everything": "2025-11-25", "modern": "2026-07-28", "older": "2025-06-18"}
    for name in ("everything", "modern", "older"):  # and routes to each in it
        answer = httpx.post(f"{app['url']}/v1/query", headers=bearer("alice"), timeout=30, json={
            "question": "a simple text", "backend": name, "tool": "test_simple_text"})
        assert answer.status_code == 200 and answer.json()["answer"].startswith("This is a simple text"), answer.text


async def test_the_servers_requests_and_notifications_reach_the_client(app: dict[str, Any]) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[float] = []

    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(type="text", text="from the client"))

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"username": "ann", "email": "ann@example.test"})

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    for url in (f"{app['url']}/mcp/backends/everything/", f"{app['url']}/mcp/backends/"):
        prefix = "" if url.endswith("everything/") else "everything__"
        logs.clear()
        progress.clear()
        async with connect(url, "2025-11-25", sampling_callback=sample, elicitation_callback=elicit,
                           logging_callback=log) as client:
            sampled = await client.call_tool(f"{prefix}test_sampling", {"prompt": "hi"})
            elicited = await client.call_tool(f"{prefix}test_elicitation", {"message": "who?"})
            await client.call_tool(f"{prefix}test_tool_with_logging", {})
            await client.call_tool(f"{prefix}test_tool_with_progress", {}, progress_callback=on_progress)
        assert text(sampled) == "LLM response: from the client"
        assert '"username": "ann"' in text(elicited)
        assert [m.data for m in logs] == ["Tool execution started", "Tool processing data", "Tool execution completed"]
        assert progress == [0, 50, 100]


async def test_a_client_that_never_answers_the_server_hears_so_and_the_backend_stays_in_service(
        app: dict[str, Any]) -> None:
    async def never(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with connect(f"{app['url']}/mcp/backends/everything/", "2025-11-25", who="erin",
                       elicitation_callback=never) as erin:
        for _ in range(6):  # more than the failures in a row that would eject a backend
            with pytest.raises(MCPError, match="did not answer the server's request"):
                await erin.call_tool("test_elicitation", {"message": "who?"})
    async with connect(f"{app['url']}/mcp/backends/everything/", "2025-11-25") as alice:
        assert text(await alice.call_tool("test_simple_text", {})).startswith("This is a simple text")
    async with httpx.AsyncClient() as http:
        status = (await http.get(f"{app['url']}/v1/backends/everything", headers=bearer("alice"))).json()
    assert status["health"] == "healthy" and status["consecutive_failures"] == 0, status


async def test_each_client_gets_the_log_messages_of_its_own_level(app: dict[str, Any]) -> None:
    """The backend's session is shared by every client, and its server honours logging/setLevel: a client
    asking for errors only neither gets the info messages nor silences them for a client that wants them."""
    heard: dict[str, list[str]] = {"quiet": [], "chatty": []}

    def collect(who: str) -> Any:
        async def log(params: types.LoggingMessageNotificationParams) -> None:
            heard[who].append(str(params.data))

        return log

    url = f"{app['url']}/mcp/backends/everything/"
    async with connect(url, "2025-11-25", logging_callback=collect("quiet")) as quiet, \
            connect(url, "2025-11-25", logging_callback=collect("chatty")) as chatty:
        await chatty.set_logging_level("info")
        await quiet.set_logging_level("error")
        await quiet.call_tool("test_tool_with_logging", {})
        await chatty.call_tool("test_tool_with_logging", {})
    assert heard == {"quiet": [], "chatty": ["Tool execution started", "Tool processing data",
                                             "Tool execution completed"]}


async def test_the_servers_notifications_outside_requests_reach_the_clients_that_want_them(
        app: dict[str, Any]) -> None:
    heard: dict[str, list[str]] = {"subscriber": [], "other": []}

    def listener(who: str) -> Any:
        async def handle(message: Any) -> None:
            root = getattr(message, "root", message)
            if isinstance(root, types.ResourceUpdatedNotification):
                heard[who].append(f"updated {root.params.uri}")
            elif isinstance(root, types.ToolListChangedNotification):
                heard[who].append("tools changed")

        return handle

    url = f"{app['url']}/mcp/backends/everything/"
    async with connect(url, "2025-11-25", message_handler=listener("subscriber")) as subscriber, \
            connect(url, "2025-11-25", message_handler=listener("other")) as other:
        await other.list_tools()
        await subscriber.subscribe_resource("test://watched-resource")
        # The server's session is shared: a session that never subscribed ends nothing of another's.
        await other.unsubscribe_resource("test://watched-resource")
        await subscriber.call_tool("test_notify_changes", {})
        for _ in range(50):
            if len(heard["subscriber"]) == 2 and heard["other"]:
                break
            await asyncio.sleep(0.1)
    assert sorted(heard["subscriber"]) == ["tools changed", "updated test://watched-resource"]
    assert heard["other"] == ["tools changed"]


async def test_a_denied_tool_is_neither_listed_nor_callable(app: dict[str, Any]) -> None:
    async with connect(f"{app['url']}/mcp/backends/everything/", "2025-11-25", who="bob") as bob:
        assert [t.name for t in (await bob.list_tools()).tools] == ["test_simple_text"]
        with pytest.raises(MCPError, match="unknown tool 'test_image_content'"):
            await bob.call_tool("test_image_content", {})
        assert text(await bob.call_tool("test_simple_text", {})).startswith("This is a simple text")
    async with connect(f"{app['url']}/mcp/backends/", "2025-11-25", who="bob") as bob:
        assert {t.name for t in (await bob.list_tools()).tools} == {"search_tools", "everything__test_simple_text"}
        found = await bob.call_tool("search_tools", {"query": "image content"})
        assert [t["name"] for t in found.structured_content["tools"]] == ["everything__test_simple_text"]
    records = [json.loads(line) for line in app["audit"].read_text().splitlines()]
    assert any(r["principal"] == "bob" and r.get("tool") == "test_simple_text" and r.get("mode") == "gateway"
               and r.get("mcp_method") == "tools/call" and r["method"] == "POST" for r in records)


async def test_a_denied_resource_is_not_read_by_its_uri_nor_by_a_template(app: dict[str, Any]) -> None:
    async with connect(f"{app['url']}/mcp/backends/everything/", "2025-11-25", who="dave") as dave:
        assert "test://static-binary" not in {str(r.uri) for r in (await dave.list_resources()).resources}
        assert (await dave.read_resource("test://static-text")).contents
        # Part of the backend is denied, so a URI no listing names could be the denied one.
        for uri in ("test://static-binary", "test://template/7/data"):
            with pytest.raises(MCPError, match="unknown resource"):
                await dave.read_resource(uri)
        assert (await dave.list_resource_templates()).resource_templates == []
    async with connect(f"{app['url']}/mcp/backends/everything/", "2025-11-25") as alice:
        assert (await alice.read_resource("test://template/7/data")).contents


async def test_what_the_gateway_answers_for_one_caller_is_never_marked_for_a_shared_cache(app: dict[str, Any]) -> None:
    # the backend's "public" (it has one client, the router) was passed on with a listing filtered by policy
    async with connect(f"{app['url']}/mcp/backends/modern/", "2026-07-28") as alice:
        listed = await alice.list_tools()
        read = await alice.read_resource("test://static-text")
    assert (listed.cache_scope, read.cache_scope) == ("private", "private") and read.ttl_ms == 0
    async with Client(app["backends"]["modern"], mode="2026-07-28") as direct:
        assert (await direct.read_resource("test://static-text")).cache_scope == "public"


async def test_a_2026_client_discovers_the_backends_own_capabilities(app: dict[str, Any]) -> None:
    # server/discover was answered by the gateway's own server: no subscriptions where the backend offers them
    async with httpx2.AsyncClient(headers=bearer("alice"), timeout=30) as http, Client(streamable_http_client(
            f"{app['url']}/mcp/backends/everything/", http_client=http), mode="auto") as alice:  # probes discover
        assert alice.protocol_version in MODERN_PROTOCOL_VERSIONS
        resources = alice.server_capabilities.resources
    assert resources is not None and resources.subscribe is True


def test_a_backend_the_caller_may_not_reach_is_refused_before_any_session(app: dict[str, Any]) -> None:
    # A backend bob may not see is one that does not exist; carol may not name backends at all.
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    hidden = httpx.post(f"{app['url']}/mcp/backends/modern/", headers=bearer("bob"), json=hello)
    assert hidden.status_code == 404 and "no MCP backend named 'modern'" in hidden.text
    unknown = httpx.post(f"{app['url']}/mcp/backends/nowhere/", headers=bearer("bob"), json=hello)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == hidden.json()["error"]["type"]
    refused = httpx.post(f"{app['url']}/mcp/backends/", headers=bearer("carol"), json=hello)
    assert refused.status_code == 403 and "naming a backend" in refused.text


def test_a_session_belongs_to_the_caller_that_opened_it(app: dict[str, Any]) -> None:
    url = f"{app['url']}/mcp/backends/everything/"
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    opened = httpx.post(url, headers={**accept, **bearer("alice")}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    stolen = httpx.post(url, headers={**accept, **bearer("bob"), "mcp-session-id": session,
                                      "mcp-protocol-version": "2025-11-25"}, json=listing)
    assert stolen.status_code == 404 and "test_simple_text" not in stolen.text
    assert httpx.get(url, headers={**bearer("bob"), "mcp-session-id": session,
                                   "Accept": "text/event-stream"}).status_code == 404
    # Bob's own session id after alice's: the check and the SDK must not read different ones.
    own = httpx.post(url, headers={**accept, **bearer("bob")}, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    both = [*accept.items(), *bearer("bob").items(), ("mcp-protocol-version", "2025-11-25"),
            ("mcp-session-id", session), ("mcp-session-id", own.headers["mcp-session-id"])]
    smuggled = httpx.post(url, headers=both, json=listing)
    assert smuggled.status_code == 400 and "test_simple_text" not in smuggled.text
    assert httpx.request("DELETE", url, headers=[*bearer("bob").items(), ("mcp-session-id", session),
                                                 ("mcp-session-id", own.headers["mcp-session-id"])]).status_code == 400
    assert httpx.post(url, headers={**accept, **bearer("alice"), "mcp-session-id": session,
                                    "mcp-protocol-version": "2025-11-25"}, json=listing).status_code == 200
    assert httpx.get(f"{app['url']}/mcp/backends/nowhere/", headers=bearer("alice")).status_code == 404


async def test_a_client_that_cancels_cancels_the_backends_work(app: dict[str, Any]) -> None:
    async with connect(f"{app['url']}/mcp/backends/everything/", "2025-11-25") as client:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.call_tool("test_slow", {}), 1.0)

        async def cancelled() -> int:
            return int(text(await client.call_tool("cancelled_count", {})))

        for _ in range(50):
            if await cancelled() == 1:
                break
            await asyncio.sleep(0.1)
        assert await cancelled() == 1


async def test_a_read_only_tool_is_answered_by_a_copy_when_its_backend_is_down(app: dict[str, Any]) -> None:
    stop_process(app["primary"])  # the last test: primary stays down

    def down() -> bool:
        r = httpx.get(f"{app['url']}/v1/backends/primary", headers=bearer("alice"))
        return r.json()["health"] in ("down", "ejected")

    wait_for(down, timeout=30)
    async with connect(f"{app['url']}/mcp/backends/primary/", "2025-11-25") as client:
        answer = await client.call_tool("test_simple_text", {})
    assert text(answer) == "This is a simple text response for testing."
    records = [json.loads(line) for line in app["audit"].read_text().splitlines()]
    assert any(r.get("backend") == "primary" and r.get("served_by") == "everything" for r in records)
