"""The OpenAI-compatible tool-calling loop over MCP tools, behind `/v1/chat`.

    name_map = unique_tool_names(capabilities)
    result = await run_tool_loop(llm.chat, llm.settings, messages, openai_tools(name_map), name_map, executor,
                                 context)

The model's word is not trusted more than a caller's: a call names a tool it was offered, its arguments
are bounded and match the tool's input schema, at most `llm.max_tool_calls` run per model answer, and a
tool that may act is called one at a time and never again in the turn after a call of it got no answer
(it may have acted). A call the loop refuses is not sent; the model reads why. The turn's last model call
is asked to answer in words (`tool_choice: "none"`), from what the calls before it returned, so that a turn
cut short still ends with an answer; calls a model asks for there anyway are not sent: no model would read
what they return.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from router.bounds import MAX_ARGUMENT_DEPTH, bounded_arguments, json_nests_deeper
from router.errors import BackendTimeout, LLMBadOutput, LLMFailed, RouterError
from router.schemas import schema_errors, with_defaults
from router.settings import LLMSettings
from router.strategies.base import Executor
from router.values import CallContext, CallOutcome, Capability

Message = dict[str, Any]
REROUTE_SENTINEL = "[[REROUTE]]"
_FUNCTION_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_LOOP = ("Answer the user with the tools provided: call them when they help and base your answer on "
         "their results. If these tools cannot help with the request, or a different kind of server "
         f"would be more relevant, answer exactly {REROUTE_SENTINEL} followed by a short reason.")


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
    max_turns_reached: bool = False  # the turn's last model call ran, with the tools withheld
    reroute: bool = False  # the model said these tools cannot help: route the next turn afresh
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})


@dataclass(frozen=True, slots=True)
class _Call:
    """One tool call of the model's answer, as the model wrote it."""

    id: str
    name: str
    arguments: str


ChatFn = Callable[..., Awaitable[Any]]


async def run_tool_loop(chat: ChatFn, settings: LLMSettings, messages: Sequence[Message],
                        tools_openai_format: Sequence[dict[str, Any]], name_map: Mapping[str, Capability],
                        executor: Executor, context: CallContext, max_turns: int | None = None, *,
                        tool_timeout_s: float = 30.0, tool_timeouts: Mapping[str, float] | None = None) -> LoopResult:
    """Let the model call tools through `executor` until it answers or `max_turns` model calls ran. `chat`
    is one chat completion (`LLMClient._chat`); `tool_timeouts`: a backend's own call timeout, by name."""
    history: list[Message] = [{"role": "system", "content": _LOOP}, *messages]
    result = LoopResult(answer="", messages=history)
    tools = list(tools_openai_format)
    turns = max_turns or settings.max_tool_turns
    acted: set[str] = set()  # tools that may have acted without answering, this turn
    for turn in range(turns):
        resp = await _model_call(chat, history, tools, last=turn == turns - 1)
        result.turns += 1
        _add_usage(result.usage, getattr(resp, "usage", None))
        msg = resp.choices[0].message
        calls = _calls_of(msg, settings.model or "")
        history.append(_assistant(msg.content, calls))
        result.answer = msg.content or result.answer
        if not calls:
            text = (msg.content or "").strip()
            result.reroute = text.upper().startswith(REROUTE_SENTINEL)
            result.answer = text[len(REROUTE_SENTINEL):].strip() if result.reroute else text
            result.max_turns_reached = bool(tools) and turn == turns - 1
            return result
        if turn == turns - 1:
            last = f"not sent: the turn's last model call ({turns}, max_turns) asked for it, and no model would read it"
            result.tool_calls.extend(_refused(c, name_map, last) for c in calls)
            break
        done = await _run_calls(calls, name_map, executor, context, settings, acted,
                                lambda cap: (tool_timeouts or {}).get(cap.backend, tool_timeout_s))
        for call, (record, content) in zip(calls, done, strict=True):
            result.tool_calls.append(record)
            history.append({"role": "tool", "tool_call_id": call.id, "content": content})
    result.max_turns_reached = True
    return result


