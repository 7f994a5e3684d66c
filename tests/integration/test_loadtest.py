"""`mcp-router loadtest` against fakes served by uvicorn on 127.0.0.1 (no Ray).

The fake router answers /v1/query by question, so the tallies are exact however the requests
interleave: each of the six questions below is asked 10 times in a run of 60. `--protocol mcp` runs
against the router's own MCP adapter (deployments.mcp), behind its guard, in front of a stub service.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from deployments.asgi import build_asgi_app
from deployments.caller import Caller
from mcp_router.cli.loadtest import run_loadtest, summarize
from mcp_router.cli.local import free_port
from mcp_router.cli.main import build_parser, main
from router.errors import NoHealthyBackend
from router.models import QueryRequest, QueryResponse
from router.security.audit import AuditLog
from router.security.limits import Limiter
from router.settings import AuditSettings, RouterSettings
from tests.fakes import serve_app

QUESTIONS = [
    "What time is it in Tokyo?",  # time, first try
    "What is 12 times 7?",  # calculator, first try
    "Convert 5 km to miles",  # units fails, calculator answers: one fallback
    "Which backend is down?",  # 503 backend_unavailable
    "Which backend is slow?",  # 504 backend_timeout
    "Never answer this one",  # no answer before the client's timeout: a transport error
]
CLIENT_TIMEOUT_S = 2.0
MODES_SEEN: list[str | None] = []  # the `mode` of every request the fakes received


def _attempt(backend: str, outcome: str) -> dict[str, Any]:
    return {"backend": backend, "capability": "tool", "outcome": outcome, "latency_ms": 1.0}


def _answer(question: str) -> tuple[int, dict[str, Any]]:
    if "down" in question:
        return 503, {"error": {"type": "backend_unavailable", "message": "every candidate is down"}}
    if "slow" in question:
        return 504, {"error": {"type": "backend_timeout", "message": "the backend did not answer in time"}}
    backend = "time" if "Tokyo" in question else "calculator"
    attempts = [_attempt(backend, "success")]
    if "km" in question:
        attempts.insert(0, _attempt("units", "error"))
    routing = {"intent": "technical-analysis", "intent_source": "classified", "method": "flat",
               "mode": "fallback", "attempts": attempts, "fallbacks_used": len(attempts) - 1}
    body = {"answer": "42", "backend": backend, "capability": "tool", "kind": "tool", "routing": routing}
    return 200, QueryResponse.model_validate(body).model_dump(mode="json", exclude_none=True)


def build_fake_router() -> Starlette:
    async def query(request: Request) -> JSONResponse:
        body = await request.json()
        question = body["question"]
        MODES_SEEN.append(body.get("mode"))
        if "Never" in question:
            await asyncio.sleep(CLIENT_TIMEOUT_S + 0.5)  # answers after the client has given up
        status, body = _answer(question)
        return JSONResponse(body, status_code=status)

    return Starlette(routes=[Route("/v1/query", query, methods=["POST"])])


class StubService:
    """What the router's own MCP adapter needs from the service: `query`."""

    settings = RouterSettings()
    limiter = Limiter(1)

    async def query(self, request: QueryRequest, caller: Caller) -> QueryResponse:
        MODES_SEEN.append(request.mode)
        status, body = _answer(request.question)
        if status != 200:
            raise NoHealthyBackend(body["error"]["message"])
        return QueryResponse.model_validate(body)


def build_router_mcp_app() -> Any:
    """The router's own app as the replica builds it (deployments.asgi), in front of a stub service."""
    return build_asgi_app(StubService(), AuditLog(AuditSettings(enabled=False)))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fake_router() -> Iterator[str]:
    with serve_app(lifespan="on", app=build_fake_router()) as url:
        yield url


