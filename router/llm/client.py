"""The optional LLM layer: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, ...).

    llm = LLMClient(settings.llm)                # LLMNotConfigured (503) naming the missing setting
    choice = await llm.choose_server(await llm.rewrite_query(messages), [(server, description, tools)])
    name_map = unique_tool_names(capabilities)
    result = await llm.run_tool_loop(messages, openai_tools(name_map), name_map, executor, context)

Structured answers (``response_format: json_schema``) are parsed and checked here: callers get a valid
value or an `LLMBadOutput`. Transport faults, after the SDK's own retries, are `LLMFailed`/`LLMTimeout`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from router.errors import (
    ArgumentsRequired,
    BackendTimeout,
    ConfigError,
    InvalidRequest,
    LLMBadOutput,
    LLMFailed,
    LLMNotConfigured,
    LLMTimeout,
    RouterError,
)
from router.schemas import schema_errors
from router.settings import LLMSettings
from router.strategies.base import Executor
from router.values import CallContext, CallOutcome, Capability

if TYPE_CHECKING:
    import openai

Message = dict[str, Any]
ServerCandidate = tuple[str, str, Sequence[str]]  # (server name, description, its top tool names)
REROUTE_SENTINEL = "[[REROUTE]]"
_FUNCTION_NAME = re.compile(r"[^a-zA-Z0-9_-]+")


@dataclass(frozen=True, slots=True)
class Choice:
    """`choose_server`'s answer: a server (and, when the model says, which of its listed tools), nothing
    relevant, or a question to ask the user."""

    kind: Literal["server", "none", "ambiguous"]
    server: str | None = None
    question: str | None = None
    reasoning: str = ""
    tool: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    id: str
    name: str  # the unique function name the model used
    backend: str | None
    capability: str | None
    arguments: dict[str, Any]
    ok: bool
    latency_ms: float
    error: str | None = None


@dataclass(slots=True)
class LoopResult:
    answer: str
    messages: list[Message]  # the whole exchange, tool messages included
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    turns: int = 0
    max_turns_reached: bool = False
    reroute: bool = False  # the model said these tools cannot help: route the next turn afresh
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})


_REWRITE = ("Rewrite the latest user request of this conversation as one standalone search query that "
            "needs no earlier turn: resolve every reference (it, that, there, the second one) from the "
            "conversation and keep names, numbers and places. Answer with JSON {\"query\": \"...\"}.")
_CHOOSE = ("Pick the server that should answer the user's question from the candidates below. decision "
           "'server': one candidate clearly fits (server = its name exactly as listed; tool = the one of its "
           "listed tools that does what the question asks, or null when none of them clearly does). 'none': "
           "no candidate can help. 'ambiguous': several fit and the question does not say which "
           "(clarifying_question = one short question for the user). Otherwise leave those fields null.")
_SELECT = ("List every server whose tools could help with the user's latest request, names exactly as "
           "listed. When unsure, include the server: a missing one cannot be used, an extra one costs "
           "little. Give a one-sentence reasoning.")
_FILL = ("Fill in the arguments of the tool below from the user's question, as JSON matching its input "
         "schema. Use only values the question states or clearly implies, in the form the schema asks "
         "for. Never invent a value: leave out any argument, required or not, that the question does "
         "not give.")
_LOOP = ("Answer the user with the tools provided: call them when they help and base your answer on "
         "their results. If these tools cannot help with the request, or a different kind of server "
         f"would be more relevant, answer exactly {REROUTE_SENTINEL} followed by a short reason.")


class LLMClient:
    """A chat-completions client built from `LLMSettings`, with the router's few structured prompts."""

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.model:
            raise LLMNotConfigured("no LLM is configured: set llm.model (and llm.base_url or an API key)",
                                   missing="llm.model")
        key = settings.resolved_api_key()
        if not settings.base_url and not key:
            raise LLMNotConfigured(
                f"no LLM is configured: set llm.base_url, or an API key in the environment variable "
                f"{settings.api_key_env} (or llm.api_key)", missing=f"llm.base_url or {settings.api_key_env}")
        try:
            import openai
        except ImportError:
            raise ConfigError("llm is configured but the openai package is missing: "
                              "pip install 'mcp-router[llm]'") from None
        self._openai = openai
        self.settings = settings
        self.model: str = settings.model
        # A local server usually needs no key, but the SDK always sends one.
        self._client = openai.AsyncOpenAI(base_url=settings.base_url, api_key=key or "unused",
                                   timeout=settings.timeout_s, max_retries=settings.max_retries)

    async def close(self) -> None:
        await self._client.close()

    async def _chat(self, messages: Sequence[Message], **params: Any) -> Any:
        """One chat completion with at least one choice holding a message; SDK errors become router errors
        (the SDK has already retried), and an answer of any other shape is an `LLMBadOutput`."""
        s = self.settings
        try:
            resp = await self._client.chat.completions.create(model=self.model, messages=cast(Any, messages),
                                                              **params)
        except self._openai.APITimeoutError as exc:
            raise LLMTimeout(f"the LLM ({self.model}) did not answer within {s.timeout_s:g} s "
                             f"({s.max_retries} retries)", model=self.model) from exc
        except self._openai.APIConnectionError as exc:
            raise LLMFailed(f"cannot reach the LLM at {self._client.base_url}: {exc}",
                            model=self.model) from exc
        except self._openai.APIStatusError as exc:
            status = exc.status_code
            retried = s.max_retries if status in (408, 409, 429) or status >= 500 else 0
            after = f" after {retried} retries" if retried else ""
            raise LLMFailed(f"the LLM ({self.model}) answered HTTP {status}{after}: {_api_message(exc)}",
                            model=self.model, status=status) from exc
        except json.JSONDecodeError as exc:  # the SDK parsing a 200 whose body is not JSON
            raise LLMBadOutput(f"the LLM ({self.model}) answered with a body that is not JSON: {exc}",
                               model=self.model) from None
        # The SDK builds its response objects without validating them: a server's HTML page comes back as a
        # str, `choices: []` as an empty list.
        choices = getattr(resp, "choices", None)
        message = getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
        if not isinstance(message, self._openai.types.chat.ChatCompletionMessage) \
                or not isinstance(message.content, str | None):
            raise LLMBadOutput(f"the LLM ({self.model}) answered without a message in choices[0]: "
                               f"{str(resp)[:200]!r}", model=self.model)
        return resp

    async def complete_json(self, messages: Sequence[Message], schema_name: str, schema: dict[str, Any], *,
                            temperature: float = 0.0, max_tokens: int | None = None, strict: bool = True,
                            validate: bool = True) -> dict[str, Any]:
        """Ask for a JSON object matching `schema`; returns it parsed and checked, or raises LLMBadOutput."""
        params: dict[str, Any] = {"temperature": temperature, "response_format": {
            "type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": strict}}}
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        resp = await self._chat(messages, **params)
        msg, finish = resp.choices[0].message, resp.choices[0].finish_reason
        if getattr(msg, "refusal", None):
            raise LLMBadOutput(f"the LLM refused {schema_name}: {msg.refusal}", schema=schema_name)
        text = re.sub(r"^```(?:json)?\s*|\s*```$", "", (msg.content or "").strip())
        try:
            value = json.loads(text)
        except ValueError as exc:
            cut = " (cut off at max_tokens)" if finish == "length" else ""
            raise LLMBadOutput(f"the LLM's answer for {schema_name} is not valid JSON{cut}: {exc}; "
                               f"got {text[:200]!r}", schema=schema_name) from None
        if not isinstance(value, dict):
            raise LLMBadOutput(f"the LLM's answer for {schema_name} is not a JSON object", schema=schema_name)
        if validate and (errors := schema_errors(value, schema)):
            raise LLMBadOutput(f"the LLM's answer for {schema_name} does not match its schema: "
                               + "; ".join(errors[:5]), schema=schema_name)
        return value

    async def rewrite_query(self, messages: Sequence[Message]) -> str:
        """A standalone routing query for the latest user turn; a lone user message is returned as it is."""
        turns = [m for m in messages if m.get("role") in ("user", "assistant")]
        if not any(m["role"] == "user" for m in turns):
            raise InvalidRequest("the conversation has no user message")
        if len(turns) == 1:
            return _text(turns[0].get("content"))
        out = await self.complete_json(_ask(_REWRITE, _transcript(turns)), "routing_query",
                                       _object({"query": {"type": "string"}}), max_tokens=200)
        last = next(m for m in reversed(turns) if m["role"] == "user")
        return out["query"].strip() or _text(last.get("content"))

    async def choose_server(self, question: str, candidates: Sequence[ServerCandidate]) -> Choice:
        """One of the candidate servers for `question`, "none relevant", or an ambiguity question."""
        names = [c[0] for c in candidates]
        if not names:
            return Choice("none", reasoning="no candidate servers")
        tools = {name: list(listed) for name, _, listed in candidates}
        tool_names = list(dict.fromkeys(t for listed in tools.values() for t in listed))
        schema = _object({
            "decision": {"type": "string", "enum": ["server", "none", "ambiguous"]},
            "server": {"type": ["string", "null"], "enum": [*names, None]},
            "tool": {"type": ["string", "null"], "enum": [*tool_names, None]},
            "clarifying_question": {"type": ["string", "null"]},
            "reasoning": {"type": "string"},
        })
        prompt = f"Question: {question}\n\nCandidates:\n{_describe(candidates)}"
        out = await self.complete_json(_ask(_CHOOSE, prompt), "server_choice", schema, max_tokens=300)
        kind = out["decision"]
        if kind == "server" and not out["server"]:
            raise LLMBadOutput("the LLM chose a server but did not name it", schema="server_choice")
        tool = out["tool"] if kind == "server" else None
        if tool is not None and tool not in tools[out["server"]]:
            raise LLMBadOutput(f"the LLM chose tool {tool!r}, which server {out['server']!r} does not list",
                               schema="server_choice")
        ask = out["clarifying_question"] or f"Which of these should answer: {', '.join(names)}?"
        return Choice(kind, server=out["server"] if kind == "server" else None,
                      question=ask if kind == "ambiguous" else None, reasoning=out["reasoning"], tool=tool)

    async def fill_arguments(self, question: str, capability: Capability) -> dict[str, Any]:
        """Arguments for `capability` from the question; ArgumentsRequired when required ones are missing."""
        schema = _parameters(capability)
        prompt = (f"Tool: {capability.name} (server {capability.backend})\n{capability.description}\n\n"
                  f"Input schema: {json.dumps(schema)}\n\nQuestion: {question}")
        out = await self.complete_json(_ask(_FILL, prompt), "tool_arguments", schema,
                                       strict=False, validate=False, max_tokens=500)
        required = [str(r) for r in schema.get("required", [])]
        args = {k: v for k, v in out.items() if v is not None or k in required}
        missing = [r for r in required if args.get(r) is None]
        where = f"{capability.backend}/{capability.name}"
        if missing:
            raise ArgumentsRequired(f"tool {where} needs {', '.join(missing)}, which the question does not "
                                    "give", backend=capability.backend, tool=capability.name, missing=missing,
                                    input_schema=schema)
        if errors := schema_errors(args, schema):
            raise LLMBadOutput(f"the LLM's arguments for {where} do not match its schema: "
                               + "; ".join(errors[:5]), tool=capability.name)
        return args

    async def select_servers(self, conversation: Sequence[Message],
                             candidates: Sequence[ServerCandidate]) -> tuple[list[str], str]:
        """The servers the model finds relevant (erring towards more) and why; callers validate the names."""
        schema = _object({"relevant_servers": {"type": "array", "items": {"type": "string"}},
                          "reasoning": {"type": "string"}})
        turns = [m for m in conversation if m.get("role") in ("user", "assistant")]
        prompt = f"Conversation:\n{_transcript(turns)}\n\nServers:\n{_describe(candidates)}"
        out = await self.complete_json(_ask(_SELECT, prompt), "server_selection", schema,
                                       temperature=0.1, max_tokens=300)
        servers = list(dict.fromkeys(s.strip() for s in out["relevant_servers"] if s.strip()))
        return servers, out["reasoning"]

    async def run_tool_loop(self, messages: Sequence[Message], tools_openai_format: Sequence[dict[str, Any]],
                            name_map: Mapping[str, Capability], executor: Executor, context: CallContext,
                            max_turns: int | None = None, *, tool_timeout_s: float = 30.0) -> LoopResult:
        """Let the model call tools through `executor` until it answers or `max_turns` model calls ran."""
        history: list[Message] = [{"role": "system", "content": _LOOP}, *messages]
        result = LoopResult(answer="", messages=history)
        tools = list(tools_openai_format)
        extra: dict[str, Any] = {"tools": tools, "tool_choice": "auto"} if tools else {}
        for _ in range(max_turns or self.settings.max_tool_turns):
            resp = await self._chat(history, **extra)
            result.turns += 1
            if resp.usage is not None:
                result.usage["prompt_tokens"] += resp.usage.prompt_tokens
                result.usage["completion_tokens"] += resp.usage.completion_tokens
            msg = resp.choices[0].message
            calls = [c for c in msg.tool_calls or [] if getattr(c, "function", None) is not None]
            history.append(_assistant(msg.content, calls))
            result.answer = msg.content or result.answer
            if not calls:
                text = (msg.content or "").strip()
                result.reroute = text.upper().startswith(REROUTE_SENTINEL)
                result.answer = text[len(REROUTE_SENTINEL):].strip() if result.reroute else text
                return result
            done = await asyncio.gather(*(_run_call(c, name_map, executor, context, tool_timeout_s)
                                          for c in calls))
            for call, (record, content) in zip(calls, done, strict=True):
                result.tool_calls.append(record)
                history.append({"role": "tool", "tool_call_id": call.id, "content": content})
        result.max_turns_reached = True
        return result


