"""The HTTP edge's error model without Ray: router errors keep their status and message; anything
unforeseen is a 500 with a request id and a generic message, and its text stays in the log."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from deployments.http import build_http_app
from router.config import RouterSettings
from router.errors import NoRelevantBackend
from router.models import QueryRequest


class StubIngress:
    settings = RouterSettings()

    async def query(self, request: QueryRequest) -> Any:
        if request.question == "nothing fits":
            raise NoRelevantBackend("nothing in the catalog is relevant enough", candidates=[])
        raise RuntimeError("db password=hunter2 leaked in an exception")

    def extend_http(self, app: FastAPI) -> None: ...


@pytest.fixture
def client() -> TestClient:
    return TestClient(build_http_app(StubIngress()), raise_server_exceptions=False)  # type: ignore[arg-type]


def test_a_router_error_keeps_its_status_type_and_message(client: TestClient) -> None:
    resp = client.post("/v1/query", json={"question": "nothing fits"})
    assert resp.status_code == 404
    assert resp.json()["error"]["type"] == "no_relevant_backend"


def test_an_unexpected_error_answers_a_generic_500_with_a_request_id_and_logs_the_exception(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mcp_router.http"):
        resp = client.post("/v1/query", json={"question": "anything"}, headers={"x-request-id": "req-42"})
    assert resp.status_code == 500
    error = resp.json()["error"]
    assert error["type"] == "internal_error" and error["request_id"] == "req-42"
    assert "hunter2" not in resp.text and "RuntimeError" not in resp.text
    assert resp.headers["x-request-id"] == "req-42"
    logged = [r for r in caplog.records if "req-42" in r.getMessage()]
    assert logged and "hunter2" in str(logged[0].exc_info[1])  # the details are in the log, under that id


def test_a_request_id_that_is_not_a_plain_token_is_replaced(client: TestClient) -> None:
    resp = client.post("/v1/query", json={"question": "anything"}, headers={"x-request-id": "bad id <script>"})
    rid = resp.json()["error"]["request_id"]
    assert resp.status_code == 500 and rid != "bad id <script>" and rid.isalnum()
