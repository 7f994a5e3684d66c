"""The LLM layer (router/llm.py) and the OpenAI embedder with the real `openai` SDK, over real HTTP on
loopback, against the fake OpenAI-compatible server in tests/fakes/openai_server.py (no Ray, no model).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from router.config import EmbeddingSettings, LLMSettings
from router.embeddings import OpenAIEmbedder
from router.errors import ArgumentsRequired, InvalidRequest, LLMNotConfigured
from router.llm import (
    REROUTE_SENTINEL,
    Choice,
    LLMBadOutput,
    LLMClient,
    LLMFailed,
    LLMTimeout,
    openai_tools,
    unique_tool_names,
)
from router.models import CallOutcome, Capability
from router.strategies import CallContext
from tests.fakes import serve_app
from tests.fakes.openai_server import ApiError, FakeOpenAI, Reply, default_embedding, json_reply

pytestmark = pytest.mark.timeout(30)

KEY = "sk-test-SECRET-5f0c2a9d"
MODEL = "fake-gpt"
CONTEXT = CallContext(question="What time is it in Tokyo?", intent="general", session_id="s-1")
CLOCK = Capability(backend="clock", name="get_time", description="Current time in a time zone",
                   input_schema={"type": "object", "properties": {
                       "timezone": {"type": "string", "description": "IANA time zone"},
                       "format": {"type": "string", "enum": ["12h", "24h"]}}, "required": ["timezone"]})
CALC = Capability(backend="calc", name="divide", description="Divide a by b", input_schema={
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"]})
CANDIDATES = [("clock", "Time and time zones", ["get_time", "convert_time"]),
              ("weather", "Forecasts", ["forecast"]),
              ("calc", "Arithmetic", ["add", "divide"])]


@dataclass
class Served:
    fake: FakeOpenAI
    url: str


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    fake = FakeOpenAI(api_key=KEY)
    with serve_app(fake.app) as url:
        yield Served(fake, url)


@pytest.fixture
def fake(server: Served) -> FakeOpenAI:
    """The module's fake, reset: no scripted replies, no recorded requests, the default behaviour."""
    f = server.fake
    f.queue.clear()
    f.requests.clear()
    f.handler = None
    f.reverse_embeddings = False
    return f


