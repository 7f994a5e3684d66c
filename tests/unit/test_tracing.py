"""Spans for a request that falls back: the tree and its semantic-convention attributes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from router.models import QueryRequest
from tests.unit.fake_executor import fail
from tests.unit.router_world import BOTH_CLOCKS, answers, query, world

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER


async def test_a_fallback_request_produces_the_expected_span_tree(spans: InMemorySpanExporter) -> None:
    w = world(answers(time=fail("backend_failed", "boom")))
    response = await query(w.router, QueryRequest(question=BOTH_CLOCKS, backend="time",
                                                 fallback_on_override=True))
    assert response.backend == "clock"
    finished = spans.get_finished_spans()
    by_name = {s.name: s for s in finished}
    root, decide = by_name["router.query"], by_name["router.decide"]
    strategy = by_name["router.strategy.fallback"]
    attempts = sorted((s for s in finished if s.name.startswith("tools/call")), key=lambda s: s.start_time)
    assert root.parent is None
    assert decide.parent.span_id == root.context.span_id
    assert strategy.parent.span_id == root.context.span_id
    assert [a.parent.span_id for a in attempts] == [strategy.context.span_id] * 2
    first, second = attempts
    assert first.attributes["router.backend"] == "time" and first.attributes["error.type"] == "backend_failed"
    assert first.attributes["mcp.method.name"] == "tools/call"
    assert first.attributes["gen_ai.tool.name"] == "get_current_time"
    assert first.status.status_code == trace.StatusCode.ERROR
    assert second.attributes["router.backend"] == "clock" and second.attributes["router.outcome"] == "success"
    assert [e.name for e in strategy.events] == ["router.fallback"]
    assert decide.attributes["router.intent"] and "router.score.composite" in decide.attributes
    assert root.attributes["router.backend"] == "clock"


def test_the_http_span_names_the_route_template_not_the_path_a_caller_chose(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from tests.unit.test_http_errors import guarded

    client = TestClient(guarded(tmp_path / "audit.jsonl"), raise_server_exceptions=False)
    client.post("/v1/query", json={"question": "nothing fits"})
    client.get("/v1/backends/x-7f3a9c")
    client.get("/v1/made-up-9d2e")
    http = [s for s in spans.get_finished_spans() if s.name == "router.http"]
    assert [(s.attributes["http.route"], s.attributes["url.path"]) for s in http] == [
        ("/v1/query", "/v1/query"), ("/v1/backends/{name}", "/v1/backends/x-7f3a9c"),
        ("unmatched", "/v1/made-up-9d2e")]
