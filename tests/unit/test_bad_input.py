"""Bad input at every edge is a 4xx (or a non-zero exit) naming what was wrong, never a traceback or a bare 500:
request bodies, routes and methods, config files, the command line's flags and answers, token claims."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2  # what the test client speaks
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient
from jwt.algorithms import RSAAlgorithm

import mcp_router.cli.main as cli_main
from deployments.http import build_http_app
from deployments.middleware import BodyLimit, Guard
from router.errors import ConfigError, Unauthenticated
from router.security.audit import AuditLog
from router.security.identity import Authenticator
from router.security.limits import Limiter
from router.settings import AuditSettings, AuthSettings, RouterSettings
from router.settings.file import load_settings

BODY_LIMIT = 1000


class UnreachedService:
    settings = RouterSettings()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a refused request reached the service's {name}")


@pytest.fixture
def audit(tmp_path: Path) -> Path:
    return tmp_path / "audit.jsonl"


@pytest.fixture
def client(audit: Path) -> TestClient:
    app = BodyLimit(build_http_app(UnreachedService()), BODY_LIMIT)  # type: ignore[arg-type]
    guard = Guard(app, RouterSettings().server.auth, max_header_bytes=16384, max_in_flight=8,
                  audit=AuditLog(AuditSettings(path=str(audit))), limiter=Limiter(1))
    return TestClient(guard, raise_server_exceptions=False)


def error(resp: httpx2.Response, status: int, kind: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()["error"]
    assert body["type"] == kind and len(body["request_id"]) == 32
    return str(body["message"])


# -- request bodies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/tools/select", "/v1/chat"])
@pytest.mark.parametrize("text", [5, None])
def test_a_content_part_whose_text_is_not_a_string_is_a_400_naming_it(client: TestClient, path: str,
                                                                      text: Any) -> None:
    messages = [{"role": "user", "content": "hello"},
                {"role": "user", "content": [{"type": "text", "text": "fine"}, {"type": "text", "text": text}]}]
    message = error(client.post(path, json={"messages": messages}), 400, "invalid_request")
    assert "messages[1].content[1].text must be a string" in message


@pytest.mark.parametrize(("messages", "named"), [
    ([{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}], "without a string tool_call_id"),
    ([{"role": "user", "content": {"text": "hi"}}], "messages[0].content must be a string or a list of parts"),
    ([{"role": "user"}], "(null only for an assistant's tool calls)"),
    ([{"role": "user", "content": ["hi"]}], "messages[0].content[0] must be an object with a string type"),
    ([{"role": "user", "content": [{"text": "hi"}]}], "messages[0].content[0] must be an object with a string type"),
])
def test_a_message_the_model_would_refuse_is_the_callers_400(client: TestClient, messages: list[dict[str, Any]],
                                                              named: str) -> None:
    for path in ("/v1/tools/select", "/v1/chat"):
        assert named in error(client.post(path, json={"messages": messages}), 400, "invalid_request")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_arguments_holding_a_number_json_cannot_carry_are_a_400_naming_them(client: TestClient, number: str) -> None:
    # Python's JSON reader takes these; sent on to a flow they failed the backend's call (a 502 counted against it)
    body = '{"question": "hi", "backend": "flow", "tool": "f", "arguments": {"history": [{"n": NUMBER}]}}'
    body = body.replace("NUMBER", number)
    resp = client.post("/v1/query", content=body.encode(), headers={"content-type": "application/json"})
    message = error(resp, 400, "invalid_request")
    assert "arguments" in message and "NaN or an infinity" in message


@pytest.mark.parametrize("path", ["/v1/tools/select", "/v1/chat"])
@pytest.mark.parametrize(("field", "named"), [
    ('"content": ' + "[" * 300 + "]" * 300, "messages[0] are nested deeper than 12 levels"),
    ('"content": "hi", "tool_calls": ' + "[" * 40 + "]" * 40, "messages[0] are nested deeper than 12 levels"),
    ('"content": "hi", "x": NaN', "messages[0] hold a number JSON cannot carry"),
])
def test_any_field_of_a_message_that_a_model_could_not_be_sent_is_a_400(client: TestClient, path: str, field: str,
                                                                         named: str) -> None:
    body = '{"messages": [{"role": "user", ' + field + "}]}"
    resp = client.post(path, content=body.encode(), headers={"content-type": "application/json"})
    assert named in error(resp, 400, "invalid_request")


@pytest.mark.parametrize(("path", "body", "named"), [
    ("/v1/query", '{"question": "time?", "arguments": {"timezone": "\\ud800"}}', "in arguments"),
    ("/v1/tools/select", '{"messages": [{"role": "user", "content": "\\udc00 time in Tokyo"}]}',
     "in messages[0]"),
    ("/v1/chat", '{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}]}',
     "in messages[0]"),
    ("/v1/chat", '{"messages": [{"role": "user", "content": "hi", "name": "\\ud800"}]}', "in messages[0]"),
])
def test_a_lone_surrogate_is_a_400_naming_the_field(client: TestClient, path: str, body: str, named: str) -> None:
    # Valid JSON with no UTF-8 form: sent on, it failed a stdio backend's session for every caller, and the
    # tokenizer on it failed other callers' questions embedded in the same batch.
    resp = client.post(path, content=body.encode(), headers={"content-type": "application/json"})
    assert f"lone UTF-16 surrogate {named}" in error(resp, 400, "invalid_request")


def test_an_unknown_route_and_a_wrong_method_answer_in_the_apis_error_format(client: TestClient,
                                                                           audit: Path) -> None:
    assert "GET /v1/nothing-here" in error(client.get("/v1/nothing-here"), 404, "not_found")
    assert "GET /ui/nope.js" in error(client.get("/ui/nope.js"), 404, "not_found")  # the console's too
    wrong = client.get("/v1/query")
    assert "GET /v1/query" in error(wrong, 405, "method_not_allowed") and wrong.headers["allow"] == "POST"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["status"], r["error"]) for r in records] == [(404, "not_found"), (404, "not_found"),
                                                             (405, "method_not_allowed")]


def test_a_streamed_body_over_the_limit_is_a_413_not_a_parse_error(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is met while FastAPI reads the body
        yield b'{"question": "'
        yield b"x" * BODY_LIMIT
        yield b'"}'

    resp = client.post("/v1/query", content=chunks(), headers={"content-type": "application/json"})
    assert f"exceeds {BODY_LIMIT} bytes" in error(resp, 413, "payload_too_large")


async def test_a_body_that_does_not_arrive_in_time_is_a_408_and_frees_its_slot_at_once() -> None:
    """A client sending a byte now and then held one of the replica's request slots for as long as it liked."""
    app = BodyLimit(build_http_app(UnreachedService()), BODY_LIMIT, timeout_s=0.2)  # type: ignore[arg-type]
    scope = {"type": "http", "method": "POST", "path": "/v1/query", "raw_path": b"/v1/query", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
             "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 1)}
    parts = [{"type": "http.request", "body": b'{"question": "', "more_body": True}]
    sent: list[dict[str, Any]] = []

    async def trickle() -> dict[str, Any]:
        if parts:
            return parts.pop()
        await asyncio.sleep(5)  # the rest never comes in time
        return {"type": "http.request", "body": b'"}', "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    started = time.monotonic()
    await app(scope, trickle, send)
    assert time.monotonic() - started < 2 and sent[0]["status"] == 408
    body = json.loads(b"".join(m.get("body", b"") for m in sent[1:]))
    assert body["error"]["type"] == "request_timeout" and "server.body_timeout_s" in body["error"]["message"]


def test_a_body_that_is_not_utf8_is_a_400_saying_so(client: TestClient) -> None:
    resp = client.post("/v1/query", content=b'{"question": "\xff\xfe"}', headers={"content-type": "application/json"})
    assert "not UTF-8" in error(resp, 400, "invalid_request")


# -- config files --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("mcp.json", b'{"mcpServers": {"a": {"command": "x", "disabled": "no"}}}',
     r"mcpServers\.a\.disabled must be true or false, got 'no'"),
    ("latin1.yaml", "backends: []  # caf\u00e9\n".encode("latin-1"), "not UTF-8 text"),
    ("both.yaml", b"backends: 5\nmcpServers:\n  a: {command: x}\n", "backends must be a list"),
    ("state.yaml", b"state_dir: 9\n", "state_dir must be a path"),
    ("alias.yaml", b"x: &a [*a]\n", "refers to itself"),
])
def test_a_bad_config_file_is_a_config_error_naming_the_file(tmp_path: Path, name: str, content: bytes,
                                                              needle: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=needle) as info:
        load_settings(path, environ={})
    assert info.value.message.startswith(str(path)) and info.value.details["file"] == str(path)


