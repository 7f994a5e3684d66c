"""A fake Langflow 1.13.0: the endpoints the router uses, with the behaviour observed on the real one.

- ``GET /health_check`` -> ``{"status": "ok", "chat": "ok", "db": "ok"}`` (500 with the failing part
  otherwise); ``GET /health`` answers ``ok`` regardless (it can answer before the app is ready).
- Every ``/api/v1`` request needs an API key (``x-api-key`` header or query), since 1.5: 403
  ``{"detail": ...}`` without one or with an unknown one.
- ``GET /api/v1/flows/`` (``get_all``, default true -> a list; false -> ``{items, total, page, size,
  pages}``; ``header_flows`` drops ``data``). The starter templates (``example=True``, in the
  "Starter Projects" folder) are listed too unless ``remove_example_flows=true``; they cannot be run
  (404 "Flow identifier … not found").
- ``POST /api/v1/run/{flow_id|endpoint_name}?stream=false`` ``{input_value, input_type, output_type,
  session_id, tweaks}``: unknown flow -> 404; invalid body values are ignored; without ``session_id``
  the answer's session id is the flow's id (its UUID, also when it was run by endpoint name); the
  answer is at ``outputs[0].outputs[0].results.message.text``. A tweak giving a Chat Input component an
  ``input_value`` while the request has one (``input_type`` chat) -> 400 ``{"detail": "If you pass an
  input_value to the chat input, you cannot pass a tweak with the same name."}``. A failing run -> 500
  whose ``detail`` is a JSON object encoded in a string: ``{"message": "Error running graph: …",
  "traceback": null, ...}``.
- With ``stream=true``: ``text/event-stream`` made of bare JSON objects separated by blank lines,
  ``add_message`` / ``token`` / ``end`` (the full result in ``data.result``). A failing run sends two
  ``error`` events, an error message object (``"error": true``, ``text`` the component's error), then
  ``{"error": "500: {json detail}"}``, and no ``end``; a refused tweak sends one ``{"error": ...}``.

Scripted behaviour per flow: where the answer sits (``shape``), no token streaming, a delay, a
malformed body, a failing run, a failing stream, being a starter template.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes import Recorded, RecordingFake, slow_down

_COMPONENT = "ChatOutput-x7Kq2"


@dataclass
class LangflowFlow:
    id: str
    name: str
    description: str = ""
    endpoint_name: str | None = None
    tags: list[str] = field(default_factory=list)
    is_component: bool = False
    # message: results.message.text; messages: only messages[0].message; artifacts: only
    # artifacts.message; empty: no message anywhere.
    shape: Literal["message", "messages", "artifacts", "empty"] = "message"
    streams_tokens: bool = True
    delay_s: float = 0.0
    malformed: bool = False
    error: str | None = None  # the run fails: "Error running graph: {error}"
    stream_error: str | None = None  # the stream fails after the input message, with this error
    example: bool = False  # a starter template

    def reply(self, value: str) -> str:
        return f"{self.name} says: {value}"


def _message(text: str, sender: str, sid: str, flow_id: str) -> dict[str, Any]:
    return {"timestamp": "2026-11-01 10:00:00 UTC", "sender": sender,
            "sender_name": "AI" if sender == "Machine" else "User", "session_id": sid, "text": text,
            "files": [], "error": False, "edit": False,
            "properties": {"source": {"id": _COMPONENT}}, "category": "message", "content_blocks": [],
            "id": str(uuid.uuid4()), "flow_id": flow_id}


def _detail(message: str) -> str:
    """Langflow's APIException detail: an ExceptionBody dumped to a JSON string."""
    return json.dumps({"message": message, "traceback": None, "description": None, "code": None,
                       "suggestion": None})


def _refused_tweak(body: dict[str, Any]) -> str | None:
    tweaks = body.get("tweaks") if isinstance(body.get("tweaks"), dict) else {}
    for key, value in tweaks.items():
        if (isinstance(value, dict) and value.get("input_value") is not None and body.get("input_value") is not None
                and body.get("input_type", "chat") == "chat" and ("ChatInput" in key or "Chat Input" in key)):
            return "If you pass an input_value to the chat input, you cannot pass a tweak with the same name."
    return None


def run_result(flow: LangflowFlow, sid: str, value: str) -> dict[str, Any]:
    text = flow.reply(value)
    out: dict[str, Any] = {
        "results": {"message": _message(text, "Machine", sid, flow.id)},
        "artifacts": {"message": text, "sender": "Machine", "sender_name": "AI", "files": [],
                      "type": "object"},
        "outputs": {"message": {"message": text, "type": "text"}},
        "logs": {"message": []},
        "messages": [{"message": text, "sender": "Machine", "sender_name": "AI", "session_id": sid,
                      "stream_url": None, "component_id": _COMPONENT, "files": [], "type": "text"}],
        "timedelta": None, "duration": None, "component_display_name": "Chat Output",
        "component_id": _COMPONENT, "used_frozen_result": False,
    }
    if flow.shape != "message":
        out["results"], out["outputs"] = {}, {}
    if flow.shape in ("artifacts", "empty"):
        out["messages"] = []
    if flow.shape in ("messages", "empty"):
        out["artifacts"] = {}
    return {"session_id": sid, "outputs": [{"inputs": {"input_value": value}, "outputs": [out]}]}


