"""The LLM tool-calling loop (router/llm/tool_loop.py) with the real `openai` SDK over real HTTP on loopback,
against the fake OpenAI-compatible server, executing tool calls through an in-process executor.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any

import pytest

from router.errors import LLMBadOutput
from router.llm.client import LLMClient
from router.llm.tool_loop import REROUTE_SENTINEL, openai_tools, unique_tool_names
from router.values import CallContext, CallOutcome, Capability
from tests.fakes.openai_server import ApiError, FakeOpenAI, Raw, Reply
from tests.integration.llm_cases import (  # noqa: F401 - fixtures
    CALC,
    CLOCK,
    CONTEXT,
    RecordingExecutor,
    Served,
    fake,
    llm,
    server,
    settings,
    user,
)

pytestmark = pytest.mark.timeout(30)


async def test_tool_loop_runs_tool_calls_through_the_executor(llm: LLMClient, fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK, CALC])
    clock_fn, calc_fn = list(name_map)
    seen: list[dict[str, Any]] = []

    def final(body: dict[str, Any]) -> Reply:
        seen.append(body)
        return Reply("It is 09:00 in Tokyo; the division failed.")

    fake.push(Reply(tool_calls=[(clock_fn, {"timezone": "Asia/Tokyo"}), (calc_fn, {"a": 1, "b": 0})]), final)
    executor = RecordingExecutor()
    question = [{"role": "user", "content": "What time is it in Tokyo, and what is 1/0?"}]
    result = await llm.run_tool_loop(question, openai_tools(name_map), name_map, executor, CONTEXT, 4,
                                     tool_timeout_s=7)

    assert result.answer == "It is 09:00 in Tokyo; the division failed."
    assert (result.turns, result.max_turns_reached, result.reroute) == (2, False, False)
    assert [(c[0], c[1], c[2], c[3]) for c in executor.calls] == [
        (CLOCK, {"timezone": "Asia/Tokyo"}, CONTEXT, 7), (CALC, {"a": 1, "b": 0}, CONTEXT, 7)]
    first = fake.chat_requests[0]
    assert first["tool_choice"] == "auto"
    assert first["tools"][0] == {"type": "function", "function": {
        "name": clock_fn, "description": "[clock] Current time in a time zone",
        "parameters": CLOCK.input_schema}}
    # The second request carries the assistant's tool calls and one `tool` message per call id.
    messages = seen[0]["messages"]
    calls = next(m for m in messages if m["role"] == "assistant")["tool_calls"]
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in calls]
    assert tool_messages[0]["content"] == 'get_time -> {"timezone": "Asia/Tokyo"}'
    assert tool_messages[1]["content"] == "error (tool_failed): division by zero"
    records = [(r.name, r.backend, r.capability, r.arguments, r.ok, r.latency_ms) for r in result.tool_calls]
    assert records == [(clock_fn, "clock", "get_time", {"timezone": "Asia/Tokyo"}, True, 3.5),
                       (calc_fn, "calc", "divide", {"a": 1, "b": 0}, False, 2.0)]
    assert result.tool_calls[1].error == "division by zero"
    assert result.messages[-1] == {"role": "assistant", "content": result.answer}
    assert result.usage["prompt_tokens"] > 0


async def test_tool_loop_stops_at_max_turns_without_sending_what_no_model_would_read(llm: LLMClient,
                                                                                    fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK])
    call = (next(iter(name_map)), {"timezone": "UTC"})
    fake.handler = lambda body: Reply("Let me check again.", tool_calls=[call])
    executor = RecordingExecutor()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map,
                                     executor, CONTEXT, max_turns=3)
    assert result.max_turns_reached and result.turns == 3
    assert len(fake.chat_requests) == 3 and len(executor.calls) == 2 and len(result.tool_calls) == 3
    assert result.tool_calls[-1].error is not None and "last model call" in result.tool_calls[-1].error
    assert result.answer == "Let me check again."
    assert [r["tool_choice"] for r in fake.chat_requests] == ["auto", "auto", "none"]


async def test_the_last_model_call_answers_in_words_from_what_the_calls_returned(llm: LLMClient,
                                                                                 fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK])
    call = (next(iter(name_map)), {"timezone": "UTC"})
    # A model that would look again for ever, but answers when the tools are withheld.
    fake.handler = lambda body: (Reply("It is noon in UTC.") if body["tool_choice"] == "none"
                                 else Reply(tool_calls=[call]))
    executor = RecordingExecutor()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map, executor, CONTEXT,
                                     max_turns=3)
    assert (result.answer, result.turns, result.max_turns_reached) == ("It is noon in UTC.", 3, True)
    assert len(executor.calls) == 2 and all(c.ok for c in result.tool_calls)
    last = fake.chat_requests[-1]
    assert last["tools"] and [m["role"] for m in last["messages"]].count("tool") == 2


async def test_a_server_that_refuses_tool_choice_none_is_asked_as_before(llm: LLMClient, fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK])
    call = (next(iter(name_map)), {"timezone": "UTC"})
    fake.handler = lambda body: (
        ApiError(400, "tool_choice 'none' is not supported", type="invalid_request_error", param="tool_choice")
        if body["tool_choice"] == "none" else Reply("Checking.", tool_calls=[call]))
    executor = RecordingExecutor()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map, executor, CONTEXT,
                                     max_turns=2)
    assert [r["tool_choice"] for r in fake.chat_requests] == ["auto", "none", "auto"]
    assert (result.answer, result.turns, result.max_turns_reached) == ("Checking.", 2, True)
    assert len(executor.calls) == 1 and "last model call" in (result.tool_calls[-1].error or "")


async def test_tool_loop_default_max_turns_comes_from_settings(server: Served, fake: FakeOpenAI) -> None:
    client = LLMClient(settings(server.url, max_tool_turns=2))
    name_map = unique_tool_names([CLOCK])
    fake.handler = lambda body: Reply(tool_calls=[(next(iter(name_map)), {"timezone": "UTC"})])
    try:
        result = await client.run_tool_loop(user("time?"), openai_tools(name_map),
                                            name_map, RecordingExecutor(), CONTEXT)
    finally:
        await client.close()
    assert result.max_turns_reached and result.turns == 2


async def test_tool_loop_flags_a_reroute(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(Reply(f"{REROUTE_SENTINEL} this needs a weather server"))
    name_map = unique_tool_names([CLOCK])
    result = await llm.run_tool_loop([{"role": "user", "content": "Will it rain?"}], openai_tools(name_map),
                                     name_map, RecordingExecutor(), CONTEXT)
    assert result.reroute is True
    assert result.answer == "this needs a weather server"
    system = fake.chat_requests[0]["messages"][0]
    assert system["role"] == "system" and REROUTE_SENTINEL in system["content"]


async def test_tool_loop_reports_unknown_tools_and_bad_arguments_to_the_model(llm: LLMClient,
                                                                            fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK])
    fake.push(Reply(tool_calls=[("nope__missing", {}), (next(iter(name_map)), "{not json")]), Reply("Sorry."))
    executor = RecordingExecutor()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map,
                                     executor, CONTEXT)
    assert executor.calls == []
    assert [(r.ok, r.error) for r in result.tool_calls] == [
        (False, "unknown tool 'nope__missing'"), (False, "the arguments are not a JSON object")]
    tool_messages = [m for m in fake.chat_requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        "error: unknown tool 'nope__missing'", "error: the arguments are not a JSON object"]
    assert result.answer == "Sorry."


async def test_tool_loop_turns_a_hung_executor_into_a_tool_error(llm: LLMClient, fake: FakeOpenAI) -> None:
    class HungExecutor(RecordingExecutor):
        async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                       context: CallContext, force: bool = False) -> CallOutcome:
            await asyncio.sleep(30)  # ignores its timeout
            raise AssertionError("unreachable")

    name_map = unique_tool_names([CLOCK])
    fake.push(Reply(tool_calls=[(next(iter(name_map)), {"timezone": "UTC"})]), Reply("The clock is down."))
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map, HungExecutor(), CONTEXT,
                                     tool_timeout_s=0.05)
    assert result.answer == "The clock is down."
    assert [(r.ok, r.error) for r in result.tool_calls] == [(False, "no answer within 0.05 s")]
    tool_message = next(m for m in fake.chat_requests[1]["messages"] if m["role"] == "tool")
    assert tool_message["content"] == "error (backend_timeout): no answer within 0.05 s"


async def test_tool_loop_without_tools_sends_none(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(Reply("Hello!"))
    result = await llm.run_tool_loop(user("hi"), [], {}, RecordingExecutor(), CONTEXT)
    assert result.answer == "Hello!"
    assert "tools" not in fake.chat_requests[0] and "tool_choice" not in fake.chat_requests[0]


def test_unique_tool_names_are_valid_unique_and_map_back() -> None:
    caps = [Capability(backend="files", name="read.file"), Capability(backend="files", name="read_file"),
            Capability(backend="srv one", name="ünïcode tool"), Capability(backend="x" * 40, name="y" * 40),
            Capability(backend="x" * 40, name="y" * 41), Capability(backend="clock", name="get_time")]
    name_map = unique_tool_names(caps)
    assert len(name_map) == len(caps)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in name_map)
    assert list(name_map.values()) == caps
    assert list(name_map)[:2] == ["files__read_file", "files__read_file_2"]
    assert name_map["clock__get_time"] is caps[-1]
    assert unique_tool_names(caps) == name_map  # deterministic


# -- transport faults ------------------------------------------------------------------------


# -- the model's word is not trusted more than a caller's ------------------------------------------


async def test_arguments_off_the_tools_schema_or_bounds_are_not_sent(llm: LLMClient, fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK])
    clock = next(iter(name_map))
    deep: dict[str, Any] = {"timezone": "UTC"}
    for _ in range(20):
        deep = {"timezone": "UTC", "nested": deep}
    fake.push(Reply(tool_calls=[(clock, {"timezone": 5}), (clock, {"timezone": "UTC", "format": "13h"}),
                                (clock, deep), (clock, "[" * 5000 + "]" * 5000)]), Reply("Sorry."))
    executor = RecordingExecutor()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map, executor, CONTEXT)
    assert executor.calls == []
    errors = [r.error or "" for r in result.tool_calls]
    assert "input schema" in errors[0] and "timezone" in errors[0]
    assert "input schema" in errors[1] and "13h" in errors[1]
    assert "nested deeper than 12 levels" in errors[2]
    assert "nested deeper than 12 levels" in errors[3]  # refused before any parser recursed through it
    assert result.answer == "Sorry."


async def test_a_required_parameter_with_a_default_the_model_leaves_out_is_sent_its_default(
        llm: LLMClient, fake: FakeOpenAI) -> None:
    # zod 4 lists a parameter with a default as required (Playwright's screenshot and its `scale`).
    shot = Capability(backend="playwright", name="browser_take_screenshot", input_schema={
        "type": "object", "required": ["scale"], "additionalProperties": False,
        "properties": {"scale": {"type": "string", "enum": ["css", "device"], "default": "css"},
                       "filename": {"type": "string"}}})
    name_map = unique_tool_names([shot])
    fake.push(Reply(tool_calls=[(next(iter(name_map)), {"filename": "a.png"})]), Reply("Done."))
    executor = RecordingExecutor()
    await llm.run_tool_loop(user("Take a screenshot"), openai_tools(name_map), name_map, executor, CONTEXT)
    assert [c[1] for c in executor.calls] == [{"filename": "a.png", "scale": "css"}]


async def test_at_most_max_tool_calls_of_one_answer_are_sent(server: Served, fake: FakeOpenAI) -> None:
    client = LLMClient(settings(server.url, max_tool_calls=3))
    name_map = unique_tool_names([CALC])
    fake.push(Reply(tool_calls=[(next(iter(name_map)), {"a": i, "b": 1}) for i in range(5)]), Reply("Done."))
    executor = RecordingExecutor()
    try:
        result = await client.run_tool_loop(user("divide"), openai_tools(name_map), name_map, executor, CONTEXT)
    finally:
        await client.close()
    assert [args["a"] for _, args, _, _ in executor.calls] == [0, 1, 2]
    assert [r.ok for r in result.tool_calls] == [True, True, True, False, False]
    assert "llm.max_tool_calls" in (result.tool_calls[3].error or "")


class Hung(RecordingExecutor):
    """A backend that never answers: each call times out (at the backend's timeout, in the tool loop)."""

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        self.calls.append((capability, arguments, context, timeout_s))
        await asyncio.sleep(30)
        raise AssertionError("unreachable")


async def test_a_tool_that_may_have_acted_is_not_called_again_in_the_turn(llm: LLMClient, fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK])  # not declared read-only or idempotent: it may act
    clock = next(iter(name_map))
    fake.push(Reply(tool_calls=[(clock, {"timezone": "UTC"}), (clock, {"timezone": "UTC"})]),
              Reply(tool_calls=[(clock, {"timezone": "UTC"})]), Reply("The clock did not answer."))
    executor = Hung()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map, executor, CONTEXT,
                                     tool_timeouts={"clock": 0.05})
    assert len(executor.calls) == 1 and executor.calls[0][3] == 0.05  # the backend's own timeout
    assert result.tool_calls[0].error == "no answer within 0.05 s"
    assert all("may have acted" in (r.error or "") for r in result.tool_calls[1:]) and len(result.tool_calls) == 3