async def _model_call(chat: ChatFn, history: list[Message], tools: list[dict[str, Any]], last: bool) -> Any:
    """One model call; the turn's last asks for words (the tools stay listed: the history holds calls of them).
    A server that refuses `tool_choice: "none"` (an HTTP 400) is asked as before it, and calls it asks for
    are not sent."""
    if not tools:
        return await chat(history)
    if last:
        try:
            return await chat(history, tools=tools, tool_choice="none")
        except LLMFailed as exc:
            if exc.details.get("status") not in (400, 422):
                raise
    return await chat(history, tools=tools, tool_choice="auto")


def _calls_of(msg: Any, model: str) -> list[_Call]:
    """The tool calls of the model's message; an `LLMBadOutput` for calls of any other shape."""
    calls = getattr(msg, "tool_calls", None) or []
    out: list[_Call] = []
    for i, c in enumerate(calls if isinstance(calls, list) else [calls]):
        fn = getattr(c, "function", None)
        name, arguments, call_id = getattr(fn, "name", None), getattr(fn, "arguments", None), getattr(c, "id", None)
        if not isinstance(name, str) or not isinstance(arguments, str | None) or not isinstance(call_id, str):
            raise LLMBadOutput(f"the LLM ({model}) answered with a malformed tool call (tool_calls[{i}]: a function "
                               "with a string name and string arguments, and a string id)", model=model)
        out.append(_Call(call_id, name, arguments or "{}"))
    return out


def _add_usage(usage: dict[str, int], reported: Any) -> None:
    for key in usage:
        value = getattr(reported, key, None)
        usage[key] += value if isinstance(value, int) else 0


async def _run_calls(calls: Sequence[_Call], name_map: Mapping[str, Capability], executor: Executor,
                     context: CallContext, settings: LLMSettings, acted: set[str],
                     timeout_of: Callable[[Capability], float]) -> list[tuple[ToolCallRecord, str]]:
    """Each call's record and what the model reads of it, in the model's order. Calls past
    `llm.max_tool_calls` are refused; tools that may act run one after another, the rest together."""
    done: list[tuple[ToolCallRecord, str] | None] = [None] * len(calls)
    cap = settings.max_tool_calls
    for i in range(cap, len(calls)):
        done[i] = _refusal(calls[i], name_map, f"not sent: at most {cap} tool calls of one model answer are "
                                               "sent (llm.max_tool_calls)")

    async def run(i: int) -> None:
        call = calls[i]
        capability = name_map.get(call.name)
        if capability is not None and capability.key in acted:
            done[i] = _refusal(call, name_map, f"not sent: an earlier call of {capability.name} (on "
                                               f"{capability.backend} or a copy of it on another backend) failed "
                                               "after it was sent and may have acted, and the tool is not "
                                               "declared read-only or idempotent")
            return
        done[i], outcome = await _run_call(call, name_map, executor, context, timeout_of,
                                           settings.max_tool_result_chars)
        if capability is not None and outcome is not None and outcome.may_have_acted and not capability.repeatable:
            # Its copies on other backends too: the same call sent to a copy is the same action again.
            acted.update(c.key for c in name_map.values() if c.same_as(capability))

    async def one_at_a_time(indexes: list[int]) -> None:
        for i in indexes:
            await run(i)

    sent = range(min(cap, len(calls)))
    acting = [i for i in sent if (c := name_map.get(calls[i].name)) is not None and not c.repeatable]
    await asyncio.gather(one_at_a_time(acting), *(run(i) for i in sent if i not in acting))
    return [d for d in done if d is not None]


