"""The gateway's record of its sessions, without Ray: whose each is, how many one principal may hold open, and
that a session the SDK ended (DELETE, idle timeout, crash) leaves nothing behind."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS
from typing import Any

import pytest

import deployments.gateway as gateway_module
from deployments.caller import CURRENT, Caller
from deployments.gateway import Gateway
from router.security.identity import Principal
from router.security.policy import Access
from router.settings import Policy, RouterSettings


class SessionApp:
    """Stands in for the SDK's streamable-HTTP app: opens a session per request without one, ends it on DELETE."""

    def __init__(self) -> None:
        self.open: dict[str, None] = {}
        self.served: list[str] = []
        self.count = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers_in = dict(scope["headers"])
        session = headers_in.get(b"mcp-session-id")
        headers = []
        if headers_in.get(b"mcp-protocol-version") == b"2026-07-28":  # a modern request opens no session (dict: last)
            session = b"-"
        elif session is None:
            self.count += 1
            session = f"s{self.count}".encode()
            self.open[session.decode()] = None
            headers.append((b"mcp-session-id", session))
        elif scope["method"] == "DELETE":
            self.open.pop(session.decode(), None)
        self.served.append(session.decode())
        await asyncio.sleep(0.01)  # the SDK starts the session's task before it answers
        status = 400 if b"x-bad" in headers_in else 200  # the SDK names a session it then discards
        if status == 400:
            self.open.pop(session.decode(), None)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})


def gateway(app: SessionApp) -> Gateway:
    g = Gateway(NS(directory=NS(actors={})), RouterSettings())  # type: ignore[arg-type]
    g._servers["b"] = NS(session_manager=NS(_server_instances=app.open))  # type: ignore[assignment]
    return g


async def request(g: Gateway, app: SessionApp, who: str, session: str | None = None,
                  method: str = "POST", backend: str = "b", version: str | None = None) -> int:
    scope = {"type": "http", "method": method, "path": "/",
             "headers": [(b"mcp-session-id", session.encode())] if session else []}
    for v in (version or "").split(","):  # "a,b": the header sent twice
        if v:
            scope["headers"].append((b"mcp-protocol-version", v.encode()))
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    token = CURRENT.set(Caller(Access(Principal(who, "default", "api_key"), Policy())))
    try:
        await g._owned(backend, app, scope, None, send)
    finally:
        CURRENT.reset(token)
    return int(sent[0]["status"])


async def test_one_principal_holds_at_most_its_own_share_of_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_module, "_MAX_PER_PRINCIPAL", 3)
    app = SessionApp()
    g = gateway(app)
    assert [await request(g, app, "mallory") for _ in range(4)] == [200, 200, 200, 429]
    assert await request(g, app, "alice") == 200  # another principal is not held to mallory's count
    assert await request(g, app, "mallory", "s1", "DELETE") == 200
    assert await request(g, app, "mallory") == 200  # one closed, one may open
    app.open.pop("s2")  # the SDK ended one after its idle timeout, telling nobody
    assert await request(g, app, "mallory") == 200
    assert await request(g, app, "mallory", "s2") == 404
    assert await request(g, app, "mallory") == 429
    assert await request(g, app, "mallory", version="2026-07-28") == 200  # opens no session: not counted
    # The SDK reads the first of two version headers: a handshake version, so it would open a session.
    assert await request(g, app, "mallory", version="2025-06-18,2026-07-28") == 429


async def test_openings_sent_together_each_count_against_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_module, "_MAX_PER_PRINCIPAL", 3)
    app = SessionApp()
    g = gateway(app)
    statuses = await asyncio.gather(*(request(g, app, "mallory") for _ in range(6)))
    assert sorted(statuses) == [200, 200, 200, 429, 429, 429] and g._held["mallory"] == 3


async def test_an_opening_request_the_sdk_refused_holds_no_session() -> None:
    app = SessionApp()
    g = gateway(app)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"x-bad", b"1")]}
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    token = CURRENT.set(Caller(Access(Principal("alice", "default", "api_key"), Policy())))
    try:
        await g._owned("b", app, scope, None, send)
    finally:
        CURRENT.reset(token)
    assert statuses == [400] and g._owners == {} and not g._held


async def test_a_session_is_served_only_on_the_backend_it_was_opened_on() -> None:
    app = SessionApp()
    g = gateway(app)
    g._servers["c"] = g._servers["b"]
    assert await request(g, app, "alice") == 200
    assert await request(g, app, "alice", "s1", backend="c") == 404  # and it is still alice's on b
    assert await request(g, app, "alice", "s1") == 200 and "s1" in g._owners


async def test_an_ended_session_is_forgotten_with_its_subscriptions_released() -> None:
    app = SessionApp()
    g = gateway(app)
    assert await request(g, app, "alice") == 200
    released: list[tuple[str, str, list[str]]] = []

    async def release(backend: str, session: str, uris: list[str]) -> None:
        released.append((backend, session, uris))

    g.gate._release = release  # type: ignore[method-assign]
    g.gate.sessions["b"] = {"s1": (None, {"notes://x"})}
    g.gate.levels["s1"] = "info"
    assert await request(g, app, "alice", "s1", "DELETE") == 200
    await asyncio.sleep(0)
    assert released == [("b", "s1", ["notes://x"])] and g.gate.sessions["b"] == {} and g.gate.levels == {}
    assert "s1" not in g._owners and not g._held


async def test_a_broadcast_skips_and_forgets_a_session_the_sdk_ended() -> None:
    app = SessionApp()
    g = gateway(app)
    g.gate.alive = g._alive
    told: list[str] = []

    class Session:
        def __init__(self, name: str) -> None:
            self.name = name

        async def send_notification(self, message: Any) -> None:
            told.append(self.name)

    app.open["live"] = None
    g.gate.sessions["b"] = {"gone": (Session("gone"), set()), "live": (Session("live"), set())}
    await g.gate.broadcast("b", {"method": "notifications/tools/list_changed"})
    assert told == ["live"] and list(g.gate.sessions["b"]) == ["live"]