async def _run_call(call: Any, name_map: Mapping[str, Capability], executor: Executor, context: CallContext,
                    timeout_s: float) -> tuple[ToolCallRecord, str]:
    """Execute one tool call; every failure becomes an error text for the model, never an exception."""
    name, cap = call.function.name, name_map.get(call.function.name)
    try:
        args = json.loads(call.function.arguments or "{}")
    except ValueError:
        args = None
    if cap is None or not isinstance(args, dict):
        error = f"unknown tool {name!r}" if cap is None else "the arguments are not a JSON object"
        record = ToolCallRecord(call.id, name, cap.backend if cap else None, cap.name if cap else None,
                                args if isinstance(args, dict) else {}, False, 0.0, error)
        return record, f"error: {error}"
    started = time.monotonic()
    try:
        # The executor enforces the timeout itself; the extra second only guards the hop to it.
        outcome = await asyncio.wait_for(executor.call(cap, args, timeout_s=timeout_s, context=context),
                                         timeout_s + 1.0)
    except (TimeoutError, RouterError) as exc:
        err = exc if isinstance(exc, RouterError) else BackendTimeout(f"no answer within {timeout_s:g} s")
        outcome = CallOutcome.failed(cap, err.kind, err.message, (time.monotonic() - started) * 1000)
    record = ToolCallRecord(call.id, name, cap.backend, cap.name, args, outcome.ok,
                            round(outcome.latency_ms, 2), None if outcome.ok else outcome.error)
    if outcome.ok:
        return record, outcome.text or "(empty result)"
    return record, f"error ({outcome.error_kind or 'error'}): {outcome.error or 'the call failed'}"


