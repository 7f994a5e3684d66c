"""Relaying a gateway client's MCP requests over a backend's held session, and the server's requests back.

The gateway (`deployments.gateway`) lets MCP clients reach a backend through the router. Each request it
forwards runs here, in the backend's actor, as an async generator (a Ray streaming call) of events:

    {"event": "relay", "id": ...}                                first: where to send answers
    {"event": "progress", "progress": 1, "total": 3, "message": ...}
    {"event": "log", "params": {...}}                            the server's notifications/message
    {"event": "request", "id": 1, "method": "sampling/createMessage", "params": {...}}
    {"event": "result", "result": {...}}                         last: the server's result (wire form)
    {"event": "error", "code": -32602, "message": ..., "data": ...}   or last: its JSON-RPC error

A server's own request (sampling, elicitation, roots) is answered by the gateway's client through
`RelayHub.answer`. The server's requests and log messages belong to the relayed request that was in flight
when they came: the SDK runs the callbacks in that request's context over HTTP; over stdio, where nothing
ties them to a request, to the only relayed request in flight (with several, a server request is refused).
Requests go through the SDK client's typed calls, so each side speaks its own protocol version: a
2026-07-28 server's input-required rounds are driven into the same callbacks as a 2025 server's requests.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from router.errors import ErrorKind

log = logging.getLogger("mcp_router.relay")

# What the gateway forwards (ping is answered by the gateway itself).
RELAYED = ("tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list", "resources/templates/list",
           "resources/read", "resources/subscribe", "resources/unsubscribe", "completion/complete",
           "logging/setLevel")
FINAL = ("result", "error")
# In a relayed resources/subscribe or unsubscribe's params: the gateway session asking (removed before sending).
SUBSCRIBER = "mcp-router/subscriber"
_WATCH_BACKLOG = 64
_MAX_SUBSCRIBERS = 10_000  # per resource; past it the earliest are forgotten (sessions that left unsubscribed)
_MAX_SUBSCRIBED = 10_000  # resources subscribed at once through the backend's session; past it a new one is refused
_CLIENT_SHARE = 0.1  # of a relayed request's time, answering the server's requests: past it a timeout is the client's
_CURRENT: ContextVar[Relay | None] = ContextVar("mcp_router_relay", default=None)


class ClientDidNotAnswer(TimeoutError):
    """The relayed request ran out of time while the server waited for the client to answer its own request
    (sampling, elicitation, roots): the client's doing, not the backend's."""


@dataclass
class Relay:
    """One relayed request: the events for the gateway, and the server's requests awaiting its answers."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    events: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    waiting: dict[int, tuple[str, asyncio.Future[dict[str, Any]]]] = field(default_factory=dict)  # method, answer
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    client_s: float = 0.0  # the time the server spent waiting for the client's answers
    asked: str | None = None  # the last server request the client was asked

    async def ask(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Send the server's request to the gateway's client; its answer: {"result": ...} or {"error": ...}."""
        rid = next(self.ids)
        answer = asyncio.get_running_loop().create_future()
        self.waiting[rid] = (method, answer)
        self.asked = method
        self.events.put_nowait({"event": "request", "id": rid, "method": method, "params": dict(params or {})})
        started = time.monotonic()
        try:
            return await answer
        finally:
            self.waiting.pop(rid, None)
            self.client_s += time.monotonic() - started

    def end(self) -> None:
        """The relayed request is over: its server's requests still waiting are answered with an error, not
        left waiting for the life of the session."""
        for method, answer in self.waiting.values():
            if not answer.done():
                answer.set_result({"error": {"code": types.INTERNAL_ERROR,
                                             "message": f"{method}: the request it was asked in has ended"}})

    def unanswered(self) -> str | None:
        """The method of a server request still waiting for the client's answer, if any."""
        return next((method for method, _ in self.waiting.values()), None)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.put_nowait({"event": "progress", "progress": progress, "total": total, "message": message})


class RelayHub:
    """A backend's relayed requests in flight, and the session callbacks that reach them."""

    def __init__(self, backend: str, in_flight: Callable[[], int], untied_to_lone: bool = True) -> None:
        """`in_flight`: the requests the backend's session carries now, relayed and routed alike;
        `untied_to_lone`: a server message not tied to a request goes to the one relayed request in flight (over
        stdio, where nothing ties them; over HTTP the SDK ties every message that belongs to a request)."""
        self.backend = backend
        self.active: dict[str, Relay] = {}
        self._in_flight = in_flight
        self._untied_to_lone = untied_to_lone
        self._watchers: set[asyncio.Queue[dict[str, Any]]] = set()
        # The server's session is every gateway session's: per resource, the sessions subscribed to it.
        self._subscribers: dict[str, dict[str, None]] = {}

    def _current(self) -> Relay | None:
        relay = _CURRENT.get()
        if relay is not None:
            return relay
        # Over stdio: the one request in flight, when it is relayed (never another caller's routed call).
        lone = self._untied_to_lone and len(self.active) == 1 and self._in_flight() == 1
        return next(iter(self.active.values())) if lone else None

    async def _ask(self, method: str, params: Any, result: type[Any]) -> Any:
        relay = self._current()
        if relay is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{method}: the router answers this only "
                                   "for a client connected through its gateway")
        answer = await relay.ask(method, params.model_dump(by_alias=True, mode="json", exclude_none=True)
                                 if params is not None else None)
        if "error" in answer:
            return types.ErrorData.model_validate(answer["error"])
        return result.model_validate(answer["result"])

    async def sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        kind = types.CreateMessageResultWithTools if (params.tools or params.tool_choice) else types.CreateMessageResult
        return await self._ask("sampling/createMessage", params, kind)

    async def elicitation(self, context: ClientRequestContext,
                          params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        return await self._ask("elicitation/create", params, types.ElicitResult)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        return await self._ask("roots/list", None, types.ListRootsResult)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        relay = self._current()
        if relay is not None:
            relay.events.put_nowait({"event": "log",
                                     "params": params.model_dump(by_alias=True, mode="json", exclude_none=True)})

    def notify(self, notification: Any) -> None:
        """A notification outside any request (a list changed, a subscribed resource was updated): to every
        gateway replica watching (a slow one loses the oldest: a change notice is worth only its latest)."""
        message = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        for queue in self._watchers:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(message)

    async def watch(self) -> AsyncIterator[dict[str, Any]]:
        """The server's notifications outside requests, as they come, for as long as the watcher listens."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=_WATCH_BACKLOG)
        self._watchers.add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._watchers.discard(queue)

    def answer(self, relay_id: str, request_id: int, answer: dict[str, Any]) -> bool:
        """The gateway's client answered a server request; False when the request is no longer waiting."""
        relay = self.active.get(relay_id)
        future = relay.waiting[request_id][1] if relay is not None and request_id in relay.waiting else None
        if future is None or future.done():
            return False
        future.set_result(answer)
        return True

    async def run(self, client: Client, method: str, params: Mapping[str, Any], timeout_s: float,
                  log_level: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Relay one request within `timeout_s`; `log_level`: the least severe log message the client wants
        during it (a 2026-07-28 server sends none unless asked). The server's JSON-RPC error is its answer
        (the last event); a lost connection or the timeout propagates (`TimeoutError`, `MCPError`
        CONNECTION_CLOSED or REQUEST_TIMEOUT, a transport error) for the caller to translate."""
        session = params.get(SUBSCRIBER) if method in ("resources/subscribe", "resources/unsubscribe") else None
        if session is not None:
            params = {k: v for k, v in params.items() if k != SUBSCRIBER}
            uri = str(params.get("uri"))
            if method == "resources/subscribe" and uri not in self._subscribers \
                    and len(self._subscribers) >= _MAX_SUBSCRIBED:
                yield router_error_event(ErrorKind.LIMIT_EXCEEDED, f"the router holds subscriptions to "
                                         f"{_MAX_SUBSCRIBED} resources of backend {self.backend!r}, its limit")
                return
            if not self._server_hears(method, uri, str(session)):
                yield {"event": "result", "result": {}}  # another session holds it still, or this one never did
                return
        relay = Relay()
        self.active[relay.id] = relay

        async def work() -> dict[str, Any]:
            _CURRENT.set(relay)  # this task's own context: the callbacks run in it
            try:
                async with asyncio.timeout(timeout_s):
                    result = await _send(client, method, params, relay, log_level)
            except TimeoutError:
                # The server was waiting on the client, not the client on the server: or the client's answers took
                # a share of the time a server's own slowness would not (the rest was too short to count).
                asked = relay.unanswered() or (relay.asked if relay.client_s > _CLIENT_SHARE * timeout_s else None)
                if asked:
                    raise ClientDidNotAnswer(asked) from None
                raise
            except MCPError as exc:
                if exc.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT) or session_gone(exc):
                    raise
                return {"event": "error", **exc.error.model_dump(mode="json", exclude_none=True)}
            return {"event": "result", "result": result}

        task = asyncio.create_task(work(), name=f"relay-{self.backend}-{method}")
        answered = False
        try:
            yield {"event": "relay", "id": relay.id}
            while True:
                getter = asyncio.ensure_future(relay.events.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                    continue
                getter.cancel()
                while not relay.events.empty():  # what the server sent before its answer goes first
                    yield relay.events.get_nowait()
                answered = task.result()["event"] == "result"  # not the server's error
                yield task.result()
                return
        finally:
            task.cancel()
            self.active.pop(relay.id, None)
            relay.end()
            if session is not None and method == "resources/subscribe" and not answered:
                self._leave(str(params.get("uri")), str(session))  # the server refused it: nothing held

    async def resubscribe(self, client: Client) -> None:
        """The router's session with the server is new and holds no subscription: the resources gateway sessions
        still hold are subscribed again (a 2026-07-28 server takes none: `identity`); one the server now
        refuses is let go, its holders told nothing more of it."""
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self._subscribers.clear()
            return
        for uri in list(self._subscribers):
            try:
                await client.subscribe_resource(uri)
            except Exception as exc:  # refused, or the session ended again: its next start tries once more
                log.info("backend %s: subscribing to %s again failed: %r", self.backend, uri, exc)
                if not isinstance(exc, MCPError) or exc.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT):
                    return
                self._subscribers.pop(uri, None)

    def _server_hears(self, method: str, uri: str, session: str) -> bool:
        """Whether a gateway session's subscribe or unsubscribe goes to the server. Its session is every gateway
        session's, so the first session subscribing to a resource subscribes it, and only the last one leaving
        unsubscribes it: one session's unsubscribe never ends another's subscription."""
        if method == "resources/subscribe":
            holders = self._subscribers.setdefault(uri, {})
            first = not holders
            holders[session] = None
            while len(holders) > _MAX_SUBSCRIBERS:
                del holders[next(iter(holders))]
            return first
        return self._leave(uri, session)

    def _leave(self, uri: str, session: str) -> bool:
        """Forget a session's subscription; whether it was the last one (the resource is then forgotten too)."""
        holders = self._subscribers.get(uri)
        if holders is None or session not in holders:
            return False
        del holders[session]
        if holders:
            return False
        del self._subscribers[uri]
        return True


def router_error_event(kind: ErrorKind, message: str) -> dict[str, Any]:
    """The router's own error as a relayed request's last event (a JSON-RPC internal error naming its kind)."""
    return {"event": "error", "code": -32603, "message": message, "data": {"kind": kind.value}, "router": True}


def session_gone(exc: MCPError) -> bool:
    """The error an HTTP server's 404 for the router's session becomes: the server restarted and forgot it
    (the SDK's client says "Session terminated"; a server's own body may say "session not found")."""
    message = exc.error.message.lower()
    return exc.code == types.INVALID_REQUEST and "session" in message and ("terminated" in message
                                                                          or "not found" in message)


def identity(client: Client) -> dict[str, Any]:
    """What the backend told the router about itself, for the gateway's handshake with its clients."""
    caps, info = client.server_capabilities, client.server_info
    offered = caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps else {}
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS and isinstance(offered.get("resources"), dict):
        offered["resources"].pop("subscribe", None)  # not relayed from a 2026-07-28 server (`_send`)
    return {"protocolVersion": client.protocol_version,
            "capabilities": offered,
            "serverInfo": info.model_dump(by_alias=True, mode="json", exclude_none=True) if info else None,
            "instructions": client.instructions}


async def _send(client: Client, method: str, p: Mapping[str, Any], relay: Relay,
                log_level: str | None) -> dict[str, Any]:
    modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
    cursor = p.get("cursor")
    meta: Any = {LOG_LEVEL_META_KEY: log_level} if modern and log_level else None
    result: Any
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 2025 requests the SDK marks deprecated are what 2025 servers speak
        if method == "tools/list":
            result = await client.list_tools(cursor=cursor)
        elif method == "tools/call":
            result = await client.call_tool(p["name"], p.get("arguments"), progress_callback=relay.progress,
                                            meta=meta)
        elif method == "prompts/list":
            result = await client.list_prompts(cursor=cursor)
        elif method == "prompts/get":
            result = await client.get_prompt(p["name"], p.get("arguments"), meta=meta)
        elif method == "resources/list":
            result = await client.list_resources(cursor=cursor)
        elif method == "resources/templates/list":
            result = await client.list_resource_templates(cursor=cursor)
        elif method == "resources/read":
            result = await client.read_resource(p["uri"], meta=meta)
        elif method == "completion/complete":
            ref = p["ref"]
            kind = types.PromptReference if ref.get("type") == "ref/prompt" else types.ResourceTemplateReference
            context = (p.get("context") or {}).get("arguments")
            result = await client.complete(kind.model_validate(ref), dict(p["argument"]), context)
        elif modern and method == "resources/subscribe":
            # 2026-07-28 has no subscribe: a resource's updates come on a `subscriptions/listen` stream, which the
            # router does not hold for its clients; the handshake the gateway mirrors offers none (`identity`).
            raise MCPError(code=types.METHOD_NOT_FOUND, message="resources/subscribe: the backend speaks "
                           "2026-07-28, whose resource updates the router does not relay")
        elif modern and method in ("logging/setLevel", "resources/unsubscribe"):
            # Not in 2026-07-28 (a level travels with each request): accepted, as the 2025 client asking
            # expects, with nothing to tell the server.
            return {}
        elif method == "logging/setLevel":
            result = await client.set_logging_level(p["level"])
        elif method == "resources/subscribe":
            result = await client.subscribe_resource(p["uri"])
        elif method == "resources/unsubscribe":
            result = await client.unsubscribe_resource(p["uri"])
        else:
            raise MCPError(code=types.METHOD_NOT_FOUND, message=f"method not relayed: {method}")
    out: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return out
