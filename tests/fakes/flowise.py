"""A fake Flowise 3.1.2: the endpoints the router uses, with the behaviour observed on the real one.

- ``GET /api/v1/ping`` -> ``200 pong`` (text).
- ``GET /api/v1/chatflows`` needs ``Authorization: Bearer <key>`` (401 ``{"error": "Unauthorized
  Access"}`` otherwise); a JSON array, or ``{data, total}`` when ``page`` and ``limit`` are given.
- ``POST /api/v1/prediction/{id}``: unknown id -> 404; a chatflow with its own API key rejects any
  other key (or none) with **HTTP 500** and ``message: "Error: buildChatflow - Unauthorized"``;
  ``question`` may be missing (not rejected); ``chatId = body.chatId ?? overrideConfig.sessionId ??
  uuid``; the answer is ``{text, question, chatId, chatMessageId, sessionId, sourceDocuments?,
  usedTools?}``. With ``streaming: true`` a streamable flow answers ``text/event-stream`` frames
  ``message:\\ndata:{"event": ..., "data": ...}\\n\\n``: ``start`` (repeats the first token), ``token``
  per token, ``metadata``, ``sourceDocuments``, ``usedTools``, ``end`` (``"[DONE]"``); a flow that
  cannot stream answers plain JSON anyway.

Scripted behaviour per chatflow: its own key, not streamable, a delay (timeouts), a malformed body, a
500 error, an error event in the stream.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes import Recorded, RecordingFake, slow_down


@dataclass
class Chatflow:
    id: str
    name: str
    category: str | None = None
    type: str = "CHATFLOW"
    api_key: str | None = None  # the chatflow's own API key (apikeyid set): predictions need exactly it
    streamable: bool = True
    delay_s: float = 0.0
    malformed: bool = False
    error: str | None = None  # answer HTTP 500 with this message
    stream_error: str | None = None  # stream one token, then an `error` event
    source_documents: list[dict[str, Any]] = field(default_factory=list)
    used_tools: list[dict[str, Any]] = field(default_factory=list)

    def reply(self, question: str, history: list[Any]) -> str:
        text = f"{self.name} answers: {question}"
        return text + (f" (with {len(history)} earlier messages)" if history else "")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"statusCode": status, "success": False, "message": message, "stack": {}}, status)


class FakeFlowise(RecordingFake):
    def __init__(self, flows: list[Chatflow], *, api_key: str | None = "flowise-admin-key") -> None:
        self.flows = {f.id: f for f in flows}
        self.api_key = api_key
        super().__init__()
        self.app = Starlette(routes=[
            Route("/api/v1/ping", self.ping, methods=["GET"]),
            Route("/api/v1/chatflows", self.chatflows, methods=["GET"]),
            Route("/api/v1/prediction/{id}", self.prediction, methods=["POST"]),
        ])

    @staticmethod
    def _bearer(rec: Recorded) -> str | None:
        auth = rec.headers.get("authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None

    async def ping(self, request: Request) -> Response:
        await self._record(request)
        return PlainTextResponse("pong")

    async def chatflows(self, request: Request) -> Response:
        rec = await self._record(request)
        valid = {self.api_key, *(f.api_key for f in self.flows.values())} - {None}
        if self.api_key is not None and self._bearer(rec) not in valid:
            return JSONResponse({"error": "Unauthorized Access"}, 401)
        items = [{
            "id": f.id, "name": f.name, "flowData": json.dumps({"nodes": [], "edges": []}), "deployed": True,
            "isPublic": False, "apikeyid": f"key-{f.id}" if f.api_key else None, "chatbotConfig": None,
            "apiConfig": None, "analytic": None, "speechToText": None, "category": f.category, "type": f.type,
            "workspaceId": "ws-1", "createdDate": "2026-11-01T10:00:00.000Z",
            "updatedDate": "2026-11-01T10:00:00.000Z",
        } for f in self.flows.values()]
        if "page" in rec.query and "limit" in rec.query:
            page, limit = int(rec.query["page"]), int(rec.query["limit"])
            return JSONResponse({"data": items[(page - 1) * limit: page * limit], "total": len(items)})
        return JSONResponse(items)

    async def prediction(self, request: Request) -> Response:
        rec = await self._record(request)
        flow = self.flows.get(request.path_params["id"])
        if flow is None:
            return _error(404, f"Chatflow {request.path_params['id']} not found")
        if flow.api_key is not None and self._bearer(rec) != flow.api_key:
            return _error(500, "Error: buildChatflow - Unauthorized")
        body = rec.body if isinstance(rec.body, dict) else {}
        if flow.delay_s:
            await slow_down(request, flow.delay_s)
        if flow.error:
            return _error(500, f"Error: buildChatflow - {flow.error}")
        if flow.malformed:
            return Response(b'{"text": "half an answ', media_type="application/json")
        override = body.get("overrideConfig") if isinstance(body.get("overrideConfig"), dict) else {}
        chat_id = body.get("chatId") or override.get("sessionId") or str(uuid.uuid4())
        question = body.get("question") or ""
        history = body.get("history") if isinstance(body.get("history"), list) else []
        result: dict[str, Any] = {
            "text": flow.reply(question, history), "question": question, "chatId": chat_id,
            "chatMessageId": str(uuid.uuid4()), "sessionId": override.get("sessionId") or chat_id,
        }
        if flow.source_documents:
            result["sourceDocuments"] = flow.source_documents
        if flow.used_tools:
            result["usedTools"] = flow.used_tools
        if body.get("streaming") is True and flow.streamable:
            return StreamingResponse(self._stream(flow, result), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        return JSONResponse(result)

    async def _stream(self, flow: Chatflow, result: dict[str, Any]) -> AsyncIterator[str]:
        def frame(event: str, data: Any) -> str:
            return "message:\ndata:" + json.dumps({"event": event, "data": data}) + "\n\n"

        tokens = re.findall(r"\S+\s*", result["text"])
        yield frame("start", tokens[0])
        if flow.stream_error:
            yield frame("token", tokens[0])
            yield frame("error", flow.stream_error)
            yield frame("end", "[DONE]")
            return
        for token in tokens:
            yield frame("token", token)
            await asyncio.sleep(0)
        yield frame("metadata", {k: result[k] for k in ("chatId", "chatMessageId", "question", "sessionId")})
        if "sourceDocuments" in result:
            yield frame("sourceDocuments", result["sourceDocuments"])
        if "usedTools" in result:
            yield frame("usedTools", result["usedTools"])
        yield frame("end", "[DONE]")
