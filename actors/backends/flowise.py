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

The httpx client, error translation and credential hygiene live in `actors.backends.http_flow`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx

from actors.backends.base import make_catalog
from actors.backends.http_flow import (
    HttpFlowBackend,
    iter_frames,
)
from router.errors import BackendFailed, BackendUnavailable
from router.models import CallOutcome, Capability, Catalog, Parameters
from router.strategies import CallContext

_EXTRA = ("sourceDocuments", "usedTools", "chatId", "chatMessageId")
_QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "the message for the flow"},
                   "history": {"type": "array", "description": "earlier messages: {role, content}"}},
}


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