async def _run_call(call: _Call, name_map: Mapping[str, Capability], executor: Executor, context: CallContext,
                    timeout_of: Callable[[Capability], float],
                    max_chars: int) -> tuple[tuple[ToolCallRecord, str], CallOutcome | None]:
    """Execute one tool call; every failure becomes an error text for the model, never an exception."""
    cap = name_map.get(call.name)
    if cap is None:
        return _refusal(call, name_map, f"unknown tool {call.name!r}"), None
    if json_nests_deeper(call.arguments):
        return _refusal(call, name_map, f"not sent: arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels"), None
    try:
        args = json.loads(call.arguments)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return _refusal(call, name_map, "the arguments are not a JSON object"), None
    try:
        bounded_arguments(args)
    except ValueError as exc:
        return _refusal(call, name_map, f"not sent: {exc}"), None
    args = with_defaults(input_schema(cap), args)  # what the server would take for what the model left out
    if errors := schema_errors(args, input_schema(cap)):
        return _refusal(call, name_map, "not sent: the arguments do not match the tool's input schema: "
                        + "; ".join(errors[:5]), args), None
    started, timeout_s = time.monotonic(), timeout_of(cap)
    try:
        # The executor enforces the timeout itself; the extra second only guards the hop to it.
        outcome = await asyncio.wait_for(executor.call(cap, args, timeout_s=timeout_s, context=context),
                                         timeout_s + 1.0)
    except (TimeoutError, RouterError) as exc:
        err = exc if isinstance(exc, RouterError) else BackendTimeout(f"no answer within {timeout_s:g} s")
        outcome = CallOutcome.failed(cap, err.kind, err.message, (time.monotonic() - started) * 1000)
    record = ToolCallRecord(call.id, call.name, cap.backend, cap.name, args, outcome.ok,
                            round(outcome.latency_ms, 2), None if outcome.ok else outcome.error)
    if not outcome.ok:
        return (record, f"error ({outcome.error_kind or 'error'}): {outcome.error or 'the call failed'}"), outcome
    text = outcome.text or "(empty result)"
    if len(text) > max_chars:  # what the model reads of it; the conversation grows by every result
        text = f"{text[:max_chars]}\n[cut: {len(text) - max_chars} more characters (llm.max_tool_result_chars)]"
    return (record, text), outcome


def _refusal(call: _Call, name_map: Mapping[str, Capability], error: str,
             args: dict[str, Any] | None = None) -> tuple[ToolCallRecord, str]:
    return _refused(call, name_map, error, args), f"error: {error}"


def _refused(call: _Call, name_map: Mapping[str, Capability], error: str,
             args: dict[str, Any] | None = None) -> ToolCallRecord:
    cap = name_map.get(call.name)
    return ToolCallRecord(call.id, call.name, cap.backend if cap else None, cap.name if cap else None,
                          args or {}, False, 0.0, error)


def unique_tool_names(capabilities: Sequence[Capability]) -> dict[str, Capability]:
    """`server__tool` names valid for OpenAI functions (^[a-zA-Z0-9_-]{1,64}$), unique, mapped back."""
    out: dict[str, Capability] = {}
    # The last suffix tried per stem (what no suffix up to "_99999" cuts into): thousands of names that share their
    # first characters, or differ only where a suffix replaces them, are made unique in linear time.
    tried: dict[str, int] = {}
    for cap in capabilities:
        base = _FUNCTION_NAME.sub("_", f"{cap.backend}__{cap.name}")[:64]
        name, n = base, tried.get(base[:58], 1)
        while name in out:
            n += 1
            name = base[:64 - len(f"_{n}")] + f"_{n}"
        tried[base[:58]] = max(n, tried.get(base[:58], 1))
        out[name] = cap
    return out


def openai_tools(name_map: Mapping[str, Capability]) -> list[dict[str, Any]]:
    """The tools of `name_map` in OpenAI function format."""
    return [{"type": "function", "function": {
        "name": name, "description": f"[{cap.backend}] {cap.description or cap.title or cap.name}"[:1024],
        "parameters": input_schema(cap)}} for name, cap in name_map.items()]


def input_schema(cap: Capability) -> dict[str, Any]:
    """The capability's input schema, or an empty object schema when it declares none usable."""
    schema = cap.input_schema
    return schema if isinstance(schema, dict) and schema.get("type") == "object" else {"type": "object",
                                                                                        "properties": {}}


def _assistant(content: str | None, calls: Sequence[_Call]) -> Message:
    msg: Message = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in calls]
    return msg
