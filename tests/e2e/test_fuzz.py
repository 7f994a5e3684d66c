"""A short fuzzing run against the real router: schemathesis over its OpenAPI, and malformed JSON-RPC to
/mcp/. The long run is `benchmarks/fuzz.py`; both share its generators and checks.

The backend answers every question (the fault-injection server with no faults), so a 5xx here can only
come from the router itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.fuzz import generate_http_cases, load_schema, run_http, run_mcp
from benchmarks.jsonrpc_cases import crafted_cases
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, running_app, stdio

pytest.importorskip("schemathesis")

HTTP_CASES = 240
MCP_RANDOM_CASES = 120
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def url(ray_local: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = RouterSettings.model_validate({
        "backends": [stdio("answers", EXAMPLES / "servers" / "faulty.py")],
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"]},
        "state_dir": str(tmp_path_factory.mktemp("fuzz-state")),
    })
    with running_app(settings, ray_local["url"]) as url:
        yield url


def test_schemathesis_cases_over_every_operation_get_no_server_error(url: str) -> None:
    cases = generate_http_cases(load_schema(url, None), HTTP_CASES, seed=7)
    result = run_http(url, cases, None, timeout_s=30.0, workers=4)
    assert result["cases"] == HTTP_CASES
    assert {"POST /v1/query", "POST /v1/route", "POST /v1/tools/select", "POST /v1/chat", "GET /health"} <= \
        set(result["operations"])
    assert result["no_answer"] == 0
    # A deadline_s shorter than routing takes is answered 504 deadline_exceeded, as documented, and is
    # checked to have passed; anything else of 500 or more is a failure.
    assert [f for f in result["failures"] if not f["deadline_passed"]] == []
    assert sum(v for k, v in result["statuses"].items() if k.startswith("4")) > HTTP_CASES // 3


def test_every_malformed_json_rpc_message_gets_a_json_rpc_error_or_a_4xx(url: str) -> None:
    report = asyncio.run(run_mcp(url, RouterSettings().server.max_body_bytes, MCP_RANDOM_CASES, seed=7,
                                 api_key=None, timeout_s=30.0, workers=4))
    assert report["cases"] == len(crafted_cases(RouterSettings().server.max_body_bytes)) + MCP_RANDOM_CASES
    assert report["failures"] == [] and report["5xx"] == 0


@pytest.mark.parametrize("rid", ["null", "true", "1.5", "1e400", '{"a": 1}'])
def test_a_request_id_mcp_forbids_is_refused_not_dropped(url: str, rid: str) -> None:
    body = '{"jsonrpc": "2.0", "id": ' + rid + ', "method": "ping"}'
    r = httpx.post(f"{url}/mcp/", content=body, headers=MCP_HEADERS, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == -32600 and "id must be a string or an integer" in r.json()["error"]["message"]


def test_legal_ids_still_get_their_answer(url: str) -> None:
    for rid in ('"abc"', "7", "9" * 30):
        body = '{"jsonrpc": "2.0", "id": ' + rid + ', "method": "ping"}'
        r = httpx.post(f"{url}/mcp/", content=body, headers=MCP_HEADERS, timeout=10)
        assert r.status_code == 200 and r.text.startswith('{"jsonrpc":"2.0","id":' + rid + ',"result"'), r.text


def test_an_unknown_non_ascii_intent_or_backend_is_a_4xx_naming_the_value(url: str) -> None:
    # Such values once reached a metric tag, which refuses non-ASCII: the caller got a 500.
    r = httpx.post(f"{url}/v1/query", json={"question": "hi", "intent": "ümlaut"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["type"] == "unknown_intent" and "ümlaut" in r.text
    r = httpx.post(f"{url}/v1/query", json={"question": "hi", "backend": "ф"}, timeout=30)
    assert r.status_code == 404 and r.json()["error"]["type"] == "unknown_backend"


def test_a_deadline_too_short_to_route_is_a_504_deadline_exceeded(url: str) -> None:
    r = httpx.post(f"{url}/v1/query", json={"question": "what is the capital of Peru?", "deadline_s": 1e-9},
                   timeout=30)
    assert r.status_code == 504 and r.json()["error"]["type"] == "deadline_exceeded"
    assert "deadline_s" in r.json()["error"]["message"]


def test_the_question_length_limit_holds_over_mcp_as_over_http(url: str) -> None:
    limit = RouterSettings().server.max_question_bytes
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "universal_query", "arguments": {"question": "q" * (limit + 1)}}}
    r = httpx.post(f"{url}/mcp/", json=call, headers=MCP_HEADERS, timeout=30)
    result = r.json()["result"]
    assert result["isError"] is True and "payload_too_large: question is" in result["content"][0]["text"]
    r = httpx.post(f"{url}/v1/route", json={"question": "q" * (limit + 1)}, timeout=30)
    assert r.status_code == 413 and r.json()["error"]["type"] == "payload_too_large"
