"""What the gateway makes of an error relayed from a backend's actor, without Ray: the server's own JSON-RPC
error is passed on as the server's, whatever its data claims; only the actor's own error names a kind."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from types import SimpleNamespace as NS
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from actors.backends.relay import router_error_event
from deployments.caller import CURRENT
from deployments.gateway.aggregate import build_aggregate_server
from deployments.gateway.gate import Gate
from deployments.metrics import RouterMetrics
from router.errors import ErrorKind, RouterError
from router.values import Capability, Catalog


class Actor:
    """A backend's actor whose relay streams `events`."""

    def __init__(self, events: list[dict[str, Any]], delay_s: float = 0.0) -> None:
        self.events = events
        self.delay_s = delay_s
        self.sent = 0
        self.relay = self

    def options(self, **_: Any) -> Actor:
        return self

    def remote(self, *_: Any) -> AsyncIterator[Any]:
        self.sent += 1

        async def refs() -> AsyncIterator[Any]:
            await asyncio.sleep(self.delay_s)
            for event in self.events:
                ready = asyncio.get_running_loop().create_future()
                ready.set_result(event)
                yield ready
        return refs()


class Metrics(RouterMetrics):
    def __init__(self) -> None:
        super().__init__(False)
        self.outcomes: list[str] = []

    def gateway_request(self, backend: str, method: str, outcome: str, started: float) -> None:
        self.outcomes.append(outcome)


def gate(actors: dict[str, Actor], metrics: Metrics, catalogs: dict[str, Catalog] | None = None,
         charged: list[int] | None = None) -> Gate:
    async def charge(n: int) -> None:
        assert charged is not None
        charged.append(n)

    service = NS(settings=NS(resilience=NS(deadline_s=5)), metrics=metrics,
                 charge=lambda caller: None if charged is None else charge,
                 directory=NS(actors=actors, statuses=lambda: {}),
                 router=NS(view=lambda a: NS(catalogs=catalogs or {})))
    return Gate(service)  # type: ignore[arg-type]


def caller(failed: list[RouterError]) -> Any:
    access = NS(deadline=lambda *_: 5.0, principal=NS(anonymous=True, name="anonymous"),
                policy=NS(backend_override=True))
    return NS(access=access, note=lambda **_: None, fail=failed.append)


CTX = NS(params={}, protocol_version="2025-06-18", request=NS(headers={}))


async def relay(events: list[dict[str, Any]]) -> tuple[MCPError, list[str], list[RouterError], Actor]:
    actor, metrics, failed = Actor(events), Metrics(), []
    with pytest.raises(MCPError) as raised:
        await gate({"b": actor}, metrics).relay(CTX, caller(failed), "b", "resources/read", {"uri": "x://y"})
    return raised.value, metrics.outcomes, failed, actor


@pytest.mark.parametrize("data", [{"kind": "backend_failed"}, {"kind": "made-up"}, {"kind": {"nested": 1}}, None])
async def test_a_servers_own_error_is_the_servers_whatever_its_data_claims(data: Any) -> None:
    error, outcomes, failed, _ = await relay([{"event": "error", "code": -32000, "message": "no", "data": data}])
    assert (error.error.code, error.error.message, error.error.data) == (-32000, "no", data)
    assert outcomes == ["error"] and failed == []  # an answer: no failover, no router failure in the audit


async def test_the_actors_own_error_names_its_kind() -> None:
    error, outcomes, failed, _ = await relay([router_error_event(ErrorKind.BACKEND_TIMEOUT, "no answer within 5 s")])
    assert error.error.data == {"kind": "backend_timeout"} and outcomes == ["backend_timeout"]
    assert [f.kind for f in failed] == [ErrorKind.BACKEND_TIMEOUT]


async def test_each_copy_tried_is_charged_and_all_share_the_requests_deadline() -> None:
    tool = Capability(backend="b", name="lookup", read_only=True)
    catalogs = {b: Catalog(backend=b, version="1", description="", capabilities=(replace(tool, backend=b),))
                for b in ("b", "c")}
    down = Actor([router_error_event(ErrorKind.BACKEND_UNAVAILABLE, "down")], delay_s=0.5)
    up = Actor([{"event": "result", "result": {"content": []}}])
    seen: list[float] = []
    up.remote = lambda *args: seen.append(args[2]) or Actor.remote(up)  # type: ignore[method-assign]
    charged: list[int] = []
    result = await gate({"b": down, "c": up}, Metrics(), catalogs, charged).relay(
        CTX, caller([]), "b", "tools/call", {"arguments": {}}, tool)
    assert result == {"content": []} and charged == [1, 1]
    assert 4.0 < seen[0] < 4.6  # what the first copy left of the five seconds, not five more


