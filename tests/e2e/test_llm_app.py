"""The application with an LLM configured: /v1/chat's tool loop and LLM-filled arguments, end to end.

The LLM is an OpenAI-compatible server written for the tests (tests/fakes/openai_server.py), reached
over real HTTP by the `openai` SDK inside the Serve replica.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from router.settings import RouterSettings
from tests.conftest import EXAMPLES, TEST_SERVERS, running_app, stdio, wait_for
from tests.fakes import serve_app
from tests.fakes.openai_server import FakeOpenAI, Reply, json_reply


@pytest.fixture(scope="module")
def llm() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with serve_app(fake.app) as url:
        yield fake, url


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any], llm: tuple[FakeOpenAI, str],
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = RouterSettings.model_validate({
        "backends": [stdio("calculator", EXAMPLES / "servers" / "calculator.py"),
                     {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time"},
                     stdio("dyn", TEST_SERVERS / "dynamic.py")],
        "llm": {"base_url": f"{llm[1]}/v1", "model": "test-model", "api_key": "sk-test", "max_retries": 0},
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"]},
        # Its own state: the chat's tool calls become examples, which must not steer other suites.
        "state_dir": str(tmp_path_factory.mktemp("llm-state")),
    })
    with running_app(settings, ray_local["url"]) as url:
        yield url


def test_chat_runs_the_tool_loop_through_the_backend_actors(app: str, llm: tuple[FakeOpenAI, str]) -> None:
    fake, _ = llm
    fake.push(Reply(tool_calls=[("time__get_current_time", {"timezone": "Asia/Tokyo"})]),
              Reply("It is evening in Tokyo."))
    r = httpx.post(f"{app}/v1/chat", json={"messages": [{"role": "user", "content": "What time is it in Tokyo?"}]},
                   timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["answer"] == "It is evening in Tokyo." and body["turns"] == 2
    call = body["tool_calls"][0]
    assert (call["backend"], call["capability"], call["ok"]) == ("time", "get_current_time", True)
    tool_message = fake.chat_requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "Asia/Tokyo" in tool_message["content"]
    offered = {t["function"]["name"] for t in fake.chat_requests[-2]["tools"]}
    assert "calculator__calculate" in offered and body["selection"]["path"] == "below_threshold"
    # The tool the model called successfully is now a labelled example of the question.
    learned = wait_for(lambda: httpx.get(f"{app}/v1/backends/time", timeout=30).json()["examples"], timeout=30)
    assert [(e["name"], e["label"], e["source"], e["question"]) for e in learned] == [
        ("get_current_time", 1, "chat", "What time is it in Tokyo?")]


def test_the_llm_fills_arguments_the_question_does_not_spell_out(app: str, llm: tuple[FakeOpenAI, str]) -> None:
    fake, _ = llm
    fake.push(json_reply({"seconds": 0.2}))
    r = httpx.post(f"{app}/v1/query", json={"question": "please nap a little", "backend": "dyn",
                                            "tool": "sleep_for"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == "slept 0.2 s"
    assert r.json()["routing"]["arguments_source"] == "llm"
    assert "sleep_for" in fake.chat_requests[-1]["messages"][-1]["content"]


def test_an_llm_failure_is_a_clear_502_not_a_crash(app: str, llm: tuple[FakeOpenAI, str]) -> None:
    from tests.fakes.openai_server import ApiError

    fake, _ = llm
    fake.push(ApiError(500, "the model is on fire"))
    r = httpx.post(f"{app}/v1/query", json={"question": "please nap a little", "backend": "dyn",
                                            "tool": "sleep_for"}, timeout=60)
    assert r.status_code == 502 and "on fire" in r.json()["error"]["message"]


def test_where_retrieval_declines_the_model_may_choose_among_the_closest(app: str,
                                                                         llm: tuple[FakeOpenAI, str]) -> None:
    fake, _ = llm
    question = "Is the bakery in Rome open now?"
    declined = httpx.post(f"{app}/v1/route", json={"question": question}, timeout=60).json()
    assert declined["decision"] == "no_match"  # nothing is likely enough by retrieval alone
    assert declined["message"].endswith("would first ask the configured LLM to choose among the candidates")
    fake.push(json_reply({"decision": "server", "server": "time", "tool": "get_current_time",
                          "clarifying_question": None, "reasoning": "opening hours depend on the local time"}))
    r = httpx.post(f"{app}/v1/query", json={"question": question}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["backend"], body["capability"]) == ("time", "get_current_time")
    assert body["routing"]["decision"] == "llm" and "Europe/Rome" in body["answer"]
    offered = fake.chat_requests[-1]["response_format"]["json_schema"]["schema"]["properties"]["tool"]["enum"]
    assert "get_current_time" in offered


def test_the_model_may_confirm_that_nothing_fits(app: str, llm: tuple[FakeOpenAI, str]) -> None:
    fake, _ = llm
    fake.push(json_reply({"decision": "none", "server": None, "tool": None, "clarifying_question": None,
                          "reasoning": "no backend bakes bread"}))
    r = httpx.post(f"{app}/v1/query", json={"question": "Bake a sourdough bread recipe"}, timeout=60)
    assert r.status_code == 404, r.text
    assert "no backend bakes bread" in r.json()["error"]["message"]
