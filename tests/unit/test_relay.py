"""The backend's one MCP session relays every gateway client's requests: resource subscriptions (the server hears
the first subscribe and the last unsubscribe, and one session's unsubscribe never ends another's), the server's
messages to the request they belong to, and a timeout blamed on whoever made the server wait."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from actors.backends.relay import SUBSCRIBER, ClientDidNotAnswer, Relay, RelayHub

URI = "notes://x"


class Server:
    """The part of an MCP client session the relay uses for subscriptions, recording what the server is sent."""

    protocol_version = "2025-11-25"

    def __init__(self, refuse: bool = False) -> None:
        self.sent: list[tuple[str, str]] = []
        self.refuse = refuse

    async def subscribe_resource(self, uri: str) -> types.EmptyResult:
        self.sent.append(("subscribe", uri))
        if self.refuse:
            raise MCPError(code=types.INVALID_PARAMS, message="no such resource")
        return types.EmptyResult()

    async def unsubscribe_resource(self, uri: str) -> types.EmptyResult:
        self.sent.append(("unsubscribe", uri))
        return types.EmptyResult()


async def ask(hub: RelayHub, server: Server, method: str, session: str) -> dict[str, Any]:
    events = [e async for e in hub.run(server, method, {"uri": URI, SUBSCRIBER: session}, 5.0)]  # type: ignore[arg-type]
    return events[-1]


async def test_an_unsubscribe_from_a_session_that_never_subscribed_leaves_the_subscription_in_place() -> None:
    hub, server = RelayHub("notes", lambda: 0), Server()
    assert await ask(hub, server, "resources/subscribe", "alice") == {"event": "result", "result": {}}
    assert await ask(hub, server, "resources/unsubscribe", "bob") == {"event": "result", "result": {}}
    assert server.sent == [("subscribe", URI)]


async def test_the_server_hears_the_first_subscribe_and_the_last_unsubscribe() -> None:
    hub, server = RelayHub("notes", lambda: 0), Server()
    for session in ("alice", "bob", "alice"):
        await ask(hub, server, "resources/subscribe", session)
    await ask(hub, server, "resources/unsubscribe", "alice")
    assert server.sent == [("subscribe", URI)]  # bob still wants it
    await ask(hub, server, "resources/unsubscribe", "bob")
    await ask(hub, server, "resources/unsubscribe", "bob")
    assert server.sent == [("subscribe", URI), ("unsubscribe", URI)]
    await ask(hub, server, "resources/subscribe", "carol")
    assert server.sent[-1] == ("subscribe", URI)


async def test_a_new_session_with_the_server_subscribes_again_to_what_clients_still_hold() -> None:
    # every gateway subscription died silently at a reconnect: clients believed they were subscribed
    hub, server = RelayHub("notes", lambda: 0), Server()
    await ask(hub, server, "resources/subscribe", "carol")
    await ask(hub, server, "resources/subscribe", "dave")
    again = Server()  # connected again: the server's new session holds no subscription
    await hub.resubscribe(again)  # type: ignore[arg-type]
    assert again.sent == [("subscribe", URI)]
    await ask(hub, again, "resources/unsubscribe", "carol")
    await ask(hub, again, "resources/unsubscribe", "dave")
    assert again.sent[-1] == ("unsubscribe", URI)
    await ask(hub, again, "resources/subscribe", "erin")
    refusing = Server(refuse=True)  # a resource the new server no longer has: let go, not held forever
    await hub.resubscribe(refusing)  # type: ignore[arg-type]
    assert hub._subscribers == {}


async def test_a_2026_backend_offers_no_subscription_it_would_never_deliver() -> None:
    from actors.backends.relay import identity

    modern = Server()
    modern.protocol_version = "2026-07-28"
    refused = await ask(RelayHub("notes", lambda: 0), modern, "resources/subscribe", "alice")
    assert refused["event"] == "error" and "2026-07-28" in refused["message"] and modern.sent == []
    modern.server_capabilities = types.ServerCapabilities(  # type: ignore[attr-defined]
        resources=types.ResourcesCapability(subscribe=True, list_changed=True))
    modern.server_info, modern.instructions = None, None  # type: ignore[attr-defined]
    assert identity(modern)["capabilities"]["resources"] == {"listChanged": True}  # type: ignore[arg-type]


async def test_a_subscribe_the_server_refused_holds_nothing() -> None:
    hub, server = RelayHub("notes", lambda: 0), Server(refuse=True)
    refused = await ask(hub, server, "resources/subscribe", "alice")
    assert refused["event"] == "error" and refused["message"] == "no such resource"
    server.refuse = False
    assert (await ask(hub, server, "resources/subscribe", "bob"))["event"] == "result"
    assert server.sent == [("subscribe", URI), ("subscribe", URI)]  # bob's went to the server: alice held none


async def test_subscriptions_hold_only_resources_someone_is_subscribed_to_and_a_bounded_number(
        monkeypatch: Any) -> None:
    monkeypatch.setattr("actors.backends.relay._MAX_SUBSCRIBED", 2)
    hub, server = RelayHub("notes", lambda: 0), Server()

    async def asked(method: str, uri: str, session: str = "alice") -> dict[str, Any]:
        return [e async for e in hub.run(server, method, {"uri": uri, SUBSCRIBER: session}, 5.0)][-1]  # type: ignore[arg-type]

    for n in range(50):  # unsubscribing what nobody holds, or a refused subscribe, leaves nothing behind
        await asked("resources/unsubscribe", f"notes://{n}")
    server.refuse = True
    await asked("resources/subscribe", "notes://refused")
    server.refuse = False
    assert hub._subscribers == {}
    await asked("resources/subscribe", "notes://a")
    await asked("resources/subscribe", "notes://b")
    over = await asked("resources/subscribe", "notes://c")
    assert over["data"] == {"kind": "limit_exceeded"} and "2 resources of backend 'notes'" in over["message"]
    assert (await asked("resources/subscribe", "notes://a", "bob"))["event"] == "result"  # held already: fine
    await asked("resources/unsubscribe", "notes://b")
    assert (await asked("resources/subscribe", "notes://c"))["event"] == "result"


async def test_a_server_message_tied_to_no_request_reaches_the_lone_relayed_request_only_over_stdio() -> None:
    """Over HTTP the SDK ties every message that belongs to a request: one it does not came on the server's
    standing stream (another caller's earlier call, background work), and no gateway client may read it."""
    message = types.LoggingMessageNotificationParams(level="info", data="about someone else's call")
    for over_stdio in (True, False):
        hub = RelayHub("notes", lambda: 1, untied_to_lone=over_stdio)
        relay = Relay()
        hub.active[relay.id] = relay
        await hub.log(message)
        assert relay.events.qsize() == (1 if over_stdio else 0)


class Eliciting:
    """A server whose tool asks the client (through the hub) and then takes `after_s` more to answer."""

    protocol_version = "2025-11-25"

    def __init__(self, hub: RelayHub, after_s: float) -> None:
        self.hub, self.after_s = hub, after_s

    async def call_tool(self, name: str, arguments: Any, **_: Any) -> types.CallToolResult:
        await self.hub.elicitation(None, types.ElicitRequestFormParams(  # type: ignore[arg-type]
            message="which one?", requested_schema={"type": "object", "properties": {}}))
        await asyncio.sleep(self.after_s)
        return types.CallToolResult(content=[])


async def test_a_timeout_after_the_client_took_its_time_to_answer_the_server_is_the_clients() -> None:
    for client_s, blamed in ((0.5, "client"), (0.0, "server")):
        hub = RelayHub("notes", lambda: 1)
        run = hub.run(Eliciting(hub, after_s=5), "tools/call", {"name": "t"}, 1.0)  # type: ignore[arg-type]
        relay_id = (await anext(run))["id"]
        asked = await anext(run)
        assert asked["event"] == "request" and asked["method"] == "elicitation/create"
        await asyncio.sleep(client_s)  # half of the request's second, then the client answers
        hub.answer(relay_id, asked["id"], {"result": {"action": "decline"}})
        with pytest.raises(TimeoutError) as info:
            await anext(run)
        assert (type(info.value) is ClientDidNotAnswer) == (blamed == "client"), client_s


async def test_a_server_request_still_waiting_when_its_relay_ends_is_answered_with_an_error() -> None:
    """The SDK handles a server's request in a task of its own, which the relay's end does not cancel."""
    hub = RelayHub("notes", lambda: 1)
    asked: list[asyncio.Task[Any]] = []

    class AsksInItsOwnTask:
        protocol_version = "2025-11-25"

        async def call_tool(self, name: str, arguments: Any, **_: Any) -> types.CallToolResult:
            asked.append(asyncio.create_task(hub.elicitation(None, types.ElicitRequestFormParams(  # type: ignore[arg-type]
                message="which one?", requested_schema={"type": "object", "properties": {}}))))
            await asyncio.sleep(60)
            return types.CallToolResult(content=[])

    run = hub.run(AsksInItsOwnTask(), "tools/call", {"name": "t"}, 30.0)  # type: ignore[arg-type]
    await anext(run)
    assert (await anext(run))["event"] == "request"
    await run.aclose()  # the gateway's client is gone
    answer = await asyncio.wait_for(asked[0], 1)
    assert isinstance(answer, types.ErrorData) and "has ended" in answer.message
