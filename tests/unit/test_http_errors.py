"""The HTTP edge's error model without Ray: router errors keep their status and message; anything
unforeseen is a 500 with a request id and a generic message, and its text stays in the log."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from deployments.caller import Caller
from deployments.http import build_http_app
from deployments.middleware import Guard
from router.errors import NoRelevantBackend
from router.models import QueryRequest
from router.security.audit import AuditLog
from router.security.limits import Limiter
from router.settings import AuditSettings, RouterSettings


class StubService:
    settings = RouterSettings()

    async def query(self, request: QueryRequest, caller: Caller) -> Any:
        if request.question == "nothing fits":
            raise NoRelevantBackend("nothing in the catalog is relevant enough", candidates=[])
        if request.question == "slow":
            await asyncio.sleep(30)
        raise RuntimeError("db password=hunter2 leaked in an exception")


@pytest.fixture
def audit(tmp_path: Path) -> Path:
    return tmp_path / "audit.jsonl"


def guarded(audit: Path) -> Guard:
    """The HTTP app behind the edge every request passes (authentication off: loopback)."""
    settings = RouterSettings()
    return Guard(build_http_app(StubService()), settings.server.auth, max_header_bytes=16384,  # type: ignore[arg-type]
                 max_in_flight=8, audit=AuditLog(AuditSettings(path=str(audit))), limiter=Limiter(1))


@pytest.fixture
def client(audit: Path) -> TestClient:
    return TestClient(guarded(audit), raise_server_exceptions=False)


def test_a_router_error_keeps_its_status_type_and_message(client: TestClient) -> None:
    resp = client.post("/v1/query", json={"question": "nothing fits"})
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "no_relevant_backend"


def test_an_unexpected_error_answers_a_generic_500_with_a_request_id_and_logs_the_exception(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mcp_router.http"):
        resp = client.post("/v1/query", json={"question": "anything"})
    assert resp.status_code == 500
    error = resp.json()["error"]
    rid = error["request_id"]
    assert error["type"] == "internal_error" and len(rid) == 32
    assert "hunter2" not in resp.text and "RuntimeError" not in resp.text
    logged = [r for r in caplog.records if rid in r.getMessage()]
    assert logged and "hunter2" in str(logged[0].exc_info[1])  # the details are in the log, under that id


def test_the_router_assigns_the_request_id_and_keeps_the_callers_beside_it(client: TestClient, audit: Path) -> None:
    given = client.post("/v1/query", json={"question": "nothing fits"}, headers={"x-request-id": "req-42"})
    odd = client.post("/v1/query", json={"question": "nothing fits"}, headers={"x-request-id": "bad id <script>"})
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["request_id"] for r in records] == [a.json()["error"]["request_id"] for a in (given, odd)]
    assert all(r["request_id"] not in ("req-42", "bad id <script>") for r in records)
    assert records[0]["client_request_id"] == "req-42" and "client_request_id" not in records[1]
    assert [(r["status"], r["outcome"], r["error"]) for r in records] == [(404, "refused", "no_relevant_backend")] * 2


async def test_a_caller_that_leaves_before_the_answer_is_audited_as_cancelled_not_failed(audit: Path) -> None:
    body = json.dumps({"question": "slow"}).encode()
    scope = {"type": "http", "method": "POST", "path": "/v1/query", "raw_path": b"/v1/query", "query_string": b"",
             "headers": [(b"content-type", b"application/json")], "client": ("127.0.0.1", 1), "server": ("t", 80),
             "scheme": "http", "http_version": "1.1", "root_path": ""}
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else await asyncio.Future()

    async def send(message: dict[str, Any]) -> None:
        raise AssertionError(f"nothing is sent to a caller that left: {message}")

    request = asyncio.create_task(guarded(audit)(scope, receive, send))
    await asyncio.sleep(0.2)
    request.cancel()  # what the server does when the connection closes
    with pytest.raises(asyncio.CancelledError):
        await request
    [record] = [json.loads(line) for line in (await asyncio.to_thread(audit.read_text)).splitlines()]
    assert (record["status"], record["outcome"]) == (499, "cancelled")
