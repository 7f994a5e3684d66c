"""What the two MCP backends share: one long-lived task owning the `mcp.Client` session.

The MCP client context must be entered and left in the same task, so `connect` starts an owner
task that enters it, publishes the client and waits until `close`; calls from any task share the
session. Tool-list changes arrive as `notifications/tools/list_changed` (protocol 2025) or on a
`subscriptions/listen` stream (2026-07-28); either calls `on_change`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import event_to_notification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry.propagate import extract

from actors.backends.base import make_catalog
from actors.backends.relay import ClientDidNotAnswer, RelayHub, identity, session_gone
from router.errors import (
    BackendFailed,
    BackendRejectedArguments,
    BackendTimeout,
    BackendUnavailable,
    BackendUnreachable,
    DeadlineExceeded,
    RouterError,
    ToolFailed,
)
from router.settings import McpHttpSpec, McpStdioSpec
from router.values import CallContext, CallOutcome, Capability, Catalog

log = logging.getLogger("mcp_router.backend")
_CLIENT_INFO = types.Implementation(name="mcp-router", version="0.1.0")
# Errors that mean the connection (not the request) is gone.
_CONNECTION_ERRORS = (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                      httpx.TransportError, httpx2.TransportError)


def content_text(blocks: list[Any]) -> str:
    """The text a person would read from MCP content blocks; non-text blocks are described."""
    parts = []
    for b in blocks:
        kind = getattr(b, "type", None)
        if kind == "text":
            parts.append(b.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(b, 'mime_type', '')}]")
        elif kind == "resource":
            res = b.resource
            parts.append(getattr(res, "text", None) or f"[resource: {res.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {b.uri}]")
    return "\n".join(p for p in parts if p)


def _dump(blocks: list[Any]) -> tuple[dict[str, Any], ...]:
    return tuple(b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks)


def _prompt_schema(prompt: Any) -> dict[str, Any]:
    args = prompt.arguments or []
    return {
        "type": "object",
        "properties": {a.name: {"type": "string", "description": a.description or ""} for a in args},
        "required": [a.name for a in args if a.required],
    }


async def _every_page(list_page: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated MCP listing (`tools/list`, `prompts/list`, `resources/list`), page by page."""
    items: list[Any] = []
    cursor = None
    while True:
        page = await list_page(cursor=cursor)
        items += getattr(page, field)
        cursor = page.next_cursor
        if not cursor:
            return items


