"""The whole application under Ray Serve: HTTP, the deployment handle, real MCP backends.

Backends: the calculator example (stdio), `mcp-server-time` from PyPI (stdio, third party), the
knowledge base over streamable HTTP (launched by its actor), a test server with slow and failing
tools, and a backend whose command exits at once.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import ray
from ray import serve

from mcp_router.cli.local import free_port
from router.errors import UnknownIntent
from router.models import QueryRequest, QueryResponse
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, TEST_SERVERS, fresh_state, running_app, stdio, wait_for


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    kb_port = free_port()
    kb_store = tmp_path_factory.mktemp("rag-store")
    settings = RouterSettings.model_validate({
        "backends": [
            stdio("calculator", EXAMPLES / "servers" / "calculator.py", intents=["technical-analysis"]),
            {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time",
             "description": "Current time in any IANA time zone, and conversion between zones."},
            {"name": "kb", "kind": "mcp_http", "url": f"http://127.0.0.1:{kb_port}/mcp", "intents": ["document-qa"],
             "launch": {"command": sys.executable,
                        "args": ["-m", "mcp_router.servers.knowledge_base", "--docs", str(EXAMPLES / "docs"), "--store",
                                 str(kb_store), "--http", str(kb_port)], "token_env": "MCP_ROUTER_KB_TOKEN"}},
            stdio("dyn", TEST_SERVERS / "dynamic.py", timeout_s=1.5),
            {"name": "broken", "kind": "mcp_stdio", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"],
             "connect_timeout_s": 5},
        ],
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"]},
        "state_dir": fresh_state(),
    })
    with running_app(settings, ray_local["url"], healthy=False) as url:  # "broken" never comes up
        wait_for(lambda: httpx.get(f"{url}/v1/backends").json()[2]["health"] == "healthy", timeout=30)
        yield {"url": url, "settings": settings}


def post(app: dict[str, Any], path: str, body: Any, **kw: Any) -> httpx.Response:
    return httpx.post(f"{app['url']}{path}", json=body, timeout=60, **kw)


def test_time_question_is_answered_by_the_time_server_with_routing_metadata(app: dict[str, Any]) -> None:
    r = post(app, "/v1/query", {"question": "What time is it in Tokyo?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["backend"] == "time" and body["capability"] == "get_current_time"
    assert "Asia/Tokyo" in body["answer"]
    meta = body["routing"]
    assert meta["chosen"]["backend"] == "time"
    assert meta["arguments"] == {"timezone": "Asia/Tokyo"} and meta["arguments_source"].startswith("extracted")
    assert len(meta["candidates"]) >= 3
    components = {"dense", "bm25", "hybrid", "server", "match", "health", "perf", "composite"}
    assert components <= set(meta["candidates"][0]["scores"])
    assert meta["execution_ms"] > 0 and meta["total_ms"] >= meta["execution_ms"]


def test_arithmetic_goes_to_the_calculator(app: dict[str, Any]) -> None:
    body = post(app, "/v1/query", {"question": "What is 12 times (3 + 4)?"}).json()
    assert body["backend"] == "calculator" and body["answer"].endswith("= 84")


def test_documentation_question_goes_to_the_http_knowledge_base(app: dict[str, Any]) -> None:
    question = "According to the documentation, how is the composite score computed?"
    body = post(app, "/v1/query", {"question": question}).json()
    # The knowledge base lists its documents' sections as resources: the one on the composite score is read.
    assert (body["backend"], body["kind"], body["capability"]) == ("kb", "resource", "routing.md: The composite score")
    assert "0.5 * match" in body["answer"]
    searched = post(app, "/v1/query", {"question": question, "backend": "kb", "tool": "rag_query_with_chunks"}).json()
    assert "0.5 * match" in searched["structured"]["data"]["answer"] and "0.5 * match" in searched["answer"]


def test_backends_lists_every_backend_with_kind_transport_health_and_tools(app: dict[str, Any]) -> None:
    backends = {b["name"]: b for b in httpx.get(f"{app['url']}/v1/backends").json()}
    assert set(backends) == {"calculator", "time", "kb", "dyn", "broken"}
    assert backends["calculator"] | {} and backends["calculator"]["tool_count"] == 2
    assert backends["kb"]["transport"] == "streamable-http" and backends["kb"]["health"] == "healthy"
    assert backends["time"]["kind"] == "mcp_stdio" and backends["time"]["tool_count"] == 2
    assert backends["broken"]["health"] == "down" and backends["broken"]["last_error"]


def test_health_is_degraded_but_200_while_one_backend_is_down(app: dict[str, Any]) -> None:
    r = httpx.get(f"{app['url']}/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "degraded"
    assert body["backends"]["broken"]["status"] == "down" and body["backends"]["calculator"]["status"] == "healthy"


@pytest.mark.parametrize(("body", "status", "needle"), [
    ("{not json", 400, "not valid JSON"),
    ({}, 400, "question: field required"),
    ({"question": ""}, 400, "question"),
    ({"question": "   "}, 400, "empty"),
    ({"question": 42}, 400, "valid string"),
    ({"question": "hi", "mode": "sideways"}, 400, "mode"),
    ({"question": "hi", "surprise": 1}, 400, "surprise: unknown field"),
    ({"question": "x" * 40_000}, 413, "limit"),
    ({"question": "hi", "intent": "astrology"}, 400, "allowed values"),
    ({"question": "hi", "backend": "nope"}, 404, "unknown backend 'nope'"),
])
def test_bad_input_gets_a_4xx_naming_the_problem(app: dict[str, Any], body: Any, status: int, needle: str) -> None:
    if isinstance(body, str):
        r = httpx.post(f"{app['url']}/v1/query", content=body, headers={"content-type": "application/json"})
    else:
        r = post(app, "/v1/query", body)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]["message"]


def test_tool_needing_arguments_answers_422_with_the_schema(app: dict[str, Any]) -> None:
    r = post(app, "/v1/query", {"question": "please sleep a while", "backend": "dyn", "tool": "sleep_for"})
    assert r.status_code == 422
    err = r.json()["error"]
    assert "sleep_for" in err["message"] and err["details"]["input_schema"]["required"] == ["seconds"]


def test_tool_call_past_its_timeout_answers_504_naming_backend_and_tool(app: dict[str, Any]) -> None:
    r = post(app, "/v1/query", {"question": "sleep", "backend": "dyn", "tool": "sleep_for",
                                "arguments": {"seconds": 5}})
    assert r.status_code == 504, r.text
    msg = r.json()["error"]["message"]
    assert "dyn" in msg and "sleep_for" in msg


def test_tool_error_is_a_502_tool_failure_with_its_message(app: dict[str, Any]) -> None:
    r = post(app, "/v1/query", {"question": "boom", "backend": "dyn", "tool": "explode"})
    assert r.status_code == 502
    assert r.json()["error"]["type"] == "tool_failed" and "exploded on purpose" in r.json()["error"]["message"]


def test_down_backend_named_explicitly_answers_503(app: dict[str, Any]) -> None:
    r = post(app, "/v1/query", {"question": "anything", "backend": "broken"})
    assert r.status_code in (404, 503)  # it never listed anything, so it has nothing to call either
    assert "broken" in r.json()["error"]["message"]


def test_route_is_a_dry_run_with_every_score_component(app: dict[str, Any]) -> None:
    r = post(app, "/v1/route", {"question": "convert 10 miles to km"})
    body = r.json()
    assert r.status_code == 200 and body["decision"] == "route"
    top = body["candidates"][0]
    assert (top["backend"], top["capability"]) == ("calculator", "convert_units")
    assert top["scores"]["composite"] == pytest.approx(
        0.5 * top["scores"]["match"] + 0.3 * top["scores"]["health"] + 0.2 * top["scores"]["perf"], abs=1e-3)


def test_a_page_rebound_to_the_router_is_not_answered_as_its_local_operator(app: dict[str, Any]) -> None:
    question = {"question": "What time is it in Tokyo?"}
    rebound = post(app, "/v1/route", question, headers={"host": "evil.example:8000"})
    assert rebound.status_code == 421 and "server.allowed_hosts" in rebound.text
    assert post(app, "/v1/route", question, headers={"origin": "http://evil.example"}).status_code == 403
    assert post(app, "/v1/route", question, headers={"host": "localhost"}).status_code == 200


def test_openapi_docs_are_served(app: dict[str, Any]) -> None:
    assert httpx.get(f"{app['url']}/docs").status_code == 200
    assert "/v1/query" in httpx.get(f"{app['url']}/openapi.json").json()["paths"]


def test_deployment_handle_returns_the_same_typed_response(app: dict[str, Any]) -> None:
    handle = serve.get_app_handle("mcp-router")
    response = handle.query.remote(QueryRequest(question="What is 6 times 7?")).result(timeout_s=60)
    assert isinstance(response, QueryResponse)
    assert response.backend == "calculator" and response.answer.endswith("= 42")
    assert response.routing is not None and response.routing.chosen is not None


def test_deployment_handle_raises_router_errors(app: dict[str, Any]) -> None:
    handle = serve.get_app_handle("mcp-router")
    with pytest.raises(UnknownIntent):
        handle.query.remote(QueryRequest(question="hi", intent="astrology")).result(timeout_s=60)


def test_stats_show_recorded_history(app: dict[str, Any]) -> None:
    post(app, "/v1/query", {"question": "What is 2 plus 2?"})
    data = wait_for(lambda: [s for s in httpx.get(f"{app['url']}/v1/stats").json()["series"]
                             if s["backend"] == "calculator"], timeout=10)
    assert data[0]["calls"] >= 1 and 0 <= data[0]["perf_score"] <= 1


async def test_concurrent_queries_all_succeed(app: dict[str, Any]) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        rs = await asyncio.gather(*(client.post(f"{app['url']}/v1/query", json={"question": f"What is {i} plus 1?"})
                                    for i in range(40)))
    assert [r.status_code for r in rs] == [200] * 40
    assert rs[9].json()["answer"].endswith("= 10")
    assert ray.is_initialized()


def test_tool_selection_below_the_thresholds_offers_every_tool_in_openai_format(app: dict[str, Any]) -> None:
    r = post(app, "/v1/tools/select", {"messages": [{"role": "user", "content": "what is 2 plus 2?"}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["metrics"]["path"] == "below_threshold" and body["metrics"]["reduction_ratio"] == 0.0
    names = {t["function"]["name"] for t in body["tools"]}
    assert {"calculator__calculate", "time__get_current_time", "dyn__sleep_for"} <= names
    listed = httpx.get(f"{app['url']}/v1/backends").json()
    assert len(names) == sum(b["tool_count"] for b in listed)
    assert all(t["type"] == "function" and "parameters" in t["function"] for t in body["tools"])
    bad = post(app, "/v1/tools/select", {"messages": [{"role": "robot", "content": "x"}]})
    assert bad.status_code == 400 and "role" in bad.json()["error"]["message"]


def test_chat_without_an_llm_answers_503_naming_the_missing_setting(app: dict[str, Any]) -> None:
    r = post(app, "/v1/chat", {"messages": [{"role": "user", "content": "hello"}]})
    assert r.status_code == 503
    assert r.json()["error"]["type"] == "llm_not_configured" and "llm.model" in r.json()["error"]["message"]