@pytest.mark.parametrize("method", ["resources/read", "tools/list", "completion/complete"])
async def test_a_relayed_request_is_charged_whatever_its_method(method: str) -> None:
    # A listing or a read costs the backend work as a call does: a caller over its budget is refused.
    charged: list[int] = []
    result = await gate({"b": Actor([{"event": "result", "result": {}}])}, Metrics(), charged=charged).relay(
        CTX, caller([]), "b", method, {})
    assert result == {} and charged == [1]


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
async def test_a_tool_call_whose_arguments_json_cannot_carry_is_refused_not_sent(number: float) -> None:
    # The MCP SDK reads NaN and Infinity; passed on, the server would have been sent null in their place.
    actor, failed = Actor([{"event": "result", "result": {"content": []}}]), []
    with pytest.raises(MCPError) as raised:
        await gate({"b": actor}, Metrics()).relay(CTX, caller(failed), "b", "tools/call",
                                                  {"name": "t", "arguments": {"n": [number]}})
    assert raised.value.error.code == -32602 and "NaN or an infinity" in raised.value.error.message
    assert actor.sent == 0 and [f.kind for f in failed] == [ErrorKind.INVALID_REQUEST]


@pytest.mark.parametrize(("method", "params"), [
    ("prompts/get", {"name": "p", "arguments": {"a": "\ud800"}}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "\udfff"}}),
    ("resources/read", {"uri": "file:///\ud800"}),
])
async def test_any_relayed_request_with_a_lone_surrogate_is_refused_not_sent(
        method: str, params: dict[str, Any]) -> None:
    # The SDK's newer wire path reads "\ud800" into a str; its stdio client, writing it, ends the backend's session.
    actor, failed = Actor([{"event": "result", "result": {}}]), []
    with pytest.raises(MCPError) as raised:
        await gate({"b": actor}, Metrics()).relay(CTX, caller(failed), "b", method, params)
    assert raised.value.error.code == -32602 and "lone UTF-16 surrogate in params" in raised.value.error.message
    assert actor.sent == 0 and [f.kind for f in failed] == [ErrorKind.INVALID_REQUEST]


async def test_the_aggregate_servers_tool_names_are_ones_function_calling_apis_accept_and_each_is_callable() -> None:
    flow = Capability(backend="flowise", name="Customer Support (1a2b)", kind="flow")
    long_tool = Capability(backend="tools", name="t" * 80)
    catalogs = {c.backend: Catalog(backend=c.backend, version="1", description="", capabilities=(c,))
                for c in (flow, long_tool)}
    g = gate({}, Metrics(), catalogs)
    token = CURRENT.set(caller([]))  # type: ignore[arg-type]
    try:
        server = build_aggregate_server(g)
        listed = await server.get_request_handler("tools/list").handler(CTX, None)  # type: ignore[union-attr]
        names = [t["name"] for t in listed["tools"]]
        assert names[1:] == ["flowise__Customer_Support_1a2b_", "tools__" + "t" * 57]
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names)
        asked: list[Any] = []

        async def query(request: Any, who: Any) -> Any:
            asked.append((request.backend, request.tool))
            return NS(answer="flow answer")

        g.service.query = query  # type: ignore[attr-defined]
        call = server.get_request_handler("tools/call").handler  # type: ignore[union-attr]
        answered = await call(CTX, NS(name="flowise__Customer_Support_1a2b_", arguments={"question": "hi"}))
        assert answered["content"][0]["text"] == "flow answer" and asked == [("flowise", "Customer Support (1a2b)")]
        with pytest.raises(MCPError, match="unknown tool"):
            await call(CTX, NS(name="flowise__Customer Support (1a2b)", arguments={}))
    finally:
        CURRENT.reset(token)


async def test_one_principal_holds_a_bounded_share_of_a_backends_subscriptions_over_all_its_sessions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # one key filled the backend's 10,000 subscriptions, every caller's, and nobody else could subscribe
    monkeypatch.setattr("deployments.gateway.gate._MAX_SUBSCRIBED_PER_PRINCIPAL", 3)
    g, failed = gate({}, Metrics()), []
    mallory, alice = caller(failed), caller(failed)
    alice.access.principal = NS(anonymous=False, name="alice")
    for n, session in enumerate(("m1", "m1", "m2")):
        ctx = NS(session=None, request=NS(headers={"mcp-session-id": session}))
        token = CURRENT.set(mallory)
        try:
            held = g.seen(ctx, "b")  # type: ignore[arg-type]
            g.may_subscribe(mallory, "b", held, f"x://{n}")
            held.add(f"x://{n}")
        finally:
            CURRENT.reset(token)
    with pytest.raises(MCPError) as refused:
        g.may_subscribe(mallory, "b", set(), "x://more")
    assert refused.value.error.code == -32603 and refused.value.error.data == {"kind": "limit_exceeded"}
    g.may_subscribe(mallory, "b", {"x://0"}, "x://0")  # held already: no more held
    token = CURRENT.set(alice)
    try:
        g.may_subscribe(alice, "b", g.seen(NS(session=None, request=NS(headers={"mcp-session-id": "a1"})), "b"),
                        "x://0")  # type: ignore[arg-type]
    finally:
        CURRENT.reset(token)
