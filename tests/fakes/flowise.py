"""A fake Flowise 3.1.2: the endpoints the router uses, with the behaviour of the real one.

- ``GET /api/v1/ping`` -> ``200 pong`` (text).
- ``GET /api/v1/chatflows`` needs ``Authorization: Bearer <key>`` (401 ``{"error": "Unauthorized
  Access"}`` otherwise); a JSON array, or ``{data, total}`` when ``page`` and ``limit`` are given. A
  chatflow has no description field.
- ``GET /api/v1/chatflows-streaming/{id}`` (no key needed) -> ``{"isStreaming": bool}``; an agentflow
  always streams; an unknown id -> 500 ``Error: chatflowsService.checkIfChatflowIsValidForStreaming -
  Chatflow {id} not found``.
- ``POST /api/v1/prediction/{id}``, in Flowise's order: an id that is not a UUID -> 400 ``Invalid
  Chatflow ID``; an unknown one -> 404 ``Chatflow {id} not found in the database!``; then, when
  ``streaming`` is true and the flow can stream, the ``text/event-stream`` response opens at once and
  everything after (the per-flow key, the run) fails as an ``error`` event followed by ``end``.
  Otherwise the run answers JSON; a chatflow with its own API key rejects any other key (or none) with
  **HTTP 500** ``Error: predictionsServices.buildChatflow - Unauthorized``, a failing flow with a 500
  ``Error: predictionsServices.buildChatflow - {error}``. Flowise's error handler writes nothing when
  the request asked for streaming: every such error then gets **no response at all** (the connection
  stays open until the client gives up).
- ``question`` may be missing (not rejected); ``chatId = body.chatId ?? overrideConfig.sessionId ??
  uuid``; the answer is ``{text, question, chatId, chatMessageId, sessionId, sourceDocuments?,
  usedTools?}``. Chatflow streams are frames ``message:\\ndata:{"event": ..., "data": ...}\\n\\n``:
  ``start`` (repeats the first token), ``token`` per token, ``sourceDocuments``, ``usedTools``,
  ``metadata``, ``end`` (``"[DONE]"``). Agentflow streams have no ``start``: ``agentFlowEvent``
  (``INPROGRESS``, then ``FINISHED``), ``nextAgentFlow`` per node and status, ``token``,
  ``agentFlowExecutedData`` (the executed nodes with their outputs), ``metadata``, ``end``.

Scripted behaviour per chatflow: its own key, not streamable, a delay (timeouts), a malformed body, a
failing run, an error event in the stream, an agentflow whose last node streams no token.
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

_BUILD = "Error: predictionsServices.buildChatflow - "
_NO_ANSWER_S = 3600.0  # "no response": held open until the client disconnects


@dataclass
class Chatflow:
    id: str
    name: str
    category: str | None = None
    type: str = "CHATFLOW"
    api_key: str | None = None  # the chatflow's own API key (apikeyid set): predictions need exactly it
    streamable: bool = True  # ignored for AGENTFLOW, which Flowise always streams
    delay_s: float = 0.0
    malformed: bool = False
    body: dict[str, Any] | None = None  # answered (200) instead of a prediction: a proxy's or a plugin's body
    error: str | None = None  # the run fails with this message
    stream_error: str | None = None  # stream one token, then an `error` event
    stopped: bool = False  # stream one token, then the `abort` event of a run stopped part way (then `end`)
    streams_tokens: bool = True  # agentflow: the last node streams its answer as a token
    source_documents: list[dict[str, Any]] = field(default_factory=list)
    used_tools: list[dict[str, Any]] = field(default_factory=list)
    # The chatflow's rate limit (`apiConfig.rateLimit`): predictions allowed, then express-rate-limit's 429 with
    # the flow's message as plain text, before anything runs (Flowise counts callers by address).
    quota: int | None = None

    @property
    def can_stream(self) -> bool:
        return self.type == "AGENTFLOW" or self.streamable

    def reply(self, question: str, history: list[Any]) -> str:
        text = f"{self.name} answers: {question}"
        return text + (f" (with {len(history)} earlier messages)" if history else "")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"statusCode": status, "success": False, "message": message, "stack": {}}, status)


def _frame(event: str, data: Any) -> str:
    return "message:\ndata:" + json.dumps({"event": event, "data": data}) + "\n\n"


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


class FakeFlowise(RecordingFake):
    def __init__(self, flows: list[Chatflow], *, api_key: str | None = "flowise-admin-key") -> None:
        self.flows = {f.id: f for f in flows}
        self.api_key = api_key
        self.unanswered = 0  # requests Flowise would leave without any response
        super().__init__()
        self.app = Starlette(routes=[
            Route("/api/v1/ping", self.ping, methods=["GET"]),
            Route("/api/v1/chatflows", self.chatflows, methods=["GET"]),
            Route("/api/v1/chatflows-streaming/{id}", self.chatflows_streaming, methods=["GET"]),
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

    async def chatflows_streaming(self, request: Request) -> Response:
        await self._record(request)
        flow = self.flows.get(request.path_params["id"])
        if flow is None:
            return _error(500, "Error: chatflowsService.checkIfChatflowIsValidForStreaming - Chatflow "
                               f"{request.path_params['id']} not found")
        return JSONResponse({"isStreaming": flow.can_stream})

    async def prediction(self, request: Request) -> Response:
        rec = await self._record(request)
        body = rec.body if isinstance(rec.body, dict) else {}
        streaming = body.get("streaming") in (True, "true")
        flow_id = request.path_params["id"]
        flow = self.flows.get(flow_id)
        if not _is_uuid(flow_id):
            return await self._fail(request, streaming, 400, "Invalid Chatflow ID")
        if flow is None:
            return await self._fail(request, streaming, 404, f"Chatflow {flow_id} not found in the database!")
        if flow.quota is not None:
            if flow.quota <= 0:
                return PlainTextResponse("You have reached the quota for this chatflow", 429)
            flow.quota -= 1
        if streaming and flow.can_stream:
            return StreamingResponse(self._stream(request, flow, rec, body), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        problem = await self._run_problem(request, flow, rec)
        if problem is not None:
            return await self._fail(request, streaming, 500, _BUILD + problem)
        if flow.malformed:
            return Response(b'{"text": "half an answ', media_type="application/json")
        return JSONResponse(flow.body if flow.body is not None else self._result(flow, body))

    async def _fail(self, request: Request, streaming: bool, status: int, message: str) -> Response:
        """Flowise's error handler: JSON, unless the request asked for streaming; then nothing."""
        if streaming:
            self.unanswered += 1
            await slow_down(request, _NO_ANSWER_S)
        return _error(status, message)

    async def _run_problem(self, request: Request, flow: Chatflow, rec: Recorded) -> str | None:
        """What makes the run fail (the per-flow key, the flow's scripted error), after its delay."""
        if flow.api_key is not None and self._bearer(rec) != flow.api_key:
            return "Unauthorized"
        if flow.delay_s:
            await slow_down(request, flow.delay_s)
        return flow.error

    @staticmethod
    def _result(flow: Chatflow, body: dict[str, Any]) -> dict[str, Any]:
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
        return result

    async def _stream(self, request: Request, flow: Chatflow, rec: Recorded,
                      body: dict[str, Any]) -> AsyncIterator[str]:
        problem = await self._run_problem(request, flow, rec)
        if problem is not None:
            yield _frame("error", _BUILD + problem)
            yield _frame("end", "[DONE]")
            return
        result = self._result(flow, body)
        tokens = re.findall(r"\S+\s*", result["text"])
        agent = flow.type == "AGENTFLOW"
        if agent:
            yield _frame("agentFlowEvent", "INPROGRESS")
            yield _frame("nextAgentFlow", {"nodeId": "directReplyAgentflow_0", "nodeLabel": "Direct Reply",
                                           "status": "INPROGRESS"})
        else:
            yield _frame("start", tokens[0])
        if flow.stream_error:
            yield _frame("token", tokens[0])
            yield _frame("error", flow.stream_error)
            yield _frame("end", "[DONE]")
            return
        if flow.stopped:  # SSEStreamer.streamAbortEvent, then removeClient's `end`
            yield _frame("token", tokens[0])
            yield _frame("abort", "[DONE]")
            yield _frame("end", "[DONE]")
            return
        for token in tokens if (flow.streams_tokens or not agent) else ():
            yield _frame("token", token)
            await asyncio.sleep(0)
        if "sourceDocuments" in result:
            yield _frame("sourceDocuments", result["sourceDocuments"])
        if "usedTools" in result:
            yield _frame("usedTools", result["usedTools"])
        if agent:
            node = {"nodeId": "directReplyAgentflow_0", "nodeLabel": "Direct Reply", "status": "FINISHED"}
            yield _frame("nextAgentFlow", node)
            yield _frame("agentFlowExecutedData", [
                {"nodeId": "startAgentflow_0", "nodeLabel": "Start", "status": "FINISHED",
                 "data": {"id": "startAgentflow_0", "name": "startAgentflow", "input": {"question": body.get(
                     "question")}, "output": {"question": body.get("question")}}, "previousNodeIds": []},
                {**node, "previousNodeIds": ["startAgentflow_0"],
                 "data": {"id": "directReplyAgentflow_0", "name": "directReplyAgentflow", "input": {},
                          "output": {"content": result["text"]}}},
            ])
            yield _frame("agentFlowEvent", "FINISHED")
        yield _frame("metadata", {k: result[k] for k in ("chatId", "chatMessageId", "question", "sessionId")})
        yield _frame("end", "[DONE]")
