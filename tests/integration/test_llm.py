"""The LLM layer (router/llm/client.py) and the OpenAI embedder with the real `openai` SDK, over real HTTP on
loopback, against the fake OpenAI-compatible server in tests/fakes/openai_server.py (no Ray, no model).
"""

from __future__ import annotations

import socket
from typing import Any

import numpy as np
import pytest

from router.errors import ArgumentsRequired, InvalidRequest, LLMBadOutput, LLMFailed, LLMNotConfigured, LLMTimeout
from router.llm.client import Choice, LLMClient
from router.retrieval.embeddings import OpenAIEmbedder
from router.settings import EmbeddingSettings, LLMSettings
from router.values import Capability
from tests.fakes.openai_server import ApiError, FakeOpenAI, Raw, Reply, default_embedding, json_reply
from tests.integration.llm_cases import (  # noqa: F401 - fixtures
    CALC,
    CANDIDATES,
    CLOCK,
    CONTEXT,
    KEY,
    MODEL,
    RecordingExecutor,
    Served,
    fake,
    llm,
    prompt_text,
    response_format,
    server,
    settings,
    user,
)

pytestmark = pytest.mark.timeout(30)


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
    ({"decision": "server", "server": "clock", "tool": None, "clarifying_question": None,
      "reasoning": "a time question"},
     Choice("server", server="clock", reasoning="a time question")),
    ({"decision": "server", "server": "clock", "tool": "get_time", "clarifying_question": None,
      "reasoning": "the current time"},
     Choice("server", server="clock", tool="get_time", reasoning="the current time")),
    ({"decision": "none", "server": None, "tool": None, "clarifying_question": None, "reasoning": "nothing cooks"},
     Choice("none", reasoning="nothing cooks")),
    ({"decision": "ambiguous", "server": None, "tool": None, "clarifying_question": "The time or the weather?",
      "reasoning": "both fit"},
     Choice("ambiguous", question="The time or the weather?", reasoning="both fit")),
], ids=["chosen", "tool", "none", "ambiguous"])
async def test_choose_server(llm: LLMClient, fake: FakeOpenAI, answer: dict[str, Any],
                             expected: Choice) -> None:
    fake.push(json_reply(answer))
    assert await llm.choose_server("What time is it in Tokyo?", CANDIDATES) == expected
    body = fake.chat_requests[-1]
    spec = response_format(body)
    assert spec["name"] == "server_choice"
    assert spec["schema"]["properties"]["server"]["enum"] == ["clock", "weather", "calc", None]
    assert spec["schema"]["properties"]["tool"]["enum"] == ["get_time", "convert_time", "forecast", "add", "divide",
                                                            None]
    text = prompt_text(body)
    assert "What time is it in Tokyo?" in text
    assert "- weather: Forecasts Tools: forecast." in text


async def test_choose_server_rejects_a_server_that_was_not_a_candidate(llm: LLMClient,
                                                                      fake: FakeOpenAI) -> None:
    fake.push(json_reply({"decision": "server", "server": "kitchen", "tool": None, "clarifying_question": None,
                          "reasoning": "?"}))
    with pytest.raises(LLMBadOutput, match=r"server_choice does not match its schema: \$\.server"):
        await llm.choose_server("Cook dinner", CANDIDATES)


async def test_choose_server_rejects_a_tool_of_another_server(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(json_reply({"decision": "server", "server": "clock", "tool": "forecast", "clarifying_question": None,
                          "reasoning": "?"}))
    with pytest.raises(LLMBadOutput, match="tool 'forecast', which server 'clock' does not list"):
        await llm.choose_server("What time is it?", CANDIDATES)


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


async def test_fill_arguments_sends_the_default_of_a_required_parameter_the_model_leaves_out(
        llm: LLMClient, fake: FakeOpenAI) -> None:
    # zod 4 lists a parameter with a default as required (Playwright's screenshot and its `scale`).
    shot = Capability(backend="playwright", name="browser_take_screenshot", input_schema={
        "type": "object", "required": ["scale"],
        "properties": {"scale": {"type": "string", "enum": ["css", "device"], "default": "css"}}})
    fake.push(json_reply({"scale": None}))
    assert await llm.fill_arguments("Take a screenshot", shot) == {"scale": "css"}


async def test_fill_arguments_of_the_wrong_type_raises(llm: LLMClient, fake: FakeOpenAI) -> None:
    fake.push(json_reply({"a": "ten", "b": 2}))
    with pytest.raises(LLMBadOutput, match=r"\$\.a: 'ten' is not of type 'number'"):
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
        with pytest.raises(LLMFailed, match=r"HTTP 401: it refused the router's credentials") as info:
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
        with pytest.raises(LLMFailed, match=rf"cannot reach the LLM \({MODEL}\): APIConnectionError") as info:
            await client.choose_server("time?", CANDIDATES)
        assert str(port) not in info.value.message  # where the LLM is, is the operator's
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


async def test_a_providers_message_reaches_the_caller_without_the_ids_it_quotes(server: Served,
                                                                               fake: FakeOpenAI) -> None:
    fake.handler = lambda body: ApiError(429, "Rate limit reached for gpt-4o in organization org-AbC123XYZ on "
                                              "requests per min; key sk-proj-abc***xyz")
    client = LLMClient(settings(server.url))
    try:
        with pytest.raises(LLMFailed, match=r"HTTP 429: Rate limit reached for gpt-4o in organization \[redacted\]") \
                as info:
            await client.choose_server("time?", CANDIDATES)
    finally:
        await client.close()
    assert "org-AbC123XYZ" not in info.value.message and "sk-proj" not in info.value.message


@pytest.mark.parametrize("reply", [Reply("half an emoji \ud83d"), Reply(tool_calls=[("calc__add\udc00", {"a": 1})])])
async def test_a_model_message_no_answer_could_carry_is_bad_output_not_a_500(server: Served, fake: FakeOpenAI,
                                                                             reply: Reply) -> None:
    fake.push(reply)
    client = LLMClient(settings(server.url))
    try:
        with pytest.raises(LLMBadOutput, match="lone UTF-16 surrogate"):
            await client.run_tool_loop(user("hi"), [], {}, RecordingExecutor(), CONTEXT)
    finally:
        await client.close()


async def test_a_tool_call_id_or_a_structured_answer_no_response_could_carry_is_bad_output(server: Served,
                                                                                       fake: FakeOpenAI) -> None:
    call = {"id": "call_\udc00", "type": "function", "function": {"name": "calc__add", "arguments": "{}"}}
    fake.push(Raw({"id": "c1", "object": "chat.completion", "created": 1, "model": MODEL,
                   "choices": [{"index": 0, "finish_reason": "tool_calls",
                                "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}))
    fake.push(json_reply({"query": "half an emoji \ud83d"}))  # valid JSON text whose string is no text
    client, executor = LLMClient(settings(server.url)), RecordingExecutor()
    try:
        with pytest.raises(LLMBadOutput, match="lone UTF-16 surrogate"):  # was a 500 after the tool ran
            await client.run_tool_loop(user("hi"), [], {"calc__add": CALC}, executor, CONTEXT)
        assert executor.calls == []  # refused before the call was sent
        with pytest.raises(LLMBadOutput, match="lone UTF-16 surrogate"):
            await client.rewrite_query([*user("a"), {"role": "assistant", "content": "b"}, *user("c")])
    finally:
        await client.close()