class McpBackend:
    """Base of `McpStdioBackend` and `McpHttpBackend`; subclasses say how to reach the server."""

    kind = "mcp"
    transport = "mcp"

    def __init__(self, spec: McpStdioSpec | McpHttpSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.on_change: Callable[[], None] | None = None
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._error: str | None = None
        self.server_description = spec.description
        self._in_flight = 0  # requests on the session now, routed calls and relayed requests alike
        # The gateway's (actors.backends.relay). Over HTTP the SDK ties each server message to its request; one it
        # does not came on the server's standing stream and belongs to no relayed request.
        self.relays = RelayHub(spec.name, lambda: self._in_flight, untied_to_lone=self.transport == "stdio")

    async def _target(self, stack: AsyncExitStack) -> Any:
        """What `mcp.Client` connects to (parameters, transport or in-process server)."""
        raise NotImplementedError

    # -- connection ----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._client is not None and self._owner is not None and not self._owner.done()

    async def connect(self) -> None:
        if self.connected:
            return
        await self.close()
        ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error = None
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp-session-{self.name}")
        try:
            await asyncio.wait_for(ready.wait(), self.spec.connect_timeout_s)
        except TimeoutError:
            await self.close()
            raise BackendUnavailable(f"backend {self.name!r} did not finish the MCP handshake within "
                                     f"{self.spec.connect_timeout_s:.0f} s", backend=self.name) from None
        if self._client is None:
            raise BackendUnavailable(f"backend {self.name!r} cannot connect: {self._error}", backend=self.name)

    async def _own(self, ready: asyncio.Event) -> None:
        try:
            async with AsyncExitStack() as stack:
                target = await self._target(stack)
                # The server's own requests (sampling, elicitation, roots) and log messages reach the gateway
                # client whose request is in flight; a routed call has no client to ask, and is told so.
                hub = self.relays
                client = Client(target, cache=None, message_handler=self._on_message, client_info=_CLIENT_INFO,
                                mode=self.spec.protocol,
                                sampling_callback=hub.sampling, elicitation_callback=hub.elicitation,
                                list_roots_callback=hub.roots, logging_callback=hub.log)
                await stack.enter_async_context(client)
                self._client = client
                info = client.server_info
                if not self.server_description:
                    self.server_description = (client.instructions or (info.description if info else None)
                                               or (info.title if info else None) or "")
                ready.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(hub.resubscribe, client)
                    if self._modern(client):
                        tg.start_soon(self._listen, client)
                    await self._stop.wait()
                    tg.cancel_scope.cancel()
        # The owner task is the top of its own stack: whatever ends the session is recorded here so that
        # health reports it and the actor reconnects, instead of an unobserved task exception.
        except Exception as exc:
            self._error = _describe(exc)
            log.warning("backend %s: session ended: %s", self.name, self._error)
        finally:
            self._client = None
            ready.set()

    @property
    def protocol_version(self) -> str | None:
        client = self._client
        return client.protocol_version if client is not None else None

    @staticmethod
    def _modern(client: Client) -> bool:
        return client.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def _listen(self, client: Client) -> None:
        caps = client.server_capabilities
        if not any(c and c.list_changed for c in (caps.tools, caps.prompts, caps.resources)):
            return
        try:
            async with client.listen(tools_list_changed=True, prompts_list_changed=True,
                                     resources_list_changed=True) as sub:
                async for event in sub:
                    self._changed()
                    self.relays.notify(event_to_notification(event, {}))
        except (MCPError, RuntimeError, TimeoutError) as exc:
            log.info("backend %s: no change subscription (%s)", self.name, exc)

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, (types.ToolListChangedNotification, types.PromptListChangedNotification,
                             types.ResourceListChangedNotification)):
            self._changed()
        if isinstance(root, (types.ToolListChangedNotification, types.PromptListChangedNotification,
                             types.ResourceListChangedNotification, types.ResourceUpdatedNotification)):
            self.relays.notify(root)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    async def close(self) -> None:
        self._stop.set()
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), 5)
            except TimeoutError:
                owner.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await owner
        self._client = None

    async def shutdown(self) -> None:
        await self.close()

    def _require(self) -> Client:
        if not self.connected or self._client is None:
            raise BackendUnreachable(f"backend {self.name!r} is not connected"
                                     + (f": {self._error}" if self._error else ""), backend=self.name)
        return self._client

    # -- operations ------------------------------------------------------------------------------

    async def list_capabilities(self) -> Catalog:
        client = self._require()
        wanted = set(self.spec.capabilities)
        caps: list[Capability] = []
        server = client.server_capabilities
        try:
            async with asyncio.timeout(self.spec.timeout_s):
                if "tools" in wanted and server.tools is not None:
                    # A tool that runs only as an MCP task cannot answer a plain call: not routable.
                    caps += [Capability(backend=self.name, name=t.name, kind="tool", title=t.title,
                                        description=t.description or "", input_schema=t.input_schema or {},
                                        read_only=_hint(t, "read_only_hint"), idempotent=_hint(t, "idempotent_hint"))
                             for t in await _every_page(client.list_tools, "tools") if not _task_only(t)]
                if "prompts" in wanted and server.prompts is not None:
                    caps += [Capability(backend=self.name, name=p.name, kind="prompt", title=p.title,
                                        description=p.description or "", input_schema=_prompt_schema(p),
                                        read_only=True)
                             for p in await _every_page(client.list_prompts, "prompts")]
                if "resources" in wanted and server.resources is not None:
                    caps += [Capability(backend=self.name, name=r.name, kind="resource", title=r.title,
                                        description=r.description or str(r.uri), target=str(r.uri), read_only=True)
                             for r in await _every_page(client.list_resources, "resources")]
        except TimeoutError:
            raise BackendTimeout(f"backend {self.name!r} did not list its capabilities within "
                                 f"{self.spec.timeout_s:.0f} s", backend=self.name) from None
        except (MCPError, *_CONNECTION_ERRORS) as exc:
            raise self._translate(exc, "listing capabilities") from None
        return make_catalog(self.name, self.server_description, caps, self.spec.intents)

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext) -> CallOutcome:
        client = self._require()
        started = time.perf_counter()
        token = otel_context.attach(extract(context.trace)) if context.trace else None
        self._in_flight += 1
        try:
            async with asyncio.timeout(timeout_s):
                if capability.kind == "prompt":
                    prompt = await client.get_prompt(capability.name, {k: str(v) for k, v in arguments.items()})
                    blocks = [m.content for m in prompt.messages]
                    structured, is_error = None, False
                elif capability.kind == "resource":
                    read = await client.read_resource(capability.target or capability.name)
                    text = "\n".join(getattr(c, "text", None) or f"[{c.mime_type or 'binary'}: {c.uri}]"
                                     for c in read.contents)
                    blocks = [types.TextContent(type="text", text=text)]
                    structured, is_error = None, False
                else:
                    try:
                        result = await client.call_tool(capability.name, arguments)
                    except RuntimeError as exc:  # the SDK's check of the answer against the tool's output schema
                        if "schema" not in str(exc) and "structured content" not in str(exc):
                            raise
                        raise BackendFailed(f"backend {self.name!r}, tool {capability.name!r} answered what its "
                                            f"output schema refuses: {exc}", backend=self.name,
                                            tool=capability.name) from None
                    blocks, structured, is_error = list(result.content), result.structured_content, result.is_error
        except TimeoutError:
            raise BackendTimeout(f"backend {self.name!r}, tool {capability.name!r}: no answer within "
                                 f"{timeout_s:.1f} s", backend=self.name, tool=capability.name) from None
        except (MCPError, *_CONNECTION_ERRORS) as exc:
            if capability.kind == "prompt" and arguments and isinstance(exc, MCPError) and exc.code not in (
                    types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT):
                # Servers report a prompt's argument values they cannot use as an internal error (the Python
                # SDK's "Error rendering prompt"), not as invalid params: an answer about this request.
                raise BackendRejectedArguments(f"backend {self.name!r} could not render prompt {capability.name!r} "
                                               f"with the arguments given: {exc.error.message}",
                                               backend=self.name, tool=capability.name) from None
            raise self._translate(exc, f"tool {capability.name!r}") from None
        finally:
            self._in_flight -= 1
            if token is not None:
                otel_context.detach(token)
        latency = (time.perf_counter() - started) * 1000
        text = content_text(blocks)
        if is_error:
            raise ToolFailed(f"backend {self.name!r}, tool {capability.name!r}: {text or 'error without message'}",
                             backend=self.name, tool=capability.name)
        if not text and structured is not None:
            text = json.dumps(structured, ensure_ascii=False)
        return CallOutcome(backend=self.name, capability=capability.name, ok=True, latency_ms=latency, text=text,
                           content=_dump(blocks), structured=structured)

    async def relay(self, method: str, params: dict[str, Any], *, timeout_s: float,
                    log_level: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """A gateway client's request over the held session: its events, the last the server's answer."""
        client = self._require()
        self._in_flight += 1
        try:
            async for event in self.relays.run(client, method, params, timeout_s, log_level):
                yield event
        except ClientDidNotAnswer as exc:
            # Counted as the caller's deadline: a client that leaves the server's request unanswered must not
            # eject the backend for everyone.
            raise DeadlineExceeded(f"backend {self.name!r} ({method}): the client did not answer the server's "
                                   f"{exc.args[0]} within {timeout_s:.1f} s", backend=self.name) from None
        except TimeoutError:
            raise BackendTimeout(f"backend {self.name!r} ({method}): no answer within {timeout_s:.1f} s",
                                 backend=self.name) from None
        except (MCPError, *_CONNECTION_ERRORS) as exc:
            raise self._translate(exc, method) from None
        finally:
            self._in_flight -= 1

    def identity(self) -> dict[str, Any]:
        return identity(self._require())

    async def health(self, timeout_s: float) -> None:
        client = self._require()
        try:
            async with asyncio.timeout(timeout_s):
                if self._modern(client):
                    await client.list_tools()  # 2026-07-28 has no ping; listing is the cheapest request
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        await client.send_ping()
        except TimeoutError:
            raise BackendTimeout(f"backend {self.name!r} did not answer a health check within {timeout_s:.1f} s",
                                 backend=self.name) from None
        except (MCPError, *_CONNECTION_ERRORS) as exc:
            if isinstance(exc, MCPError) and exc.code == types.METHOD_NOT_FOUND and self._modern(client):
                return  # a server with no tools (prompts or resources only) answered the listing: it is alive
            raise self._translate(exc, "health check") from None

    def _translate(self, exc: BaseException, what: str) -> RouterError:
        """MCP and transport errors -> RouterError, in one place."""
        if isinstance(exc, MCPError):
            if exc.code == types.CONNECTION_CLOSED:
                self._error = "connection closed"
                return BackendUnavailable(f"backend {self.name!r} ({what}): connection closed", backend=self.name)
            if exc.code == types.REQUEST_TIMEOUT:
                return BackendTimeout(f"backend {self.name!r} ({what}): {exc}", backend=self.name)
            if session_gone(exc):
                # An HTTP server that restarted no longer knows the router's session (a 404): the session is
                # over, as when the connection is lost; the supervisor connects again at once.
                self._error = f"the server no longer knows the session ({exc.error.message})"
                self._stop.set()
                return BackendUnavailable(f"backend {self.name!r} ({what}): {self._error}", backend=self.name)
            if exc.code == types.INVALID_PARAMS:
                # The server refused the caller's arguments: an answer about this request, not a fault.
                return BackendRejectedArguments(f"backend {self.name!r} ({what}) rejected the arguments: "
                                                f"{exc.error.message}", backend=self.name)
            return BackendFailed(f"backend {self.name!r} ({what}): {exc.error.message} (code {exc.code})",
                                 backend=self.name)
        self._error = _describe(exc)
        return BackendUnavailable(f"backend {self.name!r} ({what}): {self._error}", backend=self.name)


def _describe(exc: BaseException) -> str:
    """A one-line cause, unwrapping the exception groups that task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


def _task_only(tool: Any) -> bool:
    execution = getattr(tool, "execution", None)
    return getattr(execution, "task_support", None) == "required"


def _hint(tool: Any, name: str) -> bool:
    """A tool annotation that is true only when the server says so (MCP's defaults: it may act, and
    repeating it may act again)."""
    return getattr(getattr(tool, "annotations", None), name, None) is True
