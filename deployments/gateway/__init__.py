"""The MCP gateway: the backends behind the router, as MCP servers a client can connect to.

    /mcp/backends/{name}/   one backend, a faithful proxy (deployments.gateway.backend)
    /mcp/backends/          every backend the caller may reach, namespaced, with search_tools
                            (deployments.gateway.aggregate)

Both speak streamable HTTP with sessions for 2025-era clients (their server requests and notifications
ride the session's streams) and without for 2026-07-28 ones. A backend's server is built the first time a
client asks for it; its session manager runs in a task of the gateway's own (`Gateway.running`, in the
application's lifespan). A session belongs to the principal that opened it: another caller presenting its
id is answered as if it did not exist.

Sessions live in the replica that opened them: behind several ingress replicas, a 2025-era client needs
the same replica for its whole session (`server.replicas: 1`, or an ingress that keeps it there).
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import ray
from mcp.server.lowlevel import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deployments.caller import CURRENT
from deployments.gateway.aggregate import build_aggregate_server
from deployments.gateway.backend import build_backend_server
from deployments.gateway.gate import Gate
from deployments.middleware.reply import reply
from deployments.middleware.request_id import RequestIdCheck
from deployments.service import RouterService
from router.errors import Forbidden, RouterError, UnknownBackend
from router.security.policy import Access
from router.settings import RouterSettings

log = logging.getLogger("mcp_router.gateway")
_SESSION = b"mcp-session-id"
_WATCH_RETRY_S = 1.0
_MAX_OWNERS = 10_000  # sessions remembered; past it the ended ones go, then the longest unused
_MAX_PER_PRINCIPAL = 256  # sessions one principal may hold open at once: its own cap, not everyone's


class Gateway:
    def __init__(self, service: RouterService, settings: RouterSettings,
                 transport_security: Any = None) -> None:
        self.gate = Gate(service)
        self.settings = settings
        self._security = transport_security
        self._apps: dict[str, ASGIApp] = {}
        self._servers: dict[str, Server[Any]] = {}
        self._owners: dict[str, tuple[str, str]] = {}  # session id -> the principal that opened it, the backend
        self._held: Counter[str] = Counter()  # sessions per principal, of those in `_owners`
        self.gate.alive = self._alive
        self._group: anyio.abc.TaskGroup | None = None
        self._lock = anyio.Lock()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        root = scope.get("root_path", "")
        rest = scope["path"][len(root):] if scope["path"].startswith(root) else scope["path"]
        name = rest.strip("/").split("/", 1)[0]
        caller = CURRENT.get()
        refusal = self._refusal(caller.access if caller is not None else None, name)
        if refusal is not None:
            if caller is not None:
                caller.fail(refusal)
            await reply(send, refusal.payload(caller.request_id if caller else None), refusal.status_code)
            return
        app = await self._app(name)
        inner = {**scope, "root_path": f"{root}/{name}" if name else root}
        await self._owned(name, app, inner, receive, send)

    def _refusal(self, access: Access | None, name: str) -> RouterError | None:
        """Before any session: a caller that may not name backends is refused (403), and a backend it may not
        see is answered like one that does not exist (404)."""
        if access is None or not access.policy.backend_override:
            return (access.refuse("naming a backend (the gateway)") if access is not None
                    else Forbidden("the gateway needs an authenticated caller"))
        mcp = {b.name for b in self.settings.backends if b.kind in ("mcp_stdio", "mcp_http")}
        if name and (name not in mcp or not access.sees_backend(name)):
            return UnknownBackend(f"no MCP backend named {name!r} behind this router", backend=name)
        return None

    async def _app(self, name: str) -> ASGIApp:
        app = self._apps.get(name)
        if app is not None:
            return app
        async with self._lock:
            if name not in self._apps:
                server = build_backend_server(self.gate, name) if name else build_aggregate_server(self.gate)
                self._servers[name] = server
                self._apps[name] = await self._start(server)
                if name and self._group is not None:
                    self._group.start_soon(self._watch, name)
        return self._apps[name]

    async def _start(self, server: Server[Any]) -> ASGIApp:
        """The server's streamable-HTTP app, its session manager running in a task the gateway owns (an
        anyio task group must be left by the task that entered it)."""
        if self._group is None:
            raise RuntimeError("the gateway serves only inside Gateway.running()")
        app = RequestIdCheck(server.streamable_http_app(streamable_http_path="/", host=self.settings.server.host,
                                                        transport_security=self._security))

        async def hold(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with server.session_manager.run():
                task_status.started()
                await anyio.sleep_forever()

        await self._group.start(hold)
        return app

    async def _watch(self, name: str) -> None:
        """The backend's notifications outside requests, for its sessions here: one stream from its actor,
        opened again when it ends (a restarted actor, a reconnected server)."""
        while True:
            actor = self.gate.service.directory.actors.get(name)
            if actor is not None:
                stream = actor.watch.options(num_returns="streaming").remote()
                try:
                    async for ref in stream:
                        await self.gate.broadcast(name, await ref)
                except ray.exceptions.RayError as exc:
                    log.info("gateway: %s's notifications stopped (%s); listening again", name, type(exc).__name__)
                finally:
                    ray.cancel(stream)  # the gateway stopping: the actor stops sending too
            await anyio.sleep(_WATCH_RETRY_S)

    def _alive(self, name: str, session: str) -> bool:
        """Whether the SDK still serves the session: it ends one on DELETE, after its idle timeout, or when it
        crashes, and says so to nobody (a notification to an ended session is dropped without an error)."""
        server = self._servers.get(name)
        open_sessions = getattr(server.session_manager, "_server_instances", None) if server is not None else None
        return open_sessions is None or session in open_sessions

    def _forget(self, key: str) -> None:
        """A session that ended: its owner, and what the gate keeps for it (its subscriptions released)."""
        owner = self._owners.pop(key, None)
        if owner is not None:
            self._held[owner[0]] -= 1
            if self._held[owner[0]] <= 0:
                del self._held[owner[0]]
            self.gate.forget(owner[1], key)

    def _forget_ended(self) -> None:
        for key in [k for k, (_, name) in self._owners.items() if not self._alive(name, k)]:
            self._forget(key)

    async def _owned(self, name: str, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """Sessions kept to the principal that opened them, and at most `_MAX_PER_PRINCIPAL` of them open."""
        caller = CURRENT.get()
        principal = caller.access.principal.name if caller is not None else "-"
        sessions = [value for key, value in scope.get("headers") or [] if key == _SESSION]
        if len(sessions) > 1:  # the SDK serves the first, a dict would check the last: one id or none
            await reply(send, {"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32600, "message": "more than one Mcp-Session-Id header"}}, 400)
            return
        session = sessions[0] if sessions else None
        if session is not None:
            key = session.decode("latin-1")
            owner = self._owners.pop(key, None)
            if owner is not None:
                self._owners[key] = owner  # last used goes last: eviction takes the longest unused
            if owner != (principal, name):  # another's, another backend's, or ended: the client starts anew
                await reply(send, {"jsonrpc": "2.0", "id": None,
                                   "error": {"code": -32600, "message": "Session not found"}}, 404)
                return
            await app(scope, receive, send)
            if not self._alive(name, key):  # closed by this DELETE, or ended meanwhile
                self._forget(key)
            return
        if not _may_open(scope):
            await app(scope, receive, send)
            return
        if self._open_sessions(principal) >= _MAX_PER_PRINCIPAL:
            await reply(send, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": f"{principal!r} has {_MAX_PER_PRINCIPAL} gateway sessions open, its "
                                           "limit: close one (DELETE) or reuse it"}}, 429, {"Retry-After": "1"})
            return
        self._held[principal] += 1  # held while it opens: openings sent together each count
        recorded = False

        async def opened(message: Message) -> None:
            nonlocal recorded
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:  # else discarded
                for key, value in message.get("headers") or []:
                    if key.lower() == _SESSION and not recorded:
                        recorded = True
                        self._owners[value.decode("latin-1")] = (principal, name)
                        if len(self._owners) > _MAX_OWNERS:
                            self._forget_ended()
                        while len(self._owners) > _MAX_OWNERS:
                            self._forget(next(iter(self._owners)))
            await send(message)

        try:
            await app(scope, receive, opened)
        finally:
            if not recorded:  # no session came of it: the slot it held is given back
                self._held[principal] -= 1
                if self._held[principal] <= 0:
                    del self._held[principal]

    def _open_sessions(self, principal: str) -> int:
        """The principal's sessions still open (counted again, without those that ended, when at the cap)."""
        if self._held[principal] >= _MAX_PER_PRINCIPAL:  # some may have ended since (idle, crashed): not those
            for key in [k for k, (p, name) in self._owners.items() if p == principal and not self._alive(name, k)]:
                self._forget(key)
        return self._held[principal]


def _may_open(scope: Scope) -> bool:
    """Whether a request without a session id may open one, by the SDK's own rule: a POST whose first
    `MCP-Protocol-Version` header is absent or a handshake version (anything else is sessionless)."""
    version = next((v.decode("latin-1") for k, v in scope.get("headers") or [] if k == b"mcp-protocol-version"), None)
    return scope.get("method") == "POST" and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)
