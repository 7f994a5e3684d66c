"""Langflow flows as routable capabilities, over Langflow's v1 REST API (as observed on 1.13.0).

    backend = LangflowBackend(spec)                # spec: router.settings.LangflowSpec
    await backend.connect()                        # GET /health_check must say {"status": "ok", ...}
    catalog = await backend.list_capabilities()    # GET /api/v1/flows/: one "flow" capability each
    outcome = await backend.call(catalog.capabilities[0], {}, timeout_s=30, context=ctx)

A call is ``POST /api/v1/run/{flow_id}?stream=false|true`` with ``x-api-key`` and
``{input_value, input_type, output_type, session_id, tweaks}``:

- ``input_value``: ``arguments["question"]`` (or ``arguments["input_value"]``) when the caller gives
  one, else the routed question; ``input_type`` / ``output_type`` come from the backend's config;
  ``tweaks`` is ``arguments["tweaks"]`` as given (Langflow keys tweaks by component id, so the router
  invents none).
- ``parameters.stream`` -> ``stream=true``. ``parameters.temperature`` and ``max_tokens`` are ignored:
  the public API has no flow-level setting for them, only per-component tweaks.
- The answer is ``outputs[0].outputs[*].results.message.text``, else the first of ``messages[0].message``,
  ``artifacts.message`` or ``outputs.message.message``; none of them -> "no message in the flow's output".
- Session: without a ``session_id`` Langflow would keep the conversation under the flow's id, shared by every
  caller, so a call without one is sent a fresh session id of its own and the outcome reports none. A tweak
  may not set a component's ``session_id`` (400): the request's ``session_id`` is namespaced per caller.

The listing asks ``remove_example_flows=true``: Langflow lists its starter templates otherwise, and
those cannot be run. Errors: a 500's ``detail`` is a JSON object encoded in a string (``{"message":
"Error running graph: …", "traceback": …}``) and is unpacked to its message; a 400 (Langflow refuses a
tweak of the chat input's ``input_value``, since the question already goes there) is
`BackendRejectedArguments` naming the tweaks.

A streamed run is bare JSON objects separated by blank lines (no ``data:`` prefix):
``{"event": "add_message"|"token"|"end"|"error", "data": ...}``; ``end`` carries the full result
(``data.result``). A failing run sends two ``error`` events (an error message object, then
``{"error": "500: {json}"}``) and no ``end``: the call fails with the clearer of the two. API keys
are per Langflow user; a flow's ``api_key`` in ``flows`` replaces the backend's key for that flow's
runs. Since 1.5 every request needs a key: a 403 is reported as `FlowUnauthorized`.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from urllib.parse import quote

import httpx

from actors.backends.base import make_catalog
from actors.backends.http_flow import HttpFlowBackend, iter_frames, readable_error
from router.errors import (
    BackendFailed,
    BackendRejectedArguments,
    BackendUnavailable,
    FlowUnauthorized,
    InvalidRequest,
)
from router.settings import LangflowSpec
from router.values import CallContext, CallOutcome, Capability, Catalog

__all__ = ["FlowUnauthorized", "LangflowBackend"]
_STREAMED = "\x00streamed_text"  # what the stream said, used when the final result has no message

# After a stream's first `error` event Langflow sends a second, clearer one and closes: wait this long.
ERROR_GRACE_S = 2.0
_INPUT_COMPONENTS = ("ChatInput", "Chat Input", "TextInput", "Text Input")
_TWEAK_REFUSED = "cannot pass a tweak with the same name"

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "the input value for the flow"},
                   "tweaks": {"type": "object", "description": "overrides keyed by component id"}},
}


def _dig(obj: Any, *path: str | int) -> Any:
    """obj[p0][p1]... or None when any step is missing or of the wrong type."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(obj, list) or len(obj) <= step:
                return None
        elif not isinstance(obj, dict):
            return None
        obj = obj[step] if isinstance(step, int) else obj.get(step)
    return obj


def answer_text(result: Any) -> str | None:
    """The flow's answer in a run result, looked for where Langflow versions have put it."""
    outputs = _dig(result, "outputs", 0, "outputs")
    for out in outputs if isinstance(outputs, list) else ():
        for path in (("results", "message", "text"), ("messages", 0, "message"), ("artifacts", "message"),
                     ("outputs", "message", "message")):
            text = _dig(out, *path)
            if isinstance(text, str):
                return text
    return None


