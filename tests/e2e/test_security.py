"""Authentication, policies, limits and isolation over real HTTP and the real MCP client, with a secured
router under Ray Serve (two replicas) and real MCP backends.

Principals: alice (the operator), bob (no time server, fallback only, no chat), carol (a low rate limit),
dave (everything but one time tool), and a JWT service. A canary secret sits in every place a secret can
live.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_router.cli.local import free_port
from router.security.identity import key_hash, new_api_key
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, fresh_state, running_app, stdio

CANARY = "canary-9f4c2e7d1b"
KEYS = {name: new_api_key() for name in ("alice", "bob", "carol", "dave")}
SIGNER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RATE, BURST = 4.0, 4


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("secure")
    jwk = json.loads(RSAAlgorithm.to_jwk(SIGNER.public_key()))
    (tmp / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1"}]}))
    dead = free_port()
    settings = RouterSettings.model_validate({
        "backends": [
            stdio("calculator", EXAMPLES / "servers" / "calculator.py", intents=["technical-analysis"]),
            {"name": "time", "kind": "mcp_stdio", "command": "mcp-server-time",
             "description": "Current time in any IANA time zone, and conversion between zones."},
            # Never reachable; they only hold secrets that must not leak.
            {"name": "vault", "kind": "mcp_http", "url": f"http://127.0.0.1:{dead}/mcp",
             "headers": {"Authorization": f"Bearer {CANARY}-header"}, "connect_timeout_s": 1},
            {"name": "flows", "kind": "flowise", "url": f"http://127.0.0.1:{dead}", "api_key": f"{CANARY}-flow",
             "connect_timeout_s": 1},
        ],
        "llm": {"base_url": f"http://127.0.0.1:{dead}/v1", "model": "m", "api_key": f"{CANARY}-llm",
                "max_retries": 0, "timeout_s": 2},
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"], "replicas": 2,
                   "max_header_bytes": 4096, "allowed_hosts": ["router.example.test"], "auth": {
            "api_keys": [{"name": "alice", "sha256": key_hash(KEYS["alice"]), "policy": "operator"},
                         {"name": "bob", "sha256": key_hash(KEYS["bob"]), "policy": "limited"},
                         {"name": "carol", "sha256": key_hash(KEYS["carol"]), "policy": "slow"},
                         {"name": "dave", "sha256": key_hash(KEYS["dave"]), "policy": "no-convert"}],
            "jwt": {"issuer": "https://idp.test", "audience": "mcp-router", "jwks_file": str(tmp / "jwks.json")},
            "policies": {"limited": {"deny": ["time/*"], "modes": ["fallback"], "stats": False, "chat": False,
                                     "feedback": False},
                         "slow": {"rate_limit": {"requests_per_s": RATE, "burst": BURST}},
                         "no-convert": {"deny": ["time/convert_time"]}}}},
        "audit": {"path": str(tmp / "audit.jsonl")},
        "state_dir": fresh_state(),
    })
    with running_app(settings, ray_local["url"], healthy=False) as url:
        yield {"url": url, "audit": tmp / "audit.jsonl"}


def post(app: dict[str, Any], path: str, body: Any, who: str | None = "alice", **kw: Any) -> httpx.Response:
    headers = bearer(who) if who else {}
    return httpx.post(f"{app['url']}{path}", json=body, headers={**headers, **kw.pop("headers", {})},
                      timeout=30, **kw)


def test_without_a_valid_credential_every_route_is_401_with_the_bearer_challenge(app: dict[str, Any]) -> None:
    for headers in ({}, {"Authorization": "Bearer mcpr_wrong"}, {"x-api-key": "nope"}, {"Authorization": "Basic x"}):
        for method, path in (("POST", "/v1/query"), ("POST", "/v1/route"), ("GET", "/v1/backends"),
                             ("GET", "/v1/stats"), ("POST", "/mcp/")):
            r = httpx.request(method, f"{app['url']}{path}", headers=headers, json={"question": "hi"}, timeout=30)
            assert r.status_code == 401, (headers, path, r.text)
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert r.json()["error"]["type"] == "unauthenticated"
    health = httpx.get(f"{app['url']}/health", timeout=30)
    assert health.status_code in (200, 503) and health.json()["backends"] == {}  # liveness only


def test_keys_work_as_bearer_or_x_api_key_and_jwts_map_to_principals(app: dict[str, Any]) -> None:
    assert post(app, "/v1/query", {"question": "What is 6 times 7?"}).json()["answer"].startswith("6 * 7 = 42")
    r = httpx.post(f"{app['url']}/v1/route", json={"question": "hi"}, headers={"x-api-key": KEYS["bob"]}, timeout=30)
    assert r.status_code == 200
    claims = {"iss": "https://idp.test", "aud": "mcp-router", "sub": "svc", "exp": int(time.time()) + 60}
    token = jwt.encode(claims, SIGNER, algorithm="RS256", headers={"kid": "k1"})
    assert httpx.get(f"{app['url']}/v1/backends", headers={"Authorization": f"Bearer {token}"},
                     timeout=30).status_code == 200
    expired = jwt.encode({**claims, "exp": int(time.time()) - 600}, SIGNER, algorithm="RS256", headers={"kid": "k1"})
    r = httpx.get(f"{app['url']}/v1/backends", headers={"Authorization": f"Bearer {expired}"}, timeout=30)
    assert r.status_code == 401 and "expired" in r.json()["error"]["message"]


def test_a_denied_tool_is_invisible_on_every_http_surface(app: dict[str, Any]) -> None:
    question = {"question": "What time is it in Tokyo?"}
    bodies = [
        post(app, "/v1/route", question, "bob").text,
        post(app, "/v1/route", {**question, "k": 20}, "bob").text,
        post(app, "/v1/query", question, "bob").text,
        post(app, "/v1/tools/select", {"messages": [{"role": "user", "content": "time in Tokyo"}]}, "bob").text,
        httpx.get(f"{app['url']}/v1/backends", headers=bearer("bob"), timeout=30).text,
        httpx.get(f"{app['url']}/health", headers=bearer("bob"), timeout=30).text,
    ]
    for body in bodies:
        assert "get_current_time" not in body and "convert_time" not in body and '"time"' not in body, body
    # Naming the denied backend is answered exactly as naming one that does not exist.
    denied = post(app, "/v1/query", {**question, "backend": "time"}, "bob").json()["error"]
    missing = post(app, "/v1/query", {**question, "backend": "nope"}, "bob").json()["error"]
    assert denied["message"].replace("'time'", "'nope'") == missing["message"]
    assert "get_current_time" not in json.dumps(denied)
    # The same surfaces show the tool to a principal allowed it.
    assert "get_current_time" in post(app, "/v1/route", question).text
    assert '"time"' in httpx.get(f"{app['url']}/v1/backends", headers=bearer("alice"), timeout=30).text


async def test_a_denied_tool_is_invisible_over_mcp(app: dict[str, Any]) -> None:
    async with httpx2.AsyncClient(headers=bearer("bob"), timeout=30) as http, \
            Client(streamable_http_client(f"{app['url']}/mcp/", http_client=http)) as client:
        tools = json.dumps([t.model_dump(mode="json") for t in (await client.list_tools()).tools])
        texts = [tools]
        for name, args in (("list_backends", {}), ("explain_route", {"question": "What time is it in Tokyo?"}),
                           ("universal_query", {"question": "What time is it in Tokyo?"}),
                           ("universal_query", {"question": "What time is it in Tokyo?", "backend": "time"}),
                           ("select_tools", {"messages": [{"role": "user", "content": "time in Tokyo"}]})):
            result = await client.call_tool(name, args)
            texts.append(json.dumps(result.model_dump(mode="json")))
        refused = await client.call_tool("universal_query", {"question": "What is 6 times 7?", "mode": "parallel"})
        assert refused.is_error and "forbidden" in refused.content[0].text
        assert "policy 'limited'" in refused.content[0].text
    for text in texts:
        assert "get_current_time" not in text and "convert_time" not in text and '\\"time\\"' not in text, text


def test_policy_refusals_are_403_naming_the_policy(app: dict[str, Any]) -> None:
    refusals = [post(app, "/v1/query", {"question": "What is 6 times 7?", "mode": "parallel"}, "bob"),
                httpx.get(f"{app['url']}/v1/stats", headers=bearer("bob"), timeout=30),
                post(app, "/v1/chat", {"messages": [{"role": "user", "content": "hi"}]}, "bob")]
    for r in refusals:
        assert r.status_code == 403, r.text
        assert r.json()["error"]["type"] == "forbidden" and "policy 'limited'" in r.json()["error"]["message"]
    assert httpx.get(f"{app['url']}/v1/stats", headers=bearer("alice"), timeout=30).status_code == 200


def test_feedback_needs_the_right_and_only_counts_on_ones_own_requests(app: dict[str, Any]) -> None:
    ask = {"question": "What is 6 times 7?"}
    mine = post(app, "/v1/query", ask, "alice").json()["routing"]["request_id"]
    theirs = post(app, "/v1/query", ask, "carol").json()["routing"]["request_id"]
    time.sleep(0.5)  # decisions reach the learning owner without the answer waiting for them
    refused = post(app, "/v1/feedback", {"request_id": mine, "correct": True}, "bob")
    assert refused.status_code == 403 and "policy 'limited'" in refused.json()["error"]["message"]
    assert httpx.delete(f"{app['url']}/v1/backends/calculator/examples", headers=bearer("bob"),
                        timeout=30).status_code == 403
    other = post(app, "/v1/feedback", {"request_id": theirs, "correct": True}, "alice")
    assert other.status_code == 404 and "request_id" in other.json()["error"]["message"]
    accepted = post(app, "/v1/feedback", {"request_id": mine, "correct": True}, "alice")
    assert accepted.status_code == 200, accepted.text
    assert httpx.delete(f"{app['url']}/v1/backends/calculator/examples", headers=bearer("alice"),
                        timeout=30).status_code == 200


def test_a_request_body_cannot_claim_a_principal(app: dict[str, Any]) -> None:
    r = post(app, "/v1/query", {"question": "What is 6 times 7?", "principal": "alice"}, "bob")
    assert r.status_code == 400 and "principal" in r.json()["error"]["message"]


def test_sessions_are_namespaced_by_principal(app: dict[str, Any]) -> None:
    ask = {"question": "What is 6 times 7?", "session_id": "shared-1"}
    # Each replica keeps its sessions: after a few requests alice's session is known wherever hers land.
    alice = [post(app, "/v1/query", ask, "alice").json() for _ in range(6)]
    assert alice[0]["routing"]["decision"] == "route"
    assert [a["routing"]["decision"] for a in alice[2:]] == ["session"] * 4
    bob = post(app, "/v1/query", ask, "bob").json()
    assert bob["routing"]["decision"] == "route"  # bob's "shared-1" is not alice's
    assert {alice[-1]["routing"]["session_id"], bob["routing"]["session_id"]} == {"shared-1"}


def test_input_bounds_name_the_field(app: dict[str, Any]) -> None:
    cases = [({"question": "hi", "session_id": "has spaces"}, 400, "session_id"),
             ({"question": "hi", "arguments": {"a": "x" * 70_000}}, 400, "arguments"),
             ({"messages": [{"role": "user", "content": "x"}] * 501}, 400, "messages")]
    for body, status, field in cases:
        path = "/v1/tools/select" if "messages" in body else "/v1/query"
        r = post(app, path, body)
        assert r.status_code == status and field in r.json()["error"]["message"], r.text
    big = post(app, "/v1/route", {"question": "hi"}, headers={"x-padding": "p" * 8_000})
    assert big.status_code == 431 and big.json()["error"]["type"] == "headers_too_large"


def test_rate_limit_holds_across_two_replicas_and_spares_other_principals(app: dict[str, Any]) -> None:
    time.sleep(BURST / RATE + 0.5)  # carol's buckets full
    ok = limited = 0
    retry_after = []
    duration = 5.0
    started = time.monotonic()
    with httpx.Client(timeout=30) as client:
        while time.monotonic() - started < duration:
            r = client.post(f"{app['url']}/v1/route", json={"question": "What is 6 times 7?"}, headers=bearer("carol"))
            if r.status_code == 200:
                ok += 1
            else:
                assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limited", r.text
                retry_after.append(int(r.headers["retry-after"]))
                limited += 1
            assert client.post(f"{app['url']}/v1/route", json={"question": "hi"},
                               headers=bearer("alice")).status_code == 200
            time.sleep(0.02)
    elapsed = time.monotonic() - started
    allowed = RATE * elapsed + BURST
    assert limited > 0 and all(s >= 1 for s in retry_after)
    assert abs(ok - allowed) <= 0.1 * allowed, (ok, allowed, limited)


async def test_loadtest_over_one_keys_rate_gets_429s_while_another_key_keeps_its_success_rate(
        app: dict[str, Any]) -> None:
    import asyncio

    from mcp_router.cli.loadtest import run_loadtest

    questions = ["What is 6 times 7?"]
    (over, _), (under, _) = await asyncio.gather(
        run_loadtest(app["url"], questions, concurrency=32, duration=3, progress=False, api_key=KEYS["carol"]),
        run_loadtest(app["url"], questions, concurrency=2, duration=3, progress=False, api_key=KEYS["alice"]))
    assert over["errors_by_status"].get("429", 0) > 0 and over["ok"] > 0
    assert set(over["errors_by_cause"]) == {"rate_limited"}
    assert under["errors"] == 0 and under["ok"] > 0


def test_no_secret_reaches_a_response_the_logs_or_the_spans(app: dict[str, Any]) -> None:
    bodies = [post(app, "/v1/query", {"question": "What is 6 times 7?"}).text,
              post(app, "/v1/query", {"question": "hello", "backend": "vault"}).text,
              post(app, "/v1/query", {"question": "run the support flow", "backend": "flows"}).text,
              post(app, "/v1/chat", {"messages": [{"role": "user", "content": "What is 6 times 7?"}]}).text,
              httpx.get(f"{app['url']}/v1/backends", headers=bearer("alice"), timeout=30).text,
              httpx.get(f"{app['url']}/v1/stats", headers=bearer("alice"), timeout=30).text,
              httpx.get(f"{app['url']}/health", headers=bearer("alice"), timeout=30).text,
              post(app, "/v1/route", {"question": "hi"}, None, headers={"Authorization": f"Bearer {CANARY}"}).text]
    for body in bodies:
        assert CANARY not in body and KEYS["alice"] not in body, body
    time.sleep(2)  # let the replicas' logs and span exports reach their files
    import ray

    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    leaked = [p.name for p in logs.rglob("*") if p.is_file() and _contains(p, (CANARY, KEYS["alice"]))]
    assert not leaked
    spans = [p for p in logs.rglob("*.out") if p.is_file() and _contains(p, ('"router.query"',))]
    assert spans, "no exported spans found in the replicas' output"
    assert CANARY not in app["audit"].read_text()


def _contains(path: Path, needles: tuple[str, ...]) -> bool:
    data = path.read_bytes()
    return any(n.encode() in data for n in needles)


def audit_records(app: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The audit records by the caller's own request id."""
    time.sleep(0.5)
    records = [json.loads(line) for line in app["audit"].read_text().splitlines()]
    return {r["client_request_id"]: r for r in records if "client_request_id" in r}