def settings(url: str, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {"base_url": f"{url}/v1", "model": MODEL, "api_key": KEY, "timeout_s": 5,
                              "max_retries": 0}
    return LLMSettings.model_validate({**values, **overrides})


@pytest.fixture
async def llm(server: Served, fake: FakeOpenAI) -> AsyncIterator[LLMClient]:
    client = LLMClient(settings(server.url))
    yield client
    await client.close()


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def response_format(body: dict[str, Any]) -> dict[str, Any]:
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    return fmt["json_schema"]


def prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"])


class RecordingExecutor:
    """An in-process Executor: `divide` by zero fails like a tool error, everything else answers."""

    def __init__(self) -> None:
        self.calls: list[tuple[Capability, dict[str, Any], CallContext, float]] = []

    async def call(self, capability: Capability, arguments: dict[str, Any], *, timeout_s: float,
                   context: CallContext, force: bool = False) -> CallOutcome:
        self.calls.append((capability, arguments, context, timeout_s))
        if capability.name == "divide" and arguments.get("b") == 0:
            return CallOutcome(backend=capability.backend, capability=capability.name, ok=False,
                               latency_ms=2.0, error_type="tool_failed", error="division by zero")
        return CallOutcome(backend=capability.backend, capability=capability.name, ok=True,
                           latency_ms=3.5, text=f"{capability.name} -> {json.dumps(arguments)}")


# -- configuration ---------------------------------------------------------------------------


def test_no_model_is_not_configured_and_names_llm_model() -> None:
    with pytest.raises(LLMNotConfigured, match=r"llm\.model") as info:
        LLMClient(LLMSettings())
    assert info.value.status_code == 503
    assert info.value.details["missing"] == "llm.model"


def test_no_base_url_and_no_key_names_both_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROUTER_TEST_LLM_KEY", raising=False)
    with pytest.raises(LLMNotConfigured) as info:
        LLMClient(LLMSettings(model=MODEL, api_key_env="ROUTER_TEST_LLM_KEY"))
    assert "llm.base_url" in info.value.message
    assert "ROUTER_TEST_LLM_KEY" in info.value.message
    assert not LLMSettings(model=MODEL, api_key_env="ROUTER_TEST_LLM_KEY").configured


async def test_the_api_key_comes_from_the_named_environment_variable(
        server: Served, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTER_TEST_LLM_KEY", KEY)
    client = LLMClient(settings(server.url, api_key=None, api_key_env="ROUTER_TEST_LLM_KEY"))
    fake.push(json_reply({"relevant_servers": ["clock"], "reasoning": "time"}))
    try:
        assert (await client.select_servers(user("time?"), CANDIDATES))[0] == ["clock"]
    finally:
        await client.close()
    assert fake.requests[-1].headers["authorization"] == f"Bearer {KEY}"


# -- structured helpers ----------------------------------------------------------------------


async def test_rewrite_query_resolves_a_multi_turn_conversation(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(json_reply({"query": "weather forecast for Paris tomorrow"}))
    conversation = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "I am flying to Paris tomorrow."},
        {"role": "assistant", "content": "Have a good trip!"},
        {"role": "user", "content": [{"type": "text", "text": "Will it rain there?"}]},
    ]
    assert await llm.rewrite_query(conversation) == "weather forecast for Paris tomorrow"
    body = fake.chat_requests[-1]
    spec = response_format(body)
    assert spec["name"] == "routing_query" and spec["strict"] is True
    assert spec["schema"]["required"] == ["query"]
    text = prompt_text(body)
    assert "I am flying to Paris tomorrow." in text and "Will it rain there?" in text
    assert body["model"] == MODEL


async def test_rewrite_query_returns_a_lone_user_message_without_a_call(llm: LLMClient,
                                                                        fake: FakeOpenAI) -> None:
    assert await llm.rewrite_query(user("What time is it?")) == "What time is it?"
    with pytest.raises(InvalidRequest, match="no user message"):
        await llm.rewrite_query([{"role": "system", "content": "Be brief."}])
    assert fake.requests == []


@pytest.mark.parametrize(("answer", "expected"), [
    ({"decision": "server", "server": "clock", "clarifying_question": None, "reasoning": "a time question"},
     Choice("server", server="clock", reasoning="a time question")),
    ({"decision": "none", "server": None, "clarifying_question": None, "reasoning": "nothing cooks"},
     Choice("none", reasoning="nothing cooks")),
    ({"decision": "ambiguous", "server": None, "clarifying_question": "The time or the weather?",
      "reasoning": "both fit"},
     Choice("ambiguous", question="The time or the weather?", reasoning="both fit")),
], ids=["chosen", "none", "ambiguous"])
async def test_choose_server(llm: LLMClient, fake: FakeOpenAI, answer: dict[str, Any],
                             expected: Choice) -> None:
    fake.push(json_reply(answer))
    assert await llm.choose_server("What time is it in Tokyo?", CANDIDATES) == expected
    body = fake.chat_requests[-1]
    spec = response_format(body)
    assert spec["name"] == "server_choice"
    assert spec["schema"]["properties"]["server"]["enum"] == ["clock", "weather", "calc", None]
    text = prompt_text(body)
    assert "What time is it in Tokyo?" in text
    assert "- weather: Forecasts Tools: forecast." in text


async def test_choose_server_rejects_a_server_that_was_not_a_candidate(llm: LLMClient,
                                                                      fake: FakeOpenAI) -> None:
    fake.push(json_reply({"decision": "server", "server": "kitchen", "clarifying_question": None,
                          "reasoning": "?"}))
    with pytest.raises(LLMBadOutput, match=r"server_choice does not match its schema: \$\.server"):
        await llm.choose_server("Cook dinner", CANDIDATES)


async def test_bad_json_is_an_error_callers_can_catch(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(Reply('{"relevant_servers": ["clock"'))
    with pytest.raises(LLMBadOutput, match="server_selection is not valid JSON") as info:
        await llm.select_servers(user("time?"), CANDIDATES)
    assert info.value.code == "llm_bad_output" and info.value.status_code == 502


async def test_fill_arguments_from_the_question(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(json_reply({"timezone": "Asia/Tokyo", "format": None}))
    args = await llm.fill_arguments("What time is it in Tokyo?", CLOCK)
    assert args == {"timezone": "Asia/Tokyo"}
    spec = response_format(fake.chat_requests[-1])
    assert spec["name"] == "tool_arguments" and spec["strict"] is False
    assert spec["schema"] == CLOCK.input_schema
    assert "get_time" in prompt_text(fake.chat_requests[-1])


async def test_fill_arguments_missing_a_required_one_raises(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(json_reply({"format": "24h"}))
    with pytest.raises(ArgumentsRequired, match=r"clock/get_time needs timezone") as info:
        await llm.fill_arguments("What time is it?", CLOCK)
    assert info.value.status_code == 422
    assert info.value.details["missing"] == ["timezone"]


async def test_fill_arguments_of_the_wrong_type_raises(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(json_reply({"a": "ten", "b": 2}))
    with pytest.raises(LLMBadOutput, match=r"\$\.a should be number"):
        await llm.fill_arguments("Divide ten by two", CALC)


async def test_select_servers_sends_low_temperature_and_a_json_schema(llm: LLMClient,
                                                                     fake: FakeOpenAI) -> None:
    fake.push(json_reply({"relevant_servers": ["clock", "weather", "clock", "unknown"],
                          "reasoning": "time and maybe weather"}))
    conversation = [{"role": "user", "content": "Is it daytime in Tokyo, and is it sunny?"}]
    servers, reasoning = await llm.select_servers(conversation, CANDIDATES)
    assert servers == ["clock", "weather", "unknown"]  # de-duplicated; names are the caller's to check
    assert reasoning == "time and maybe weather"
    body = fake.chat_requests[-1]
    assert body["temperature"] == 0.1
    assert body["max_tokens"] == 300
    spec = response_format(body)
    assert spec["name"] == "server_selection" and spec["strict"] is True
    assert set(spec["schema"]["properties"]) == {"relevant_servers", "reasoning"}
    assert "Is it daytime in Tokyo" in prompt_text(body)


# -- the tool loop ---------------------------------------------------------------------------


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


async def test_tool_loop_stops_at_max_turns(llm: LLMClient, fake: FakeOpenAI) -> None:
    name_map = unique_tool_names([CLOCK])
    call = (next(iter(name_map)), {"timezone": "UTC"})
    fake.handler = lambda body: Reply("Let me check again.", tool_calls=[call])
    executor = RecordingExecutor()
    result = await llm.run_tool_loop(user("time?"), openai_tools(name_map), name_map,
                                     executor, CONTEXT, max_turns=3)
    assert result.max_turns_reached and result.turns == 3
    assert len(fake.chat_requests) == 3 and len(executor.calls) == 3 and len(result.tool_calls) == 3
    assert result.answer == "Let me check again."
    assert result.messages[-1]["role"] == "tool"


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


async def test_a_500_is_retried_then_answers(server: Served, fake: FakeOpenAI) -> None:
    fake.push(ApiError(500, "The server had an error", headers={"retry-after-ms": "5"}),
              json_reply({"relevant_servers": [], "reasoning": "none"}))
    client = LLMClient(settings(server.url, max_retries=2))
    try:
        assert await client.select_servers(user("x"), CANDIDATES) == ([], "none")
    finally:
        await client.close()
    assert len(fake.chat_requests) == 2


async def test_a_persistent_500_is_retried_per_max_retries_then_raises(server: Served,
                                                                      fake: FakeOpenAI) -> None:
    fake.handler = lambda body: ApiError(500, "The server had an error while processing your request.",
                                         headers={"retry-after-ms": "5"})
    client = LLMClient(settings(server.url, max_retries=2))
    try:
        with pytest.raises(LLMFailed, match=r"HTTP 500 after 2 retries: The server had an error") as info:
            await client.rewrite_query([*user("a"), {"role": "assistant", "content": "b"}, *user("c")])
    finally:
        await client.close()
    assert len(fake.chat_requests) == 3  # the first attempt and two retries
    assert info.value.status_code == 502 and info.value.details["status"] == 500


async def test_a_wrong_key_is_not_retried_and_not_echoed(server: Served, fake: FakeOpenAI) -> None:
    client = LLMClient(settings(server.url, api_key="sk-wrong-SECRET-1", max_retries=2))
    try:
        with pytest.raises(LLMFailed, match=r"HTTP 401: Incorrect API key") as info:
            await client.choose_server("time?", CANDIDATES)
    finally:
        await client.close()
    assert len(fake.requests) == 1
    assert "sk-wrong-SECRET-1" not in str(info.value.payload())


async def test_a_slow_server_times_out(server: Served, fake: FakeOpenAI) -> None:
    fake.push(Reply("late", delay_s=3))
    client = LLMClient(settings(server.url, timeout_s=0.3))
    try:
        with pytest.raises(LLMTimeout, match=r"did not answer within 0.3 s"):
            await client.run_tool_loop(user("hi"), [], {}, RecordingExecutor(), CONTEXT)
    finally:
        await client.close()


async def test_an_unreachable_server_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = LLMClient(settings(f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(LLMFailed, match=rf"cannot reach the LLM at http://127.0.0.1:{port}/v1"):
            await client.choose_server("time?", CANDIDATES)
    finally:
        await client.close()


# -- embeddings ------------------------------------------------------------------------------


async def test_openai_embedder_normalises_and_orders_by_index(server: Served, fake: FakeOpenAI,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTER_TEST_EMBED_KEY", KEY)
    fake.reverse_embeddings = True
    embedder = OpenAIEmbedder(EmbeddingSettings(
        provider="openai", base_url=f"{server.url}/v1", model="text-embedding-3-small",
        api_key_env="ROUTER_TEST_EMBED_KEY", batch_size=2))
    texts = ["get current time", "convert units", "weather forecast", "divide numbers", "read a file"]
    vectors = await embedder.embed(texts)
    assert vectors.shape == (5, 16) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    expected = np.array([default_embedding(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-5, atol=1e-6)
    bodies = fake.embedding_requests
    assert [b["input"] for b in bodies] == [texts[0:2], texts[2:4], texts[4:5]]
    assert {b["model"] for b in bodies} == {"text-embedding-3-small"}
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.requests)
