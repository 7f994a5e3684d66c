"""Flowise chatflows as routable capabilities, over Flowise's REST API (as observed on 3.1.2).

    backend = FlowiseBackend(spec)                 # spec: router.config.FlowiseSpec
    await backend.connect()                        # GET /api/v1/ping must answer 200
    catalog = await backend.list_capabilities()    # GET /api/v1/chatflows: one "flow" capability each
    outcome = await backend.call(catalog.capabilities[0], {"history": [...]}, timeout_s=30, context=ctx)

A call is ``POST /api/v1/prediction/{id}`` ``{question, overrideConfig, history, streaming}``: the
question is ``arguments["question"]`` when given, else the routed one; ``arguments["history"]`` is
forwarded as it is; ``context.session_id`` -> ``overrideConfig.sessionId``, ``parameters.temperature``
-> ``overrideConfig.temperature``, ``parameters.max_tokens`` -> ``overrideConfig.maxTokens`` (input
names of Flowise's chat-model nodes; Flowise applies them only where the chatflow allows overrides and
ignores them silently otherwise), ``parameters.stream`` -> ``streaming``. The answer's ``sessionId``
(else ``chatId``) is the outcome's session id; ``sourceDocuments``, ``usedTools``, ``chatId`` and
``chatMessageId`` go to ``extra``, a ``json`` answer to ``structured``.

Quirks handled: a wrong per-flow key is an HTTP 500 whose message ends in "Unauthorized" (reported as
`FlowUnauthorized`, like 401/403); streamed frames are ``message:\\ndata:{"event": ..., "data": ...}``
(``start`` repeats the first token, ``end`` carries "[DONE]"); a flow that cannot stream answers plain
JSON to ``streaming: true``, so the reader branches on Content-Type.

`HttpFlowBackend` (the httpx client, error translation in one place, credential hygiene) is shared
with the Langflow backend. Keys travel as per-request headers and are redacted from every message.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx

from actors.backends.base import make_catalog
from router.config import FlowiseSpec, FlowSpec, LangflowSpec
from router.errors import BackendFailed, BackendTimeout, BackendUnavailable, RouterError
from router.models import CallOutcome, Capability, Catalog, Parameters
from router.strategies import CallContext

EVENT_STREAM = "text/event-stream"
StreamReader = Callable[[httpx.Response, Capability], Awaitable[Any]]
_EXTRA = ("sourceDocuments", "usedTools", "chatId", "chatMessageId")
_QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "the message for the flow"},
                   "history": {"type": "array", "description": "earlier messages: {role, content}"}},
}


class FlowUnauthorized(BackendFailed):
    """The flow platform refused the API key (or none was configured)."""

    code = "backend_unauthorized"


async def iter_frames(resp: httpx.Response) -> AsyncIterator[str]:
    """The blank-line separated frames of a streamed body (SSE, or Langflow's bare JSON objects)."""
    buffer = ""
    async for chunk in resp.aiter_text():
        buffer = (buffer + chunk).replace("\r\n", "\n")
        while "\n\n" in buffer:
            frame, buffer = buffer.split("\n\n", 1)
            if frame.strip():
                yield frame
    if buffer.strip():
        yield buffer


def _server_message(resp: httpx.Response) -> str:
    """The error text a flow platform put in its body (`message`, `error` or `detail`)."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:300]
    for key in ("message", "error", "detail"):
        value = body.get(key) if isinstance(body, dict) else None
        if isinstance(value, dict):  # e.g. {"detail": {"message": ..., "traceback": ...}}
            value = value.get("message") or value
        if value:
            return (value if isinstance(value, str) else json.dumps(value, default=str))[:300]
    return json.dumps(body, default=str)[:300]


class HttpFlowBackend:
    """What the Flowise and Langflow backends share; subclasses implement `_probe` and the calls."""

    kind = "flow"
    transport = "http"
    product = "the flow platform"
    auth_quirk_500 = False  # Flowise: a rejected per-flow key is an HTTP 500 saying "Unauthorized"

    def __init__(self, spec: FlowiseSpec | LangflowSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.on_change: Callable[[], None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._flow_specs: dict[str, FlowSpec] = {f.id: f for f in spec.flows}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, url={self._url()!r})"

    def _url(self) -> str:
        url = httpx.URL(self.spec.url)
        return str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)

    @property
    def connected(self) -> bool:
        return self._client is not None and not self._client.is_closed

    async def connect(self) -> None:
        if self.connected:
            return
        timeout = httpx.Timeout(self.spec.timeout_s, connect=self.spec.connect_timeout_s)
        self._client = httpx.AsyncClient(base_url=self.spec.url, timeout=timeout)
        try:
            await self._probe(self.spec.connect_timeout_s, "connect")
        except RouterError as exc:  # a timeout or a bad answer at connect time: the backend is not up
            await self.close()
            raise BackendUnavailable(exc.message, backend=self.name) from None

    async def health(self, timeout_s: float) -> None:
        await self._probe(timeout_s, "health check")

    async def _probe(self, timeout_s: float, what: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def shutdown(self) -> None:
        await self.close()

    def _require(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            raise BackendUnavailable(f"backend {self.name!r} is not connected", backend=self.name)
        return self._client

    def _key(self, flow_id: str | None = None) -> str | None:
        flow = self._flow_specs.get(flow_id) if flow_id else None
        if flow is not None and flow.api_key is not None:
            return flow.api_key.get_secret_value()
        return self.spec.resolved_api_key()

    def redact(self, text: str) -> str:
        keys = [self.spec.resolved_api_key(), *(f.api_key.get_secret_value() for f in self.spec.flows
                                                if f.api_key)]
        for key in sorted((k for k in keys if k), key=len, reverse=True):
            text = text.replace(key, "***")
        return text

    @staticmethod
    def _trace(context: CallContext) -> dict[str, str]:
        return {str(k): str(v) for k, v in (context.trace or {}).items()}

    async def _get(self, path: str, *, what: str, timeout_s: float, headers: dict[str, str] | None = None,
                   params: dict[str, str] | None = None) -> httpx.Response:
        client = self._require()
        try:
            async with asyncio.timeout(timeout_s):
                return await client.get(path, headers=headers, params=params, timeout=timeout_s)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise self._translate(exc, what, timeout_s) from None

    async def _post_flow(self, cap: Capability, path: str, *, body: dict[str, Any], headers: dict[str, str],
                         timeout_s: float, read_stream: StreamReader,
                         params: dict[str, str] | None = None) -> tuple[Any, float]:
        """POST a run; a streamed body goes to `read_stream`, any other is parsed as JSON."""
        client = self._require()
        what = f"flow {cap.name!r}"
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                async with client.stream("POST", path, json=body, headers=headers, params=params,
                                         timeout=timeout_s) as resp:
                    if resp.status_code >= 400:
                        await resp.aread()
                        raise self._status_error(resp, what, cap)
                    if EVENT_STREAM in resp.headers.get("content-type", ""):
                        result = await read_stream(resp, cap)
                    else:
                        result = self._json(await resp.aread(), what, cap, obj=True)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise self._translate(exc, what, timeout_s, cap) from None
        return result, (time.perf_counter() - started) * 1000

    def _json(self, raw: bytes | str, what: str, cap: Capability | None = None, *, obj: bool = False) -> Any:
        """Parse a body or a stream event; with `obj` it must be a JSON object."""
        try:
            value = json.loads(raw)
            if not obj or isinstance(value, dict):
                return value
        except ValueError:
            pass
        raise BackendFailed(f"backend {self.name!r} ({what}): malformed response (not "
                            f"{'a JSON object' if obj else 'JSON'})", backend=self.name,
                            tool=cap.name if cap else None)

    def _translate(self, exc: BaseException, what: str, timeout_s: float, cap: Capability | None = None
                   ) -> RouterError:
        """Timeouts and httpx errors -> RouterError."""
        tool = cap.name if cap else None
        if isinstance(exc, TimeoutError | httpx.TimeoutException):
            return BackendTimeout(f"backend {self.name!r} ({what}): no answer within {timeout_s:.1f} s",
                                  backend=self.name, tool=tool)
        cause = self.redact(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:300]
        if isinstance(exc, httpx.TransportError):
            return BackendUnavailable(f"backend {self.name!r} ({what}): cannot reach {self._url()}: {cause}",
                                      backend=self.name)
        return BackendFailed(f"backend {self.name!r} ({what}): {cause}", backend=self.name, tool=tool)

    def _status_error(self, resp: httpx.Response, what: str, cap: Capability | None = None) -> RouterError:
        """An HTTP error status -> RouterError; an auth failure never echoes the server's text."""
        status, tool = resp.status_code, (cap.name if cap else None)
        message = self.redact(_server_message(resp))
        where = f"backend {self.name!r} ({what})"
        quirk = self.auth_quirk_500 and status == 500 and "unauthorized" in message.lower()
        if status in (401, 403) or quirk:
            hint = ("no API key is configured (set api_key or api_key_env)"
                    if not self._key(cap.target if cap else None) else
                    "check the backend's api_key / api_key_env" + (" and the flow's api_key" if cap else ""))
            return FlowUnauthorized(f"{where}: {self.product} refused the request as unauthorized "
                                    f"(HTTP {status}); {hint}", backend=self.name, tool=tool)
        if status == 404:
            thing = f"flow {cap.name!r} (id {cap.target or cap.name!r})" if cap else resp.url.path
            return BackendFailed(f"{where}: {self.product} has no {thing} (HTTP 404)", backend=self.name,
                                 tool=tool)
        if status in (502, 503):
            return BackendUnavailable(f"{where}: HTTP {status}: {message}", backend=self.name)
        if status == 504:
            return BackendTimeout(f"{where}: HTTP 504: {message}", backend=self.name, tool=tool)
        return BackendFailed(f"{where}: HTTP {status}: {message or 'no message'}", backend=self.name,
                             tool=tool)

    def _flow_spec(self, *ids: str | None) -> FlowSpec | None:
        return next((self._flow_specs[i] for i in ids if i and i in self._flow_specs), None)


class FlowiseBackend(HttpFlowBackend):
    kind = "flowise"
    product = "Flowise"
    auth_quirk_500 = True

    def _auth(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def _probe(self, timeout_s: float, what: str) -> None:
        resp = await self._get("/api/v1/ping", what=what, timeout_s=timeout_s)
        if resp.status_code != 200:
            raise BackendUnavailable(f"backend {self.name!r} ({what}): /api/v1/ping answered HTTP "
                                     f"{resp.status_code}", backend=self.name)

    async def list_capabilities(self) -> Catalog:
        what = "listing chatflows"
        resp = await self._get("/api/v1/chatflows", what=what, timeout_s=self.spec.timeout_s,
                               headers=self._auth(self._key()))
        if resp.status_code >= 400:
            raise self._status_error(resp, what)
        body = self._json(resp.content, what)
        items = body.get("data") if isinstance(body, dict) else body  # paginated form: {data, total}
        if not isinstance(items, list):
            raise BackendFailed(f"backend {self.name!r} ({what}): malformed response (no list of chatflows)",
                                backend=self.name)
        caps: list[Capability] = []
        names: set[str] = set()
        for flow in items:
            flow_id = flow.get("id") if isinstance(flow, dict) else None
            if not isinstance(flow_id, str) or not flow_id:
                continue
            fs = self._flow_spec(flow_id)
            if fs is None and self.spec.only_listed_flows:
                continue
            title = str(flow.get("name") or flow_id)
            name = (fs.name if fs and fs.name else None) or title
            if name in names:
                name = f"{name} ({flow_id[:8]})"
            names.add(name)
            description = (fs.description if fs and fs.description else None) or _describe(flow, title)
            caps.append(Capability(backend=self.name, name=name, kind="flow", description=description,
                                   title=title, input_schema=_QUESTION_SCHEMA, target=flow_id,
                                   intents=tuple(fs.intents if fs else ()),
                                   tags=tuple(fs.tags if fs else ())))
        description = self.spec.description or "Flowise chatflows: " + ", ".join(c.name for c in caps)
        return make_catalog(self.name, description, caps, self.spec.intents)

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext) -> CallOutcome:
        flow_id = capability.target or capability.name
        params = context.parameters or Parameters()
        override = {"sessionId": context.session_id, "temperature": params.temperature,
                    "maxTokens": params.max_tokens}
        question = arguments.get("question")
        body = {"question": question if isinstance(question, str) and question else context.question,
                "overrideConfig": {k: v for k, v in override.items() if v is not None and v != ""},
                "history": arguments.get("history") or [], "streaming": bool(params.stream)}
        headers = {**self._trace(context), **self._auth(self._key(flow_id))}
        data, latency = await self._post_flow(capability, f"/api/v1/prediction/{quote(flow_id, safe='')}",
                                              body=body, headers=headers, timeout_s=timeout_s,
                                              read_stream=self._read_stream)
        structured = data.get("json") if isinstance(data.get("json"), dict) else None
        text = data.get("text")
        if not isinstance(text, str):
            text = json.dumps(structured, ensure_ascii=False) if structured else str(text or "")
        extra = {k: data[k] for k in _EXTRA if data.get(k)}
        session = data.get("sessionId") or data.get("chatId") or context.session_id
        return CallOutcome(backend=self.name, capability=capability.name, ok=True, latency_ms=latency,
                           text=text, structured=structured, session_id=str(session) if session else None,
                           extra=extra)

    async def _read_stream(self, resp: httpx.Response, cap: Capability) -> dict[str, Any]:
        """Accumulate `token` events into `text`; `metadata`, `sourceDocuments`, `usedTools` alongside."""
        what = f"flow {cap.name!r}"
        result: dict[str, Any] = {}
        tokens: list[str] = []
        async for frame in iter_frames(resp):
            lines = [ln[5:].removeprefix(" ") for ln in frame.split("\n") if ln.startswith("data:")]
            if not lines:
                continue  # the bare "message:" line, comments, keep-alives
            event = self._json("\n".join(lines), what, cap, obj=True)
            kind, data = event.get("event"), event.get("data")
            if kind == "token" and isinstance(data, str):
                tokens.append(data)
            elif kind == "metadata" and isinstance(data, dict):
                result.update({k: v for k, v in data.items() if k != "text"})
            elif kind in ("sourceDocuments", "usedTools") and data:
                result[kind] = data
            elif kind == "error":
                raise BackendFailed(f"backend {self.name!r} ({what}): the flow failed: "
                                    f"{self.redact(str(data))[:300]}", backend=self.name, tool=cap.name)
            elif kind == "end":
                break
        result["text"] = "".join(tokens)
        return result


def _describe(flow: dict[str, Any], title: str) -> str:
    """A routing description for a chatflow the config says nothing about."""
    if isinstance(flow.get("description"), str) and flow["description"].strip():
        return str(flow["description"]).strip()
    kind = str(flow.get("type") or "chatflow").lower()
    categories = [c.strip() for c in str(flow.get("category") or "").split(";") if c.strip()]
    return f"Flowise {kind} {title!r}" + (f" (category: {', '.join(categories)})" if categories else "")