def test_loadtest_counts_errors_backends_and_fallbacks(fake_router: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("# one per line\n" + "\n".join(QUESTIONS) + "\n\n")
    out, plot = tmp_path / "run.json", tmp_path / "run.png"
    code = main(["loadtest", "--url", fake_router, "--requests", "60", "--concurrency", "8",
                 "--questions", str(questions), "--timeout", str(CLIENT_TIMEOUT_S),
                 "--json", str(out), "--plot", str(plot)])
    assert code == 0

    report = json.loads(out.read_text())
    assert report["requests"] == 60 and report["ok"] == 30 and report["errors"] == 30
    assert report["errors_by_status"] == {"503": 10, "504": 10}
    assert report["errors_by_cause"] == {"backend_unavailable": 10, "backend_timeout": 10, "ReadTimeout": 10}
    assert report["backends"] == {"calculator": 20, "time": 10}
    assert report["fallbacks"] == 10 and report["fallback_rate"] == pytest.approx(1 / 3)
    assert report["throughput_rps"] == pytest.approx(60 / report["elapsed_s"], rel=0.25)
    lat = report["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert lat["max"] >= CLIENT_TIMEOUT_S * 1000 * 0.9  # the timed-out requests
    assert report["latency_ms_ok"]["max"] < CLIENT_TIMEOUT_S * 1000

    samples = report["samples"]
    assert len(samples) == 60
    statuses = sorted(s["status"] for s in samples if s["status"] is not None)
    assert statuses == [200] * 30 + [503] * 10 + [504] * 10 and sum(s["ok"] for s in samples) == 30
    assert all(s["t"] >= 0 and s["latency_ms"] > 0 for s in samples)
    assert plot.is_file() and plot.stat().st_size > 1000
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    printed = capsys.readouterr().out
    assert "60 requests" in printed and "backend_unavailable x10" in printed and "33.3%" in printed


def test_duration_bound_run_with_mode(fake_router: str) -> None:
    MODES_SEEN.clear()
    summary, samples = asyncio.run(run_loadtest(fake_router, ["What is 12 times 7?"], concurrency=4,
                                                duration=0.5, mode="hedged", progress=False))
    assert summary["requests"] == summary["ok"] == len(samples) > 0 and summary["mode"] == "hedged"
    assert summary["elapsed_s"] < 5 and summary["backends"] == {"calculator": len(samples)}
    assert summary["fallback_rate"] == 0.0 and set(MODES_SEEN) == {"hedged"}


def test_mcp_protocol_against_the_routers_own_mcp_endpoint() -> None:
    MODES_SEEN.clear()
    with serve_app(lifespan="on", app=build_router_mcp_app()) as url:
        summary, _ = asyncio.run(run_loadtest(url, QUESTIONS[:4], concurrency=2, requests=8, mode="parallel",
                                              protocol="mcp", progress=False))
    assert summary["requests"] == 8 and summary["ok"] == 6, summary
    assert summary["backends"] == {"calculator": 4, "time": 2} and summary["fallbacks"] == 2
    assert summary["errors_by_cause"] == {"no_healthy_backend": 2} and set(MODES_SEEN) == {"parallel"}


def test_mcp_protocol_counts_a_missing_endpoint_as_errors() -> None:
    port = free_port()  # nothing listens here
    summary, _ = asyncio.run(run_loadtest(f"http://127.0.0.1:{port}", concurrency=2, requests=4,
                                          protocol="mcp", request_timeout=5, progress=False))
    assert summary["requests"] == summary["errors"] == 4 and summary["ok"] == 0
    assert sum(summary["errors_by_cause"].values()) == 4


def test_unreachable_router_gives_exit_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["loadtest", "--url", url, "--requests", "3", "--concurrency", "2"]) == 1
    assert "ConnectError x3" in capsys.readouterr().out


def test_exactly_one_bound_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for argv in (["loadtest"], ["loadtest", "--duration", "1", "--requests", "5"],
                 ["loadtest", "--requests", "0"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
    with pytest.raises(ValueError):
        asyncio.run(run_loadtest("http://127.0.0.1:1", progress=False))
    assert summarize([], 0.0)["fallback_rate"] == 0.0


def test_fake_router_speaks_the_router_error_format(fake_router: str) -> None:
    resp = httpx.post(f"{fake_router}/v1/query", json={"question": "Which backend is down?"})
    assert resp.status_code == 503 and resp.json()["error"]["type"] == "backend_unavailable"


def test_one_slow_request_does_not_sink_the_throughput_and_a_stall_shows_on_the_timeline() -> None:
    from mcp_router.cli.loadtest import Sample

    steady = [Sample(t=i / 100, latency_ms=5.0, status=200, ok=True) for i in range(1000)]  # 100 req/s for 10 s
    straggler = Sample(t=9.99, latency_ms=60_000.0, status=None, ok=False, cause="ReadTimeout")
    report = summarize([*steady, straggler], elapsed=70.0)
    assert 95 <= report["throughput_rps"] <= 105  # was 14.3: divided by the minute the straggler took
    stalled = [Sample(t=0.5, latency_ms=5.0, status=200, ok=True), Sample(t=11.5, latency_ms=5.0, status=200, ok=True)]
    seconds = summarize(stalled, elapsed=12.0)["timeline"]
    assert [p["rps"] for p in seconds] == [1.0] + [0.0] * 10 + [1.0]  # the ten idle seconds were not drawn
    assert "p50_ms" not in seconds[5]
    # A run of 10.25 s: its last quarter second's 25 requests are 100 req/s, not 25.
    tail = [Sample(t=10 + i / 100, latency_ms=5.0, status=200, ok=True) for i in range(25)]
    last = summarize([*steady, *tail], elapsed=10.3, duration=10.25)["timeline"][-1]
    assert (last["t"], last["rps"], last["s"]) == (11, 100.0, 0.25)
