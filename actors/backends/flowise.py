"""Flowise chatflows as routable capabilities, over Flowise's REST API (as observed on 3.1.2).

    backend = FlowiseBackend(spec)                 # spec: router.settings.FlowiseSpec
    await backend.connect()                        # GET /api/v1/ping must answer 200
    catalog = await backend.list_capabilities()    # GET /api/v1/chatflows: one "flow" capability each
    outcome = await backend.call(catalog.capabilities[0], {"history": [...]}, timeout_s=30, context=ctx)

A call is ``POST /api/v1/prediction/{id}`` ``{question, overrideConfig, history, streaming}``: the
question is ``arguments["question"]`` when given, else the routed one; ``arguments["history"]`` is
forwarded as it is; ``context.session_id`` -> ``overrideConfig.sessionId``, ``parameters.temperature``
-> ``overrideConfig.temperature``, ``parameters.max_tokens`` -> ``overrideConfig.maxTokens`` (input
names of Flowise's chat-model nodes; Flowise applies them only where the chatflow allows overrides and
ignores them silently otherwise), ``parameters.stream`` -> ``streaming`` for a flow that can stream.
The request's session is the outcome's; a call without one reports none (a caller continuing with the
``chatId`` Flowise made would be scoped to a session of its own, with no memory). ``sourceDocuments``,
``usedTools``, ``chatId`` and ``chatMessageId`` go to ``extra``, a ``json`` answer to ``structured``.

Streaming: Flowise answers an error with nothing at all when the request asked for streaming and the
stream had not opened (an unknown flow, a rejected per-flow key, a flow that cannot stream and fails),
so the caller would wait out its whole timeout. A streamed call therefore first asks
``GET /api/v1/chatflows-streaming/{id}`` (``{"isStreaming": bool}``, remembered for
`STREAM_CHECK_TTL_S`) and sends ``streaming: true`` only when the flow can stream; Flowise opens such a
stream before running the flow and reports later failures as ``error`` events. The wait for the
response to start is bounded apart (`FIRST_BYTE_S`), for the case the flow changed since the check.

Other quirks handled: a wrong per-flow key is an HTTP 500 whose message ends in "Unauthorized"
(reported as `FlowUnauthorized`, like 401/403, also as a stream ``error`` event); an id that is not a
UUID is a 400 "Invalid Chatflow ID" and an unknown one a 404 "Chatflow … not found in the database!"
(both `FlowNotFound`); messages lose their ``Error: predictionsServices.buildChatflow - `` prefix;
chatflow streams are ``message:\\ndata:{"event": ..., "data": ...}`` frames (``start`` repeats the first
token, ``end`` carries "[DONE]"), agentflow streams carry ``agentFlowEvent``, ``nextAgentFlow`` and
``agentFlowExecutedData`` (the last node's output is the answer when no token came) and no ``start``.

The httpx client, error translation and credential hygiene live in `actors.backends.http_flow`.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any
from urllib.parse import quote

import httpx

from actors.backends.base import make_catalog
from actors.backends.http_flow import HttpFlowBackend, iter_frames, readable_error
from router.errors import BackendFailed, BackendTimeout, BackendUnavailable, FlowUnauthorized, RouterError
from router.models import Parameters
from router.settings import FlowiseSpec
from router.values import CallContext, CallOutcome, Capability, Catalog

_EXTRA = ("sourceDocuments", "usedTools", "chatId", "chatMessageId")
_QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "the message for the flow"},
                   "history": {"type": "array", "description": "earlier messages: {role, content}"}},
}
# Whether a flow can stream changes only when someone edits it: the answer is kept this long.
STREAM_CHECK_TTL_S = 60.0
# Flowise opens a stream before it runs the flow, after two database look-ups: a stream that has not
# started by then will not start (see the module docstring).
FIRST_BYTE_S = 5.0
# "Error: predictionsServices.buildChatflow - ", "Error: chatflowsService.getChatflowById - ", ...
_CALL_SITE = re.compile(r"^(?:Error: )?\w+\.\w+ - ")


class FlowiseBackend(HttpFlowBackend):
    kind = "flowise"
    product = "Flowise"
    auth_quirk_500 = True

    def __init__(self, spec: FlowiseSpec) -> None:
        super().__init__(spec)
        self._streamable: dict[str, tuple[bool, float]] = {}  # flow id -> (can stream, until when)

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

    def _clean_message(self, text: str) -> str:
        while (shorter := _CALL_SITE.sub("", text, count=1)) != text:
            text = shorter
        return text

    def _missing_flow(self, status: int, message: str) -> bool:
        return status == 404 or (status == 400 and "invalid chatflow id" in message.lower())

    def _no_first_byte(self, cap: Capability, seconds: float) -> RouterError:
        self._streamable.pop(cap.target or cap.name, None)  # ask again next time
        return BackendTimeout(f"backend {self.name!r} (flow {cap.name!r}): Flowise started no response within "
                              f"{seconds:.1f} s to a streaming request; it sends nothing when such a request "
                              "fails before its stream opens (an unknown flow, a rejected per-flow key, a flow "
                              "that cannot stream); retry without streaming to see the cause",
                              backend=self.name, tool=cap.name)

    async def _can_stream(self, flow_id: str, headers: dict[str, str], timeout_s: float) -> bool:
        """Flowise's own verdict, remembered; no verdict (an error, no such flow) -> do not stream, so
        that the run reports the cause."""
        known = self._streamable.get(flow_id)
        if known is not None and known[1] > time.monotonic():
            return known[0]
        try:
            resp = await self._get(f"/api/v1/chatflows-streaming/{quote(flow_id, safe='')}",
                                   what="streaming check", timeout_s=timeout_s, headers=headers)
            verdict = resp.json().get("isStreaming") if resp.status_code == 200 else None
        except (RouterError, ValueError, AttributeError):
            verdict = None
        if not isinstance(verdict, bool):
            return False
        self._streamable[flow_id] = (verdict, time.monotonic() + STREAM_CHECK_TTL_S)
        return verdict

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext) -> CallOutcome:
        started = time.perf_counter()
        flow_id = capability.target or capability.name
        params = context.parameters or Parameters()
        override = {"sessionId": context.session_id, "temperature": params.temperature,
                    "maxTokens": params.max_tokens}
        question = arguments.get("question")
        headers = {**self._trace(context), **self._auth(self._key(flow_id))}
        streaming = bool(params.stream) and await self._can_stream(flow_id, headers, min(FIRST_BYTE_S, timeout_s))
        body = {"question": question if isinstance(question, str) and question else context.question,
                "overrideConfig": {k: v for k, v in override.items() if v is not None and v != ""},
                "history": arguments.get("history") or [], "streaming": streaming}
        left = max(timeout_s - (time.perf_counter() - started), 0.001)
        data, _ = await self._post_flow(capability, f"/api/v1/prediction/{quote(flow_id, safe='')}",
                                        body=body, headers=headers, timeout_s=left, read_stream=self._read_stream,
                                        first_byte_s=min(FIRST_BYTE_S, left) if streaming else None)
        latency = (time.perf_counter() - started) * 1000
        structured = data.get("json") if isinstance(data.get("json"), dict) else None
        text = data.get("text")
        if text is None and structured is None:  # a 200 that is not a prediction (an error from a proxy, a plugin)
            raise BackendFailed(f"backend {self.name!r} (flow {capability.name!r}): the prediction holds no `text` "
                                f"or `json` (keys: {', '.join(sorted(map(str, data))[:10]) or 'none'})",
                                backend=self.name, tool=capability.name)
        if not isinstance(text, str):
            text = json.dumps(structured, ensure_ascii=False) if structured else str(text or "")
        extra = {k: data[k] for k in _EXTRA if data.get(k)}
        return CallOutcome(backend=self.name, capability=capability.name, ok=True, latency_ms=latency,
                           text=text, structured=structured, session_id=context.session_id, extra=extra)

    async def _read_stream(self, resp: httpx.Response, cap: Capability) -> dict[str, Any]:
        """Accumulate `token` events into `text`; `metadata`, `sourceDocuments`, `usedTools` alongside;
        an agentflow's last executed node stands in when no token came."""
        what = f"flow {cap.name!r}"
        result: dict[str, Any] = {}
        tokens: list[str] = []
        last_output: str | None = None
        async for frame in iter_frames(resp, self.max_answer_bytes):
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
            elif kind == "agentFlowExecutedData" and isinstance(data, list):
                last_output = _last_node_output(data) or last_output
            elif kind == "error":
                raise self._stream_error(data, what, cap)
            elif kind == "abort":  # stopped part way: what streamed so far is no answer, and the flow may have acted
                raise BackendFailed(f"backend {self.name!r} ({what}): the run was stopped before it finished",
                                    backend=self.name, tool=cap.name)
            elif kind == "end":
                break
        result["text"] = "".join(tokens) or last_output or ""
        return result

    def _stream_error(self, data: Any, what: str, cap: Capability) -> RouterError:
        message = self._clean_message(self.redact(readable_error(data)))[:300]
        if message.lower().rstrip(".").endswith("unauthorized"):  # the per-flow key, checked after the stream opened
            return FlowUnauthorized(f"backend {self.name!r} ({what}): Flowise refused the request as unauthorized "
                                    "(stream error event); check the backend's api_key / api_key_env and the flow's "
                                    "api_key", backend=self.name, tool=cap.name)
        return BackendFailed(f"backend {self.name!r} ({what}): the flow failed: {message}", backend=self.name,
                             tool=cap.name)


def _last_node_output(executed: list[Any]) -> str | None:
    """The text output of the last finished node in an agentflow's `agentFlowExecutedData`."""
    for node in reversed(executed):
        output = node.get("data") if isinstance(node, dict) else None
        output = output.get("output") if isinstance(output, dict) else None
        content = output.get("content") if isinstance(output, dict) else None
        if isinstance(content, str) and content:
            return content
    return None


def _describe(flow: dict[str, Any], title: str) -> str:
    """A routing description for a chatflow the config says nothing about."""
    if isinstance(flow.get("description"), str) and flow["description"].strip():
        return str(flow["description"]).strip()
    kind = str(flow.get("type") or "chatflow").lower()
    categories = [c.strip() for c in str(flow.get("category") or "").split(";") if c.strip()]
    return f"Flowise {kind} {title!r}" + (f" (category: {', '.join(categories)})" if categories else "")
