"""`mcp-router demo` prints a refusal readably: a 404's closest candidates with their confidence, a
422's tool and the arguments it takes."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcp_router.cli.local as local
import mcp_router.cli.main as cli_main
from router.errors import RouterError
from router.models import QueryRequest, RouteRequest
from tests.unit.router_world import UNRELATED, query, route, world


async def refusal(question: str, **settings: Any) -> dict[str, Any]:
    """The error body the router gives for a question (as the ingress sends it)."""
    w = world(settings=settings or None)
    with pytest.raises(RouterError) as info:
        await query(w.router, QueryRequest(question=question))
    return {"status": info.value.status_code, "body": info.value.payload()}


async def test_the_demo_prints_the_closest_candidates_and_the_arguments_a_tool_needs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    answers = {
        UNRELATED: await refusal(UNRELATED),
        "What time is it?": await refusal("What time is it?"),  # no time zone in the question
    }
    assert answers[UNRELATED]["status"] == 404 and answers["What time is it?"]["status"] == 422

    def handler(request: httpx.Request) -> httpx.Response:
        got = answers[json.loads(request.content)["question"]]
        return httpx.Response(got["status"], json=got["body"])

    real_client = httpx.Client
    monkeypatch.setattr(cli_main.httpx, "Client",
                        lambda **kw: real_client(transport=httpx.MockTransport(handler), **kw))
    cli_main._demo("http://router.test", [UNRELATED, "What time is it?"], 0.0)
    out = capsys.readouterr().out
    assert "error 404 no_relevant_backend" in out and "routing.min_confidence" in out
    assert "closest:" in out and "confidence=" in out and "tool=" in out
    assert "error 422 arguments_required" in out
    assert "time/get_current_time takes:" in out
    assert "timezone (string, required): IANA timezone name" in out


def test_a_refusal_without_details_prints_nothing_more() -> None:
    assert cli_main.refusal_lines({}) == []


async def test_the_route_command_prints_what_the_query_would_do_and_each_candidate_s_confidence() -> None:
    w = world()
    shown = await route(w.router, RouteRequest(question="What time is it?"))  # no time zone: a 422
    lines = cli_main.route_lines(shown.model_dump(mode="json"))
    assert lines[1] == "would answer 422 arguments_required"
    assert "time/get_current_time" in lines[2] and "confidence=" in lines[2] and "tool=" in lines[2]
    called = await route(w.router, RouteRequest(question="What time is it in Tokyo?"))
    would = cli_main.route_lines(called.model_dump(mode="json"))[1]
    assert would.startswith("would call: time/") and '"timezone": "Asia/Tokyo"' in would


def test_serve_on_a_port_in_use_says_so_before_starting_anything(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # It used to start Ray, then fail with HAProxy's traceback ("cannot bind socket") after ten seconds.

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    started: list[object] = []
    monkeypatch.setattr(local, "start_local", lambda *a, **k: started.append(a))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = Path(__file__).resolve().parents[2] / "examples" / "router.yaml"
        rc = cli_main.main(["serve", "--config", str(config), "--port", str(port)])
    assert rc == 2
    assert f"127.0.0.1:{port} is already in use" in capsys.readouterr().err
    assert started == []  # nothing was started


@pytest.mark.parametrize(("config", "needle"), [
    ("audit: {path: missing-dir/audit.jsonl}\n", "missing-dir/audit.jsonl: No such file or directory"),
    ("server: {auth: {jwt: {issuer: i, audience: a, jwks_file: nope/jwks.json}}}\n",
     "nope/jwks.json: No such file or directory"),
    ("server: {auth: {jwt: {issuer: i, audience: a, jwks_file: not-a-key-set.json}}}\n",
     "not-a-key-set.json: Invalid JWK Set value"),
])
def test_a_file_the_replicas_would_open_is_checked_before_anything_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], config: str,
        needle: str) -> None:
    # They passed validation, then failed in every replica's constructor: a Serve traceback after three tries.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "not-a-key-set.json").write_text('{"keys": "none"}')
    (tmp_path / "router.yaml").write_text("backends: []\n" + config)
    started: list[object] = []
    monkeypatch.setattr(local, "start_local", lambda *a, **k: started.append(a))
    assert cli_main.main(["serve", "--config", "router.yaml", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and started == []


def test_locking_a_backend_the_config_does_not_have_says_so_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a misspelt name locked nothing, yet the command printed "wrote ..." and exited 0
    (tmp_path / "router.yaml").write_text("backends: [{name: time, kind: mcp_stdio, command: mcp-server-time}]\n")
    assert cli_main.main(["lock", "--config", str(tmp_path / "router.yaml"), "--backend", "tiem"]) == 2
    assert "unknown backend 'tiem'; enabled: time" in capsys.readouterr().err
    assert not (tmp_path / "mcp-router.lock.json").exists()
