"""A fake OpenAI-compatible API: ``POST /v1/chat/completions`` and ``POST /v1/embeddings``.

Written from the public OpenAI API reference; it is not a model. Each chat reply is scripted per
test, as a queue of `Reply` / `ApiError` values (or callables receiving the request JSON), or by one
handler for every request:

    fake = FakeOpenAI([Reply(tool_calls=[("clock__now", {"tz": "UTC"})]), Reply("It is noon.")])
    with serve_app(fake.app) as url:          # real HTTP on 127.0.0.1
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test")
    fake.chat_requests[-1]["messages"]        # what the client sent

What it checks, answering 400 with the API's error shape as the real service does: ``model`` and a
non-empty ``messages``; message roles; a ``tool`` message must answer a ``tool_call_id`` of the
preceding assistant message, and every tool call must be answered before the next turn; ``tools`` are
functions named ``^[a-zA-Z0-9_-]{1,64}$``; ``tool_choice`` only with ``tools``; ``response_format``
``text`` / ``json_object`` / ``json_schema`` (name and schema required; with ``strict: true`` every
object needs ``additionalProperties: false`` and every property in ``required``); ``temperature`` in
[0, 2]; ``max_tokens`` >= 1. A wrong bearer key is 401 when the fake has a key. Streaming is not
supported (400). Answers: ``choices[0].message`` with ``content`` or ``tool_calls`` (``{id, type:
"function", function: {name, arguments}}``, arguments a JSON string), ``finish_reason`` ``stop`` or
``tool_calls``, and ``usage``.

Embeddings: ``input`` a string or a list of strings; ``encoding_format`` ``float`` or ``base64``
(little-endian float32, what the Python SDK asks for by default); ``dimensions`` shortens vectors;
``data[{object, index, embedding}]``, ``model`` and ``usage``. Vectors come from `embed` (default: a
deterministic hash, deliberately not normalised); ``reverse_embeddings`` lists ``data`` in reverse
order (``index`` still right), as the API does not promise order.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import re
import struct
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes import Recorded, record_request, slow_down

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
_UNANSWERED = ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
               "'tool_call_id'. The following tool_call_ids did not have response messages: ")


@dataclass
class Reply:
    """One assistant message: text, tool calls ``(name, arguments)`` or both; a str argument is sent as is."""

    content: str | None = None
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    finish_reason: str | None = None  # default: "tool_calls" when there are tool calls, else "stop"
    refusal: str | None = None
    delay_s: float = 0.0


@dataclass
class ApiError:
    """An error response: ``{"error": {message, type, param, code}}`` with this HTTP status."""

    status: int
    message: str
    type: str = "server_error"
    code: str | None = None
    param: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Raw:
    """A chat completion body sent as it is, whatever its shape: what a broken or hostile server answers."""

    body: Any


def json_reply(value: Any) -> Reply:
    """A structured-output answer: the JSON text of `value` as the message content."""
    return Reply(json.dumps(value))


Script = Reply | ApiError | Raw | Callable[[dict[str, Any]], Any]


class _Invalid(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param = message, param


def default_embedding(text: str, dim: int = 16) -> list[float]:
    """A deterministic, unnormalised vector for `text`."""
    raw = hashlib.sha256(text.encode()).digest()
    return [(b - 127.5) / 40.0 for b in (raw * ((dim // len(raw)) + 1))[:dim]]


class FakeOpenAI:
    def __init__(self, replies: Iterable[Script] = (), *,
                 handler: Callable[[dict[str, Any]], Any] | None = None, api_key: str | None = None,
                 embed: Callable[[str], list[float]] = default_embedding,
                 reverse_embeddings: bool = False) -> None:
        self.queue: deque[Script] = deque(replies)
        self.handler = handler
        self.api_key = api_key
        self.embed = embed
        self.reverse_embeddings = reverse_embeddings
        self.requests: list[Recorded] = []
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
        ])

    def push(self, *replies: Script) -> None:
        self.queue.extend(replies)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/embeddings")]

    # -- plumbing ------------------------------------------------------------------------------

    async def _receive(self, request: Request) -> tuple[Recorded, Response | None]:
        rec = await record_request(request)
        self.requests.append(rec)
        auth = rec.headers.get("authorization", "")
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            return rec, _error(ApiError(401, "Incorrect API key provided.", "invalid_request_error",
                                        "invalid_api_key"))
        if not isinstance(rec.body, dict):
            return rec, _error(ApiError(400, "We could not parse the JSON body of your request.",
                                        "invalid_request_error"))
        return rec, None

    # -- chat completions ----------------------------------------------------------------------

    async def chat_completions(self, request: Request) -> Response:
        rec, refused = await self._receive(request)
        if refused is not None:
            return refused
        body: dict[str, Any] = rec.body
        try:
            _check_chat(body)
        except _Invalid as exc:
            return _error(ApiError(400, exc.message, "invalid_request_error", param=exc.param))
        script: Any = self.queue.popleft() if self.queue else self.handler
        if script is None:
            return _error(ApiError(400, "the fake OpenAI server has no scripted reply left", "fake_script"))
        while callable(script):
            script = script(body)
            if inspect.isawaitable(script):
                script = await script
        if isinstance(script, ApiError):
            return _error(script)
        if isinstance(script, Raw):  # ASCII JSON, as below
            return Response(json.dumps(script.body), media_type="application/json")
        reply: Reply = script
        if reply.delay_s:
            await slow_down(request, reply.delay_s)
        calls = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": {
            "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for name, args in reply.tool_calls]
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": reply.refusal,
                                   "annotations": []}
        if calls:
            message["tool_calls"] = calls
        prompt = sum(len(str(m.get("content") or "").split()) + 4 for m in body["messages"])
        completion = len((reply.content or "").split())
        completion += sum(len(c["function"]["arguments"]) // 4 for c in calls)
        # ASCII JSON, as most servers write it: a broken model's lone surrogate travels as its escape.
        return Response(json.dumps({
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"], "system_fingerprint": None,
            "service_tier": "default",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop")}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        }), media_type="application/json")

    # -- embeddings ----------------------------------------------------------------------------

    async def embeddings(self, request: Request) -> Response:
        rec, refused = await self._receive(request)
        if refused is not None:
            return refused
        body: dict[str, Any] = rec.body
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else inputs
        fmt = body.get("encoding_format", "float")
        dims = body.get("dimensions")
        problem = None
        if not body.get("model"):
            problem = ("you must provide a model parameter", "model")
        elif not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
            problem = ("'$.input' is invalid. Please check the API reference.", "input")
        elif fmt not in ("float", "base64"):
            problem = (f"Invalid value: '{fmt}'. Supported values are: 'float' and 'base64'.",
                       "encoding_format")
        elif dims is not None and (not isinstance(dims, int) or dims < 1):
            problem = ("Invalid 'dimensions': expected a positive integer.", "dimensions")
        if problem is not None:
            return _error(ApiError(400, problem[0], "invalid_request_error", param=problem[1]))
        data = []
        for i, text in enumerate(texts):
            vec = [float(x) for x in self.embed(text)][:dims]
            encoded: Any = vec
            if fmt == "base64":
                encoded = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        if self.reverse_embeddings:
            data.reverse()
        tokens = sum(len(t.split()) for t in texts)
        return JSONResponse({"object": "list", "data": data, "model": body["model"],
                             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def _error(err: ApiError) -> JSONResponse:
    return JSONResponse({"error": {"message": err.message, "type": err.type, "param": err.param,
                                   "code": err.code}}, err.status, headers=err.headers)


def _check_chat(body: dict[str, Any]) -> None:
    """Raise `_Invalid` for what the API rejects with 400 (the subset described in the module docstring)."""
    if not body.get("model"):
        raise _Invalid("you must provide a model parameter", "model")
    if body.get("stream"):
        raise _Invalid("streaming is not supported by this fake", "stream")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Invalid("[] is too short - 'messages'", "messages")
    _check_messages(messages)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            raise _Invalid("[] is too short - 'tools'", "tools")
        for i, tool in enumerate(tools):
            fn = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(fn, dict) or tool.get("type") != "function":
                raise _Invalid(f"Invalid value for 'tools[{i}].type'.", f"tools[{i}].type")
            if not isinstance(fn.get("name"), str) or not _NAME.match(fn["name"]):
                raise _Invalid(f"Invalid 'tools[{i}].function.name': string does not match pattern. "
                               "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                               f"tools[{i}].function.name")
            if "parameters" in fn and not isinstance(fn["parameters"], dict):
                raise _Invalid(f"Invalid 'tools[{i}].function.parameters': expected an object.",
                               f"tools[{i}].function.parameters")
    choice = body.get("tool_choice")
    if choice is not None:
        if not tools:
            raise _Invalid("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                           "specified.", "tool_choice")
        names = {t["function"]["name"] for t in tools}
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        if choice not in ("none", "auto", "required") and named not in names:
            raise _Invalid("Invalid value for 'tool_choice'.", "tool_choice")
    _check_response_format(body.get("response_format"))
    temperature = body.get("temperature")
    if temperature is not None and (not isinstance(temperature, int | float) or not 0 <= temperature <= 2):
        raise _Invalid(f"Invalid 'temperature': expected a value between 0 and 2, but got {temperature}.",
                       "temperature")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise _Invalid(f"Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got "
                       f"{max_tokens} instead.", "max_tokens")


def _check_messages(messages: list[Any]) -> None:
    pending: set[str] = set()  # tool_call_ids of the last assistant message not answered yet
    answerable: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in _ROLES:
            raise _Invalid(f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                           "'tool', 'function' and 'developer'.", f"messages[{i}].role")
        if role == "tool":
            if m.get("tool_call_id") not in answerable:
                raise _Invalid("Invalid parameter: messages with role 'tool' must be a response to a "
                               "preceeding message with 'tool_calls'.", f"messages[{i}].role")
            if not isinstance(m.get("content"), str | list):
                raise _missing_content(i)
            pending.discard(m["tool_call_id"])
            continue
        if pending:
            raise _Invalid(_UNANSWERED + ", ".join(sorted(pending)), f"messages[{i}].role")
        answerable = set()
        calls = m.get("tool_calls") if role == "assistant" else None
        if calls:
            for call in calls:
                fn = call.get("function") or {}
                if call.get("type") != "function" or not isinstance(fn.get("arguments"), str):
                    raise _Invalid(f"Invalid 'messages[{i}].tool_calls': arguments must be a string.",
                                   f"messages[{i}].tool_calls")
            answerable = {c["id"] for c in calls}
            pending = set(answerable)
        elif not isinstance(m.get("content"), str | list):
            raise _missing_content(i)
    if pending:
        raise _Invalid(_UNANSWERED + ", ".join(sorted(pending)), "messages")


def _missing_content(i: int) -> _Invalid:
    return _Invalid(f"Missing required parameter: 'messages[{i}].content'.", f"messages[{i}].content")


def _check_response_format(fmt: Any) -> None:
    if fmt is None:
        return
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        raise _Invalid(f"Invalid value: '{kind}'. Supported values are: 'text', 'json_object' and "
                       "'json_schema'.", "response_format.type")
    if kind != "json_schema":
        return
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not _NAME.match(spec["name"]):
        raise _Invalid("Missing or invalid 'response_format.json_schema.name'.",
                       "response_format.json_schema.name")
    if not isinstance(spec.get("schema"), dict):
        raise _Invalid("Missing required parameter: 'response_format.json_schema.schema'.",
                       "response_format.json_schema.schema")
    if spec.get("strict"):
        _check_strict(spec["schema"], spec["name"], ())


def _check_strict(schema: Any, name: str, context: tuple[str, ...]) -> None:
    """Structured Outputs' rules for strict schemas: closed objects with every property required."""
    if not isinstance(schema, dict):
        return
    where = f"Invalid schema for response_format '{name}': In context={context}, "
    types = schema.get("type")
    if types == "object" or (isinstance(types, list) and "object" in types):
        if schema.get("additionalProperties") is not False:
            raise _Invalid(where + "'additionalProperties' is required to be supplied and to be false.",
                           "response_format")
        props = schema.get("properties") or {}
        missing = [k for k in props if k not in (schema.get("required") or [])]
        if missing:
            raise _Invalid(where + "'required' is required to be supplied and to be an array including every "
                           f"key in properties. Missing '{missing[0]}'.", "response_format")
        for key, sub in props.items():
            _check_strict(sub, name, (*context, "properties", key))
    if "items" in schema:
        _check_strict(schema["items"], name, (*context, "items"))