def test_every_request_leaves_one_audit_record(app: dict[str, Any]) -> None:
    answered = post(app, "/v1/query", {"question": "What is 6 times 7?"}, headers={"x-request-id": "audit-probe-1"})
    post(app, "/v1/query", {"question": "What is 6 times 7?", "mode": "consensus"}, "bob",
         headers={"x-request-id": "audit-probe-2"})
    by_id = audit_records(app)
    ok, refused = by_id["audit-probe-1"], by_id["audit-probe-2"]
    assert ok["request_id"] == answered.json()["routing"]["request_id"] != "audit-probe-1"  # the router's own id
    assert (ok["principal"], ok["status"], ok["backend"], ok["tool"]) == ("alice", 200, "calculator", "calculate")
    assert len(ok["arguments_sha256"]) == 64 and "arguments" not in ok
    assert (refused["principal"], refused["status"], refused["outcome"], refused["error"]) == (
        "bob", 403, "refused", "forbidden")


async def test_a_refusal_over_mcp_is_audited_as_a_refusal(app: dict[str, Any]) -> None:
    headers = {**bearer("bob"), "x-request-id": "audit-mcp-1"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(f"{app['url']}/mcp/", http_client=http)) as client:
        refused = await client.call_tool("universal_query", {"question": "What is 6 times 7?", "mode": "parallel"})
    assert refused.is_error
    record = audit_records(app)["audit-mcp-1"]  # the tool call's request (the client's last one)
    assert (record["principal"], record["status"], record["outcome"], record["error"]) == (
        "bob", 200, "refused", "forbidden")