def unique_tool_names(capabilities: Sequence[Capability]) -> dict[str, Capability]:
    """`server__tool` names valid for OpenAI functions (^[a-zA-Z0-9_-]{1,64}$), unique, mapped back."""
    out: dict[str, Capability] = {}
    for cap in capabilities:
        base = _FUNCTION_NAME.sub("_", f"{cap.backend}__{cap.name}")[:64]
        name, n = base, 1
        while name in out:
            n += 1
            name = base[:64 - len(f"_{n}")] + f"_{n}"
        out[name] = cap
    return out


def openai_tools(name_map: Mapping[str, Capability]) -> list[dict[str, Any]]:
    """The tools of `name_map` in OpenAI function format."""
    return [{"type": "function", "function": {
        "name": name, "description": f"[{cap.backend}] {cap.description or cap.title or cap.name}"[:1024],
        "parameters": _parameters(cap)}} for name, cap in name_map.items()]


def _object(props: dict[str, Any]) -> dict[str, Any]:
    """A strict structured-output object schema: every property required, nothing else allowed."""
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _parameters(cap: Capability) -> dict[str, Any]:
    schema = cap.input_schema
    return schema if isinstance(schema, dict) and schema.get("type") == "object" else {"type": "object",
                                                                                        "properties": {}}


def _ask(system: str, user: str) -> list[Message]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _assistant(content: str | None, calls: Sequence[Any]) -> Message:
    msg: Message = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.function.name, "arguments": c.function.arguments}} for c in calls]
    return msg


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a content list."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict)).strip()
    return content if isinstance(content, str) else ""


def _transcript(turns: Sequence[Message], limit: int = 8000) -> str:
    return "\n".join(f"{m['role']}: {_text(m.get('content'))}" for m in turns)[-limit:]


def _describe(candidates: Sequence[ServerCandidate]) -> str:
    return "\n".join(f"- {name}: {desc or '(no description)'}" + (f" Tools: {', '.join(t)}." if t else "")
                     for name, desc, t in candidates)


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    inner = body["error"] if isinstance(body.get("error"), dict) else body
    return str(inner.get("message") or exc.message)
