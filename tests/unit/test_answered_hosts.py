"""DNS rebinding: where authentication is off, a request for a host the router does not answer by (a page
whose name now points at 127.0.0.1) is refused on every path, as the MCP SDK refuses it on /mcp/."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from deployments.http import build_http_app
from deployments.middleware import Guard
from deployments.middleware.hosts import AnsweredHosts
from router.security.audit import AuditLog
from router.security.limits import Limiter
from router.settings import AuditSettings, RouterSettings, ServerSettings
from tests.unit.test_http_errors import StubService


def client(tmp_path: Path, server: ServerSettings) -> TestClient:
    guard = Guard(build_http_app(StubService()), server.auth, max_header_bytes=16384,  # type: ignore[arg-type]
                  max_in_flight=8, audit=AuditLog(AuditSettings(path=str(tmp_path / "audit.jsonl"))),
                  limiter=Limiter(1), hosts=AnsweredHosts.for_server(server))
    return TestClient(guard, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)


def test_a_page_rebound_to_the_local_router_is_not_answered_as_its_operator(tmp_path: Path) -> None:
    local = client(tmp_path, RouterSettings().server)
    query = {"question": "nothing fits"}
    assert local.post("/v1/query", json=query).status_code == 404  # the router's own answer
    assert local.post("/v1/query", json=query, headers={"host": "localhost:8000"}).status_code == 404
    rebound = local.post("/v1/query", json=query, headers={"host": "evil.example:8000"})
    assert rebound.status_code == 421 and rebound.json()["error"]["type"] == "misdirected_request"
    assert "server.allowed_hosts" in rebound.json()["error"]["message"]
    cross = local.post("/v1/query", json=query, headers={"origin": "http://evil.example"})
    assert cross.status_code == 403 and "evil.example" in cross.json()["error"]["message"]
    assert local.post("/v1/query", json=query, headers={"origin": "http://127.0.0.1:8000"}).status_code == 404
    assert local.get("/health", headers={"host": "evil.example"}).status_code != 421  # public paths: as before


def test_the_hosts_configured_are_answered_and_a_wildcard_or_authentication_turns_the_check_off(
        tmp_path: Path) -> None:
    named = client(tmp_path, ServerSettings(allowed_hosts=["router.example"]))
    for host, status in (("router.example:8443", 404), ("router.example", 404), ("Router.Example:80", 404),
                         ("other.example", 421), ("127.0.0.1:9", 404)):
        assert named.post("/v1/query", json={"question": "nothing fits"},
                          headers={"host": host}).status_code == status, host
    assert AnsweredHosts.for_server(ServerSettings(allowed_hosts=["*"])) is None
    assert AnsweredHosts.for_server(ServerSettings(host="0.0.0.0", auth={"insecure_no_auth": True})) is None


def test_with_authentication_on_a_page_has_no_credential_to_present() -> None:
    auth = {"api_keys": [{"name": "a", "sha256": "0" * 64}]}
    assert AnsweredHosts.for_server(ServerSettings(auth=auth)) is None