def test_serving_on_a_public_address_without_keys_is_refused_at_start() -> None:
    r = subprocess.run([sys.executable, "-m", "mcp_router.cli.main", "serve", "--config", str(EXAMPLES / "router.yaml"),
                        "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "server.auth" in r.stderr and "--insecure-no-auth" in r.stderr


# -- isolation: one caller never sees, slows or breaks another ----------------------------------------


def test_another_callers_arguments_and_errors_never_reach_a_principal(app: dict[str, Any]) -> None:
    secret = "alice-secret-42"
    refused = post(app, "/v1/query", {"question": "convert the time", "backend": "time", "tool": "convert_time",
                                      "arguments": {"source_timezone": secret, "time": "09:00",
                                                    "target_timezone": "Asia/Tokyo"}})
    assert refused.status_code >= 400 and secret in refused.text  # alice sees her own error
    seen = [httpx.get(f"{app['url']}{path}", headers=bearer("dave"), timeout=30) for path in
            ("/health", "/v1/backends", "/v1/backends/time")]
    for r in seen:
        assert r.status_code == 200 and secret not in r.text and "convert_time" not in r.text, r.text
    time_info = next(b for b in seen[1].json() if b["name"] == "time")
    assert time_info["tool_count"] == 1  # the one time tool dave may use
    assert seen[2].json()["examples"] == []  # other callers' questions are operator data


def test_one_callers_bad_calls_never_knock_a_backend_out_for_another(app: dict[str, Any]) -> None:
    bad = {"question": "what time is it", "backend": "time", "tool": "get_current_time",
           "arguments": {"timezone": "No/Such"}}
    for _ in range(12):  # more than the 5 failures in a row that eject a backend
        r = post(app, "/v1/query", bad)
        assert r.status_code == 502 and r.json()["error"]["type"] == "tool_failed", r.text
    good = post(app, "/v1/query", {"question": "What time is it in Tokyo?", "backend": "time",
                                   "tool": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}, "dave")
    assert good.status_code == 200, good.text
    status = next(b for b in httpx.get(f"{app['url']}/v1/backends", headers=bearer("dave"), timeout=30).json()
                  if b["name"] == "time")
    assert status["health"] == "healthy" and status["consecutive_failures"] == 0 and not status["last_error"]


def test_a_new_key_reads_no_operator_data(app: dict[str, Any]) -> None:
    for r in (httpx.get(f"{app['url']}/v1/stats", headers=bearer("dave"), timeout=30),
              httpx.delete(f"{app['url']}/v1/backends/calculator/examples", headers=bearer("dave"), timeout=30)):
        assert r.status_code == 403 and r.json()["error"]["type"] == "forbidden", r.text


def test_a_request_over_a_cap_is_refused_at_once_and_health_stays_fast(app: dict[str, Any]) -> None:
    import threading

    huge = {"messages": [{"role": "user", "content": "tell me the time. " * 50_000}]}  # 900 KB of clauses
    answers: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: answers.append(post(app, "/v1/tools/select", huge)))
    worker.start()
    health = [httpx.get(f"{app['url']}/health", timeout=30) for _ in range(5)]
    worker.join(30)
    assert answers[0].status_code == 413 and "tool_selection.max_conversation_bytes" in answers[0].text
    assert answers[0].elapsed.total_seconds() < 1.0
    assert all(h.status_code in (200, 503) and h.elapsed.total_seconds() < 1.0 for h in health)
    chat = post(app, "/v1/chat", {"messages": [{"role": "user", "content": "hi"}], "max_turns": 50})
    assert chat.status_code == 422 and "llm.max_tool_turns" in chat.text


def test_mcp_answers_the_hosts_it_is_configured_for_and_421_to_others(app: dict[str, Any]) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "lb-probe", "version": "1"}}}
    headers = {**bearer("alice"), "accept": "application/json, text/event-stream"}
    behind = httpx.post(f"{app['url']}/mcp/", json=initialize, timeout=30,
                        headers={**headers, "host": "router.example.test"})
    assert behind.status_code == 200 and behind.json()["result"]["serverInfo"]["name"] == "mcp-router"
    other = httpx.post(f"{app['url']}/mcp/", json=initialize, timeout=30, headers={**headers, "host": "evil.test"})
    assert other.status_code == 421