def test_disabled_true_or_false_still_sets_enabled(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"on": {"command": "x", "disabled": False},
                                               "off": {"command": "x", "disabled": True}}}))
    assert {b.name: b.enabled for b in load_settings(path, environ={}).backends} == {"on": True, "off": False}


# -- the command line ------------------------------------------------------------------------------------


@pytest.fixture
def router_answers(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Response | Exception]:
    """What the (mock) router answers the command line, in order; an exception is raised instead."""
    script: list[httpx.Response | Exception] = []

    def answer(*_: Any, **__: Any) -> httpx.Response:
        got = script.pop(0)
        if isinstance(got, Exception):
            raise got
        got.request = httpx.Request("GET", "http://router.test")
        return got

    monkeypatch.setattr(cli_main.httpx, "post", answer)
    monkeypatch.setattr(cli_main.httpx, "get", answer)
    return script


HTML = httpx.Response(200, text="<html>502 Bad Gateway</html>", headers={"content-type": "text/html"})


@pytest.mark.parametrize(("argv", "answer", "code", "needle"), [
    (["query", "q", "--arguments", "notjson"], None, 2, "--arguments is not valid JSON"),
    (["query", "q", "--arguments", "[1]"], None, 2, "--arguments must be a JSON object"),
    (["query", "q", "--json"], HTML, 1, "HTTP 200 with a body that is not JSON: '<html>"),
    (["route", "q"], HTML, 1, "not JSON"),
    (["backends"], HTML, 1, "not JSON"),
    (["backends"], httpx.ReadTimeout("timed out"), 1, "did not answer within 60 s"),
    (["query", "q", "--url", "localhost:8000"], httpx.UnsupportedProtocol("no scheme"), 2,
     "--url 'localhost:8000' is not a router URL"),
    (["keys", "create", "ci bot"], None, 1, "not a key name: 'ci bot'"),  # no key shown that the config refuses
    (["keys", "create", "anonymous"], None, 1, "'anonymous' is reserved"),
    (["query", "q", "--api-key", "mcpr_abc\u2026"], None, 2, "holds a character that is not ASCII"),
])
def test_a_client_command_that_cannot_go_on_says_why_on_stderr_and_exits_non_zero(
        router_answers: list[httpx.Response | Exception], capsys: pytest.CaptureFixture[str], argv: list[str],
        answer: httpx.Response | Exception | None, code: int, needle: str) -> None:
    if answer is not None:
        router_answers.append(answer)
    assert cli_main.main(argv) == code
    out, err = capsys.readouterr()
    assert needle in err and "Traceback" not in err + out and "mcpr_" not in out