class FakeLangflow(RecordingFake):
    def __init__(self, flows: list[LangflowFlow], *, api_keys: tuple[str, ...] = ("sk-langflow-key",),
                 health: str = "ok") -> None:
        self.flows = flows
        self.api_keys = set(api_keys)
        self.health = health
        super().__init__()
        self.app = Starlette(routes=[
            Route("/health", self.health_endpoint, methods=["GET"]),
            Route("/health_check", self.health_check, methods=["GET"]),
            Route("/api/v1/flows/", self.list_flows, methods=["GET"]),
            Route("/api/v1/run/{flow}", self.run, methods=["POST"]),
        ])

    def _refused(self, rec: Recorded) -> Response | None:
        key = rec.headers.get("x-api-key") or rec.query.get("x-api-key")
        if not key:
            return JSONResponse({"detail": "An API key must be passed as query or header"}, 403)
        if key not in self.api_keys:
            return JSONResponse({"detail": "Invalid or missing API key"}, 403)
        return None

    async def health_endpoint(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"status": "ok"})

    async def health_check(self, request: Request) -> Response:
        await self._record(request)
        ok = self.health == "ok"
        body = {"status": "ok" if ok else "nok", "chat": "ok", "db": "ok" if ok else self.health}
        return JSONResponse(body, 200 if ok else 500)

    async def list_flows(self, request: Request) -> Response:
        rec = await self._record(request)
        if (refused := self._refused(rec)) is not None:
            return refused
        header_only = rec.query.get("header_flows", "false").lower() == "true"
        no_examples = rec.query.get("remove_example_flows", "false").lower() == "true"
        items = []
        for f in self.flows:
            if f.example and no_examples:
                continue
            item: dict[str, Any] = {
                "id": f.id, "name": f.name, "description": f.description, "endpoint_name": f.endpoint_name,
                "tags": f.tags, "is_component": f.is_component,
                "folder_id": "starter-projects" if f.example else "folder-1",
                "access_type": "PRIVATE", "mcp_enabled": False, "action_name": None,
                "action_description": None,
            }
            if not header_only:
                item |= {"data": {"nodes": [], "edges": []}, "icon": None, "gradient": None, "webhook": False,
                         "locked": False, "user_id": "user-1", "updated_at": "2026-11-01T10:00:00"}
            items.append(item)
        if rec.query.get("get_all", "true").lower() == "true":
            return JSONResponse(items)
        page, size = int(rec.query.get("page", 1)), int(rec.query.get("size", 50))
        return JSONResponse({"items": items[(page - 1) * size: page * size], "total": len(items),
                             "page": page, "size": size, "pages": max(1, -(-len(items) // size))})

    async def run(self, request: Request) -> Response:
        rec = await self._record(request)
        if (refused := self._refused(rec)) is not None:
            return refused
        ident = request.path_params["flow"]
        flow = next((f for f in self.flows if ident in (f.id, f.endpoint_name) and not f.example), None)
        if flow is None:
            return JSONResponse({"detail": f"Flow identifier {ident} not found"}, 404)
        body = rec.body if isinstance(rec.body, dict) else {}
        value = body.get("input_value") if isinstance(body.get("input_value"), str) else ""
        given = body.get("session_id")
        sid = given if isinstance(given, str) and given else flow.id  # no session: the flow id stands in
        refused = _refused_tweak(body)
        if rec.query.get("stream", "false").lower() == "true":
            return StreamingResponse(self._stream(request, flow, sid, value, refused),
                                     media_type="text/event-stream")
        if refused:
            return JSONResponse({"detail": refused}, 400)
        if flow.delay_s:
            await slow_down(request, flow.delay_s)
        if flow.error:
            return JSONResponse({"detail": _detail(f"Error running graph: {flow.error}")}, 500)
        if flow.malformed:
            return Response(b'{"session_id": "abc", "outputs": [', media_type="application/json")
        return JSONResponse(run_result(flow, sid, value))

    async def _stream(self, request: Request, flow: LangflowFlow, sid: str, value: str,
                      refused: str | None) -> AsyncIterator[str]:
        def event(name: str, data: Any) -> str:
            return json.dumps({"event": name, "data": data}) + "\n\n"

        if refused:
            yield event("error", {"error": refused})
            return
        if flow.delay_s:
            await slow_down(request, flow.delay_s)
        yield event("add_message", _message(value, "User", sid, flow.id))
        if flow.stream_error:
            failed = _message(flow.stream_error, "Machine", sid, flow.id) | {
                "error": True, "category": "error", "sender_name": "Language Model",
                "content_blocks": [{"title": "Error", "contents": [
                    {"type": "error", "component": "Language Model", "reason": flow.stream_error}]}]}
            yield event("error", failed)
            yield event("error", {"error": "500: " + _detail(f"Error running graph: {flow.stream_error}")})
            return
        text = flow.reply(value)
        if flow.streams_tokens:
            first = _message("", "Machine", sid, flow.id)
            yield event("add_message", first)
            for token in re.findall(r"\S+\s*", text):
                yield event("token", {"chunk": token, "id": first["id"], "timestamp": first["timestamp"]})
                await asyncio.sleep(0)
        yield event("add_message", _message(text, "Machine", sid, flow.id))
        yield event("end", {"result": run_result(flow, sid, value)})
