"""The /v1/chat service and the smart-routing events, with a scripted stand-in for the LLM client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router.errors import DeadlineExceeded, LimitExceeded, LLMNotConfigured
from router.llm.chat import ChatService
from router.llm.selection import ToolSelector
from router.llm.tool_loop import LoopResult
from router.models import ChatRequest
from tests.unit.helpers import fake_embed
from tests.unit.test_tools import SMALL, catalogs, index
from tests.unit.test_tracing import spans  # noqa: F401 - the in-memory span exporter fixture


class ScriptedLLM:
    def __init__(self, reroute: bool) -> None:
        self.reroute = reroute
        self.offered: list[set[str]] = []
        self.rewritten = 0

    async def rewrite_query(self, messages: list[dict[str, Any]]) -> str:
        self.rewritten += 1
        return str(messages[-1]["content"])

    async def run_tool_loop(self, messages: Any, tools: Any, name_map: Any, executor: Any, context: Any,
                            max_turns: Any, **timeouts: Any) -> LoopResult:
        self.offered.append(set(name_map))
        return LoopResult(answer="done", messages=list(messages), reroute=self.reroute, turns=1)


def turn(text: str) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], session_id="chat-1")


async def test_a_reroute_makes_the_next_turn_select_again_and_a_normal_turn_keeps_the_selection() -> None:
    selector = ToolSelector(SMALL, fake_embed)
    llm = ScriptedLLM(reroute=False)
    service = ChatService(llm, selector, executor=None)  # type: ignore[arg-type]
    first = await service.chat(turn("forecast rain"), index(catalogs()), deadline_s=30)
    second = await service.chat(turn("best chess move"), index(catalogs()), deadline_s=30)
    assert second.selection["path"] == "session_cache" and second.servers == first.servers
    llm.reroute = True
    rerouted = await service.chat(turn("best chess move"), index(catalogs()), deadline_s=30)
    assert rerouted.reroute
    after = await service.chat(turn("best chess move"), index(catalogs()), deadline_s=30)
    assert after.selection["path"] == "retrieval" and after.servers[0] == "chess"


async def test_a_turn_whose_session_selection_is_reused_asks_no_rewritten_query_of_the_model() -> None:
    llm = ScriptedLLM(reroute=False)
    service = ChatService(llm, ToolSelector(SMALL, fake_embed), executor=None)  # type: ignore[arg-type]
    talk = [{"role": "user", "content": "forecast rain"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "and tomorrow?"}]
    first = await service.chat(ChatRequest(messages=talk, session_id="s"), index(catalogs()), deadline_s=30)
    assert llm.rewritten == 1 and first.selection["path"] == "retrieval"
    again = await service.chat(ChatRequest(messages=talk, session_id="s"), index(catalogs()), deadline_s=30)
    assert again.selection["path"] == "session_cache" and llm.rewritten == 1  # one model call fewer


async def test_chat_without_an_llm_raises_the_configured_error() -> None:
    service = ChatService(None, ToolSelector(SMALL, fake_embed), executor=None,  # type: ignore[arg-type]
                          not_configured=LLMNotConfigured("set llm.model", missing="llm.model"))
    with pytest.raises(LLMNotConfigured, match=r"llm\.model"):
        await service.chat(turn("hi"), index(catalogs()), deadline_s=30)


async def test_a_turn_asking_for_more_model_calls_than_the_router_allows_is_a_422_naming_the_cap() -> None:
    service = ChatService(ScriptedLLM(reroute=False), ToolSelector(SMALL, fake_embed), executor=None,  # type: ignore[arg-type]
                          max_turns=8)
    for asked in (50, 51, 10**9):  # whatever is asked, the answer names the setting
        request = ChatRequest(messages=[{"role": "user", "content": "rain"}], max_turns=asked)
        with pytest.raises(LimitExceeded, match=r"llm\.max_tool_turns") as refused:
            await service.chat(request, index(catalogs()), deadline_s=30)
        assert refused.value.status_code == 422


async def test_a_turn_that_outlives_its_deadline_is_a_504_and_stops_the_loop() -> None:
    class Stalling(ScriptedLLM):
        async def run_tool_loop(self, *args: Any, **timeouts: Any) -> LoopResult:
            self.stopped = asyncio.Event()
            try:
                await asyncio.sleep(60)
            finally:
                self.stopped.set()
            raise AssertionError("not reached")

    llm = Stalling(reroute=False)
    service = ChatService(llm, ToolSelector(SMALL, fake_embed), executor=None)  # type: ignore[arg-type]
    with pytest.raises(DeadlineExceeded, match=r"deadline of 0\.2 s") as late:
        await service.chat(turn("rain"), index(catalogs()), deadline_s=0.2)
    assert late.value.status_code == 504 and llm.stopped.is_set()


async def test_selection_emits_smart_routing_start_and_end_events(spans: InMemorySpanExporter) -> None:  # noqa: F811
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request"):
        await ToolSelector(SMALL, fake_embed).select(index(catalogs()), [{"role": "user", "content": "rain"}])
    span = next(s for s in spans.get_finished_spans() if s.name == "request")
    names = [e.name for e in span.events]
    assert names == ["smart_routing_start", "smart_routing_end"]
    end = span.events[1].attributes
    assert end["success"] is True and end["path"] == "retrieval" and end["total_tools"] == 18
    assert end["selected_tools"] < 18 and "weather" in end["servers"]
