"""BackendActor on a local Ray against real MCP servers: stdio subprocesses and streamable HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from actors.pool import create_backend_actor
from mcp_router.cli.local import free_port
from router.settings import RouterSettings
from router.values import CallContext, Capability
from tests.conftest import EXAMPLES, TEST_SERVERS, stdio, stop_process, wait_for, wait_listening

CTX = CallContext(question="test", intent="general")


def make_settings(*backends: dict[str, Any]) -> RouterSettings:
    return RouterSettings.model_validate({"backends": list(backends)})


def actor_for(settings: RouterSettings, name: str) -> Any:
    spec = settings.backend(name)
    assert spec is not None
    actor = create_backend_actor(spec, settings.resilience)
    ray.get(actor.start.remote(20.0))
    return actor


def call(actor: Any, backend: str, tool: str, args: dict[str, Any], timeout: float = 10.0) -> Any:
    cap = Capability(backend=backend, name=tool)
    return ray.get(actor.call.remote(cap, args, timeout, CTX))


@pytest.fixture
def cleanup(ray_local: Any) -> Iterator[list[Any]]:
    actors: list[Any] = []
    yield actors
    for a in actors:
        try:
            ray.get(a.shutdown.remote(), timeout=10)
        except ray.exceptions.RayError:
            pass
        ray.kill(a.host, no_restart=True)


def test_stdio_backend_lists_tools_and_answers_concurrent_calls_over_one_session(cleanup: list[Any]) -> None:
    settings = make_settings(stdio("calc", EXAMPLES / "servers" / "calculator.py"))
    actor = actor_for(settings, "calc")
    cleanup.append(actor)
    status = ray.get(actor.get_status.remote())
    assert status.health == "healthy" and status.tool_count == 2 and status.transport == "stdio"
    catalog = ray.get(actor.catalog.remote(None))
    assert {c.name for c in catalog.capabilities} == {"calculate", "convert_units"}
    refs = [actor.call.remote(Capability(backend="calc", name="calculate"), {"query": f"{i} * 3"}, 10.0, CTX)
            for i in range(30)]
    outcomes = ray.get(refs)
    assert all(o.ok for o in outcomes)
    assert [o.text for o in outcomes][7] == "7 * 3 = 21"


def test_tool_error_is_reported_as_a_failure_with_its_message(cleanup: list[Any]) -> None:
    settings = make_settings(stdio("dyn", TEST_SERVERS / "dynamic.py"))
    actor = actor_for(settings, "dyn")
    cleanup.append(actor)
    outcome = call(actor, "dyn", "explode", {"query": "boom"})
    assert not outcome.ok
    assert outcome.error_kind == "tool_failed"
    assert "exploded on purpose: boom" in outcome.error


def test_a_call_past_its_timeout_fails_as_a_timeout(cleanup: list[Any]) -> None:
    settings = make_settings(stdio("dyn", TEST_SERVERS / "dynamic.py", timeout_s=0.5))
    actor = actor_for(settings, "dyn")
    cleanup.append(actor)
    outcome = call(actor, "dyn", "sleep_for", {"seconds": 5}, timeout=0.5)
    assert outcome.error_kind == "backend_timeout"
    assert "sleep_for" in outcome.error and "dyn" in outcome.error
    # Cut short by the caller's deadline, below the backend's own timeout: the caller's doing, not a fault.
    cut = call(actor, "dyn", "sleep_for", {"seconds": 5}, timeout=0.2)
    assert cut.error_kind == "deadline_exceeded"
    assert call(actor, "dyn", "shout", {"text": "still alive"}).text == "STILL ALIVE"


def test_catalog_refreshes_when_the_server_announces_a_tool_list_change(cleanup: list[Any]) -> None:
    settings = make_settings(stdio("dyn", TEST_SERVERS / "dynamic.py", catalog_ttl_s=3600, health_interval_s=3600))
    actor = actor_for(settings, "dyn")
    cleanup.append(actor)
    before = ray.get(actor.catalog.remote(None))
    assert "fresh_tool" not in {c.name for c in before.capabilities}
    # What each tool does, as its annotations declare: `shout` only reads, `grow` (none declared) may act.
    declared = {c.name: c.read_only for c in before.capabilities}
    assert declared["shout"] is True and declared["grow"] is False
    assert call(actor, "dyn", "grow", {"name": "fresh_tool"}).ok

    def has_new_tool() -> bool:
        cat = ray.get(actor.catalog.remote(before.version))
        return cat is not None and "fresh_tool" in {c.name for c in cat.capabilities}

    wait_for(has_new_tool, timeout=10)


def test_health_goes_down_when_the_server_process_dies_and_comes_back_after_reconnecting(
        cleanup: list[Any]) -> None:
    marker = f"kill-me-{uuid.uuid4().hex[:8]}"
    settings = make_settings(stdio("dyn", TEST_SERVERS / "dynamic.py", "--marker", marker, health_interval_s=0.5,
                                   health_timeout_s=2))
    actor = actor_for(settings, "dyn")
    cleanup.append(actor)
    first_pid = call(actor, "dyn", "whoami", {}).text
    subprocess.run(["pkill", "-KILL", "-f", marker], check=True)

    def down() -> Any:
        s = ray.get(actor.get_status.remote())
        return s if s.health == "down" else None

    status = wait_for(down, timeout=15, interval=0.05)
    assert status.last_error
    failed = call(actor, "dyn", "whoami", {})
    assert not failed.ok and failed.error_kind == "backend_unavailable"
    wait_for(lambda: ray.get(actor.get_status.remote()).health == "healthy", timeout=20)
    second_pid = call(actor, "dyn", "whoami", {}).text
    assert second_pid != first_pid


KB_TOKEN = "kb-token-for-the-test"


@pytest.fixture
def http_kb(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcp_router.servers.knowledge_base", "--docs",
                             str(EXAMPLES / "docs"), "--store", str(tmp_path / "rag"), "--http", str(port)],
                            env={**os.environ, "MCP_ROUTER_KB_TOKEN": KB_TOKEN})
    wait_listening(port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop_process(proc)


def test_http_backend_answers_over_streamable_http(http_kb: str, cleanup: list[Any]) -> None:
    settings = make_settings({"name": "kb", "kind": "mcp_http", "url": http_kb,
                              "headers": {"Authorization": f"Bearer {KB_TOKEN}"}})
    actor = actor_for(settings, "kb")
    cleanup.append(actor)
    status = ray.get(actor.get_status.remote())
    assert status.health == "healthy" and status.transport == "streamable-http" and status.tool_count == 1
    question = "What are the composite score weights?"
    outcome = call(actor, "kb", "rag_query_with_chunks", {"question": question})
    assert outcome.ok and outcome.structured is not None
    assert "0.5 * match + 0.3 * health + 0.2 * perf" in outcome.structured["data"]["answer"]
    assert outcome.structured["chunks"][0]["source"] == "routing.md"


def test_http_backend_refusing_connections_is_down_with_its_error(cleanup: list[Any]) -> None:
    settings = make_settings({"name": "gone", "kind": "mcp_http", "url": f"http://127.0.0.1:{free_port()}/mcp",
                              "connect_timeout_s": 5})
    actor = actor_for(settings, "gone")
    cleanup.append(actor)
    status = ray.get(actor.get_status.remote())
    assert status.health == "down"
    assert status.last_error and "gone" in status.last_error


def test_an_ejected_backend_refuses_calls_until_a_forced_call_succeeds(cleanup: list[Any]) -> None:
    settings = make_settings(stdio("flaky", EXAMPLES / "servers" / "faulty.py", "--fail-rate", "1"))
    actor = actor_for(settings, "flaky")
    cleanup.append(actor)
    for _ in range(settings.resilience.ejection.consecutive_failures):
        assert not call(actor, "flaky", "answer", {"query": "q"}).ok
    assert ray.get(actor.get_status.remote()).health == "ejected"
    refused = call(actor, "flaky", "configure", {"fail_rate": 0.0})
    assert not refused.ok and "ejected" in (refused.error or "")
    cap = Capability(backend="flaky", name="configure")
    # Every candidate ejected: the router forces the least bad one; its success ends the ejection.
    forced = ray.get(actor.call.remote(cap, {"fail_rate": 0.0}, 10.0, CTX, True))
    assert forced.ok, forced.error
    assert ray.get(actor.get_status.remote()).health == "healthy"
    assert call(actor, "flaky", "answer", {"query": "q"}).text == "42"


def test_a_client_leaving_the_servers_request_unanswered_does_not_count_against_the_backend(
        cleanup: list[Any]) -> None:
    # A gateway client that never answers the server's elicitation runs its relayed request out of time; with
    # the backend's own timeout no longer than the caller's deadline, that once ejected the backend for all.
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "conformance" / "everything_server.py"),
                             "--port", str(port)])
    try:
        wait_listening(port)
        settings = make_settings({"name": "asks", "kind": "mcp_http", "url": f"http://127.0.0.1:{port}/mcp",
                                  "protocol": "legacy", "timeout_s": 1})
        actor = actor_for(settings, "asks")
        cleanup.append(actor)
        for _ in range(settings.resilience.ejection.consecutive_failures + 1):
            events = list(ray.get(list(actor.relay.options(num_returns="streaming").remote(
                "tools/call", {"name": "test_elicitation", "arguments": {"message": "who?"}}, 1.0))))
            assert events[1]["event"] == "request" and events[1]["method"] == "elicitation/create"
            assert events[-1]["data"]["kind"] == "deadline_exceeded", events[-1]
            assert "did not answer the server's elicitation/create" in events[-1]["message"]
        assert ray.get(actor.get_status.remote()).health == "healthy"
        assert call(actor, "asks", "test_simple_text", {}).ok
    finally:
        stop_process(proc)


def test_a_prompt_given_values_it_cannot_use_is_the_callers_error_not_the_backends(cleanup: list[Any]) -> None:
    settings = make_settings(stdio("prompts", TEST_SERVERS / "dynamic.py", "--prompt"))
    actor = actor_for(settings, "prompts")
    cleanup.append(actor)
    countdown = Capability(backend="prompts", name="countdown", kind="prompt")
    for _ in range(settings.resilience.ejection.consecutive_failures + 1):
        refused = ray.get(actor.call.remote(countdown, {"start": "many"}, 10.0, CTX))
        assert not refused.ok and refused.error_kind == "backend_rejected_arguments", refused
    assert ray.get(actor.get_status.remote()).health == "healthy"
    assert ray.get(actor.call.remote(countdown, {"start": 2}, 10.0, CTX)).text.endswith("2, 1, 0")


def test_an_answer_over_the_limit_is_refused_and_does_not_count_against_the_backend(cleanup: list[Any]) -> None:
    settings = RouterSettings.model_validate({"backends": [stdio("big", TEST_SERVERS / "dynamic.py")],
                                              "security": {"max_answer_bytes": 1024}})
    spec = settings.backend("big")
    assert spec is not None
    actor = create_backend_actor(spec, settings.resilience, settings.security)
    ray.get(actor.start.remote(20.0))
    cleanup.append(actor)
    for _ in range(settings.resilience.ejection.consecutive_failures + 1):
        refused = call(actor, "big", "shout", {"text": "a" * 2000})
        assert not refused.ok and refused.error_kind == "answer_too_large", refused
        assert "security.max_answer_bytes (1024)" in (refused.error or "")
    # The same through the gateway's relay.
    relayed = list(ray.get(list(actor.relay.options(num_returns="streaming").remote(
        "tools/call", {"name": "shout", "arguments": {"text": "a" * 2000}}, 10.0))))
    assert relayed[-1]["event"] == "error" and relayed[-1]["data"]["kind"] == "answer_too_large"
    assert ray.get(actor.get_status.remote()).health == "healthy"
    assert call(actor, "big", "shout", {"text": "a" * 100}).text == "A" * 100


def test_an_http_server_that_restarted_and_forgot_the_session_is_reconnected_to_at_once(cleanup: list[Any]) -> None:
    # A 2025 server answers a session it no longer knows with a 404: the session is over, as after a lost
    # connection, not a failing server to count calls against until a health check notices.
    port = free_port()
    server = [sys.executable, str(Path(__file__).parents[1] / "conformance" / "everything_server.py"), "--port",
              str(port)]
    proc = subprocess.Popen(server)
    try:
        wait_listening(port)
        settings = make_settings({"name": "web", "kind": "mcp_http", "url": f"http://127.0.0.1:{port}/mcp",
                                  "protocol": "legacy"})
        actor = actor_for(settings, "web")
        cleanup.append(actor)
        assert call(actor, "web", "test_simple_text", {}).ok
        stop_process(proc)
        proc = subprocess.Popen(server)  # a redeploy: the same address, none of the old sessions
        wait_listening(port)
        lost = call(actor, "web", "test_simple_text", {})
        assert lost.error_kind == "backend_unavailable" and "no longer knows the session" in (lost.error or ""), \
            lost.error
        # Reconnected well before the next health check (15 s): calls answer again.
        wait_for(lambda: call(actor, "web", "test_simple_text", {}).ok, timeout=8)
    finally:
        stop_process(proc)