async def test_a_tool_that_may_have_acted_is_not_called_on_a_copy_either(llm: LLMClient, fake: FakeOpenAI) -> None:
    copy = dataclasses.replace(CLOCK, backend="clock-replica")  # the same tool on another backend
    name_map = unique_tool_names([CLOCK, copy])
    first, second = (next(n for n, c in name_map.items() if c.backend == b) for b in ("clock", "clock-replica"))
    fake.push(Reply(tool_calls=[(first, {"timezone": "UTC"})]), Reply(tool_calls=[(second, {"timezone": "UTC"})]),
              Reply("The clock did not answer."))
    executor = Hung()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map, executor, CONTEXT,
                                     tool_timeouts={"clock": 0.05, "clock-replica": 0.05})
    assert len(executor.calls) == 1  # the copy was not sent the same action again
    assert "may have acted" in (result.tool_calls[1].error or "")


async def test_the_model_reads_a_long_result_cut_to_max_tool_result_chars(server: Served, fake: FakeOpenAI) -> None:
    class Verbose(RecordingExecutor):
        async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                       context: CallContext, force: bool = False) -> CallOutcome:
            return CallOutcome(backend=capability.backend, capability=capability.name, ok=True, latency_ms=1.0,
                               text="x" * 5000)

    client = LLMClient(settings(server.url, max_tool_result_chars=1000))
    name_map = unique_tool_names([CLOCK])
    fake.push(Reply(tool_calls=[(next(iter(name_map)), {"timezone": "UTC"})]), Reply("Long."))
    try:
        await client.run_tool_loop(user("time?"), openai_tools(name_map), name_map, Verbose(), CONTEXT)
    finally:
        await client.close()
    read = next(m for m in fake.chat_requests[1]["messages"] if m["role"] == "tool")["content"]
    assert read.startswith("x" * 1000) and read.endswith("[cut: 4000 more characters (llm.max_tool_result_chars)]")