@pytest.mark.parametrize("argv", [["query", "q", "--timeout", "-1"], ["backends", "--timeout", "0"]])
def test_a_timeout_not_above_zero_is_refused_by_the_parser(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli_main.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--timeout: must be > 0" in err and "Traceback" not in err


@pytest.mark.parametrize(("extra", "needle"), [
    (["--json", "missing-folder/out.json"], "--json missing-folder/out.json: the folder"),
    (["--json", "."], "--json .: is a folder; name the file to write"),
    (["--plot", "."], "--plot .: is a folder"),
    (["--api-key", "caf\u00e9"], "holds a character that is not ASCII"),
])
def test_a_load_test_that_could_not_keep_its_results_or_authenticate_stops_before_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: list[str],
        needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_main.main(["loadtest", "--requests", "1", "--url", "http://127.0.0.1:9", *extra]) == 2
    assert needle in capsys.readouterr().err


def test_backends_exits_non_zero_when_the_router_refuses(router_answers: list[httpx.Response | Exception],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    router_answers.append(httpx.Response(401, json={"error": {"type": "unauthenticated", "message": "no key"}}))
    assert cli_main.main(["backends"]) == 1
    assert "unauthenticated" in capsys.readouterr().out


# -- token claims -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.parametrize("scope", [5, {"reader": True}, 1.5])
async def test_a_token_whose_scope_claim_is_not_a_string_or_list_is_refused_as_invalid(
        tmp_path: Path, signing_key: rsa.RSAPrivateKey, scope: Any) -> None:
    jwk = json.loads(RSAAlgorithm.to_jwk(signing_key.public_key()))
    jwk.update(kid="k1", use="sig", alg="RS256")
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    auth = Authenticator(AuthSettings.model_validate({"jwt": {
        "issuer": "https://idp.example", "audience": "mcp-router", "jwks_file": str(tmp_path / "jwks.json")}}))
    claims = {"iss": "https://idp.example", "aud": "mcp-router", "sub": "svc", "exp": int(time.time()) + 60,
              "scope": scope}
    token = jwt.encode(claims, signing_key, algorithm="RS256", headers={"kid": "k1"})
    with pytest.raises(Unauthenticated, match="scope claim must be a string or a list") as info:
        await auth.authenticate({"authorization": f"Bearer {token}"})
    assert info.value.headers()["WWW-Authenticate"].endswith('error="invalid_token"')