class LangflowBackend(HttpFlowBackend):
    kind = "langflow"
    product = "Langflow"

    def __init__(self, spec: LangflowSpec) -> None:
        super().__init__(spec)
        self.langflow = spec

    def _auth(self, key: str | None) -> dict[str, str]:
        return {"x-api-key": key} if key else {}

    def _missing_flow(self, status: int, message: str) -> bool:
        # A flow id that is not a UUID (nor an endpoint name) fails Langflow's UUID parsing with a 400.
        return status == 404 or (status == 400 and "badly formed hexadecimal uuid" in message.lower())

    async def _probe(self, timeout_s: float, what: str) -> None:
        resp = await self._get("/health_check", what=what, timeout_s=timeout_s)
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code != 200 or not isinstance(body, dict) or body.get("status") != "ok":
            detail = ", ".join(f"{k}: {v}" for k, v in body.items()) if isinstance(body, dict) else "no JSON"
            raise BackendUnavailable(f"backend {self.name!r} ({what}): /health_check answered HTTP "
                                     f"{resp.status_code} ({self.redact(detail)[:200]})", backend=self.name)

    async def list_capabilities(self) -> Catalog:
        what = "listing flows"
        resp = await self._get("/api/v1/flows/", what=what, timeout_s=self.spec.timeout_s,
                               headers=self._auth(self._key()),
                               params={"get_all": "true", "header_flows": "true", "remove_example_flows": "true"})
        if resp.status_code >= 400:
            raise self._status_error(resp, what)
        body = self._json(resp.content, what)
        items = body.get("items") if isinstance(body, dict) else body  # paginated form: {items, total, ...}
        if not isinstance(items, list):
            raise BackendFailed(f"backend {self.name!r} ({what}): malformed response (no list of flows)",
                                backend=self.name)
        caps: list[Capability] = []
        names: set[str] = set()
        for flow in items:
            flow_id = flow.get("id") if isinstance(flow, dict) else None
            if not isinstance(flow_id, str) or not flow_id or flow.get("is_component"):
                continue
            endpoint = flow.get("endpoint_name") if isinstance(flow.get("endpoint_name"), str) else None
            fs = self._flow_spec(flow_id, endpoint)
            if fs is None and self.spec.only_listed_flows:
                continue
            title = str(flow.get("name") or endpoint or flow_id)
            name = (fs.name if fs and fs.name else None) or title
            if name in names:
                name = f"{name} ({flow_id[:8]})"
            names.add(name)
            own = str(flow.get("description") or "").strip() or f"Langflow flow {title!r}"
            description = (fs.description if fs and fs.description else None) or own
            flow_tags = [t for t in flow.get("tags") or [] if isinstance(t, str)]
            tags = tuple(dict.fromkeys([*(fs.tags if fs else []), *flow_tags]))
            caps.append(Capability(backend=self.name, name=name, kind="flow", description=description,
                                   title=title, input_schema=_INPUT_SCHEMA, target=flow_id,
                                   intents=tuple(fs.intents) if fs else (), tags=tags))
        description = self.spec.description or "Langflow flows: " + ", ".join(c.name for c in caps)
        return make_catalog(self.name, description, caps, self.spec.intents)

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext) -> CallOutcome:
        flow_id = capability.target or capability.name
        stream = bool(context.parameters is not None and context.parameters.stream)
        given = arguments.get("question", arguments.get("input_value"))
        body: dict[str, Any] = {
            "input_value": given if isinstance(given, str) and given else context.question,
            "input_type": self.langflow.input_type, "output_type": self.langflow.output_type,
            "tweaks": arguments.get("tweaks") if isinstance(arguments.get("tweaks"), dict) else {},
        }
        # Without one, Langflow keeps the conversation under the flow's id, one memory for every caller: a
        # call with no session gets a session of its own, used once.
        body["session_id"] = context.session_id or f"mcp-router-{uuid.uuid4().hex}"
        tweaks = body["tweaks"]
        # A tweak keyed by a component sets that component; a top-level one sets every component of the flow.
        if "session_id" in tweaks or any(isinstance(t, dict) and "session_id" in t for t in tweaks.values()):
            # Sessions are the router's, one namespace per caller; a tweak could name another's.
            # Refused before anything is sent: an invalid request (400), which says nothing of the backend.
            raise InvalidRequest("tweaks may not set a component's session_id: pass `session_id` in the request",
                                 backend=self.name, tool=capability.name)
        headers = {**self._trace(context), **self._auth(self._key(flow_id))}
        try:
            result, latency = await self._post_flow(
                capability, f"/api/v1/run/{quote(flow_id, safe='')}", body=body, headers=headers,
                timeout_s=timeout_s, params={"stream": str(stream).lower()}, read_stream=self._read_stream)
        except BackendRejectedArguments as exc:
            raise self._name_tweaks(exc, body["tweaks"], capability) from None
        streamed = result.pop(_STREAMED, None)
        text = answer_text(result)
        if text is None:
            text = streamed
        if text is None:
            raise BackendFailed(f"backend {self.name!r} (flow {capability.name!r}): no message in the flow's "
                                "output", backend=self.name, tool=capability.name)
        session = result.get("session_id")
        if not context.session_id or not isinstance(session, str) or not session:
            # Without a session in the request Langflow reports the flow's id (a UUID even when the
            # target was an endpoint name): not a session.
            session = context.session_id
        return CallOutcome(backend=self.name, capability=capability.name, ok=True, latency_ms=latency,
                           text=text, session_id=session)

    async def _read_stream(self, resp: httpx.Response, cap: Capability) -> dict[str, Any]:
        """Read events until `end`; its result wins, else the streamed tokens or the last AI message."""
        what = f"flow {cap.name!r}"
        tokens: list[str] = []
        last_message: str | None = None
        session: str | None = None
        errors: list[str] = []  # a failing run sends a message object, then {"error": "500: {json}"}
        try:
            async with asyncio.timeout(None) as grace:
                async for frame in iter_frames(resp, self.max_answer_bytes):
                    event = self._json(frame, what, cap, obj=True)
                    kind, data = event.get("event"), event.get("data")
                    if kind == "error":
                        errors.append(self._error_text(data))
                        if isinstance(data, dict) and isinstance(data.get("error"), str):
                            break  # the run's own error: the clearer one, and the last
                        grace.reschedule(asyncio.get_running_loop().time() + ERROR_GRACE_S)
                    elif errors:
                        continue
                    elif kind == "token":
                        chunk = data.get("chunk") if isinstance(data, dict) else data
                        if isinstance(chunk, str):
                            tokens.append(chunk)
                    elif kind == "add_message" and isinstance(data, dict):
                        session = data.get("session_id") or session
                        if data.get("sender") != "User" and isinstance(data.get("text"), str) and data["text"]:
                            last_message = data["text"]
                    elif kind == "end":
                        result = data.get("result", data) if isinstance(data, dict) else None
                        if isinstance(result, dict) and "outputs" in result:
                            return {**result, _STREAMED: "".join(tokens) or last_message}
                        break
        except TimeoutError:
            if not errors or not grace.expired():
                raise
        if errors:
            error = errors[-1]
            if _TWEAK_REFUSED in error:
                raise BackendRejectedArguments(f"backend {self.name!r} ({what}): Langflow rejected the request: "
                                               f"{error}", backend=self.name, tool=cap.name)
            raise BackendFailed(f"backend {self.name!r} ({what}): the flow failed: {error}", backend=self.name,
                                tool=cap.name)
        text = "".join(tokens) or last_message
        if text is None:
            raise BackendFailed(f"backend {self.name!r} ({what}): the stream ended without a result",
                                backend=self.name, tool=cap.name)
        return {"session_id": session, _STREAMED: text}

    def _error_text(self, data: Any) -> str:
        """An `error` event's message: the run's error string unpacked, else the error message's text."""
        if isinstance(data, dict) and not isinstance(data.get("error"), str):
            data = {k: v for k, v in data.items() if k != "error"}  # an error message object: "error": true
        return self.redact(readable_error(data))[:300]

    def _name_tweaks(self, exc: BackendRejectedArguments, tweaks: dict[str, Any],
                     cap: Capability) -> BackendRejectedArguments:
        """Langflow's 400 does not say which tweak it refused; the request does."""
        refused = [f"{key}.input_value" for key, value in tweaks.items()
                   if isinstance(value, dict) and "input_value" in value
                   and any(name in key for name in _INPUT_COMPONENTS)]
        if not refused:
            return exc
        return BackendRejectedArguments(
            f"{exc.message}; refused tweak: {', '.join(refused)} (the question is the input's value: give it as "
            "`question` instead)", backend=self.name, tool=cap.name)