def completion(message: dict[str, Any], usage: Any = None) -> Raw:
    return Raw({"id": "c", "object": "chat.completion", "created": 0, "model": "fake-gpt", "usage": usage,
                "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}]})


@pytest.mark.parametrize("answer", [
    completion({"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": "clock__get_time"}]}),
    completion({"content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                  "function": {"name": "clock__get_time", "arguments": {"a": 1}}}]}),
    completion({"content": None, "tool_calls": [{"type": "function",
                                                  "function": {"name": "clock__get_time", "arguments": "{}"}}]}),
], ids=["function-a-string", "arguments-an-object", "no-id"])
async def test_a_malformed_tool_call_is_the_models_bad_output_not_a_crash(llm: LLMClient, fake: FakeOpenAI,
                                                                         answer: Raw) -> None:
    fake.push(answer)
    name_map = unique_tool_names([CLOCK])
    executor = RecordingExecutor()
    with pytest.raises(LLMBadOutput, match="malformed tool call"):
        await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map, executor, CONTEXT)
    assert executor.calls == []


async def test_usage_the_model_reports_as_null_counts_as_nothing(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(completion({"content": "Hi."}, usage={"prompt_tokens": None, "completion_tokens": 3}))
    result = await llm.run_tool_loop(user("hi"), [], {}, RecordingExecutor(), CONTEXT)
    assert result.answer == "Hi." and result.usage == {"prompt_tokens": 0, "completion_tokens": 3}
