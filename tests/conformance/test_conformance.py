"""The official MCP conformance suite (@modelcontextprotocol/conformance, installed with its Node by
`make setup` from tests/conformance/package.json) against the router, on both sides:

- its server scenarios through the gateway (/mcp/backends/everything/) with the suite's everything server
  behind the router give the same results as against that server directly: all pass;
- the router's own /mcp/ passes every scenario that applies to it (expected-failures.yml lists the
  others, each with its reason);
- the router as a client (the backend code its actors run) passes the client scenarios that apply.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_router.cli.local import free_port
from router.settings import RouterSettings
from tests.conftest import fresh_state, running_app, stop_process, wait_listening

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
_RESULT = re.compile(r"^[✓✗] ([\w-]+): (\d+) passed, (\d+) failed", re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def conformance(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    if not (BIN / "conformance").exists():
        pytest.fail("the conformance suite is not installed: run `make setup` (npm ci in tests/conformance)")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # its own Node 22
    done = subprocess.run([str(BIN / "conformance"), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=HERE)
    done.stdout = _ANSI.sub("", done.stdout + done.stderr)  # the client runs report on stderr
    return done


def results(run: subprocess.CompletedProcess[str]) -> dict[str, tuple[int, int]]:
    """Scenario -> (checks passed, checks failed)."""
    found = {m[1]: (int(m[2]), int(m[3])) for m in _RESULT.finditer(run.stdout)}
    assert found, run.stdout[-3000:]
    return found


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "everything_server.py"), "--port", str(port)])
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def router(ray_local: dict[str, Any], everything: str) -> Iterator[str]:
    settings = RouterSettings.model_validate({
        # The suite's server asks its client for sampling and elicitation in the middle of a call, as
        # 2025 servers do: the router speaks the 2025 protocol to it.
        "backends": [{"name": "everything", "kind": "mcp_http", "url": everything, "protocol": "legacy"}],
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"]},
        "state_dir": fresh_state(),
    })
    with running_app(settings, ray_local["url"]) as url:
        yield url


def test_the_server_scenarios_pass_through_the_gateway_as_they_do_directly(everything: str, router: str) -> None:
    direct = results(conformance("server", "--url", everything, "--suite", "all"))
    through = conformance("server", "--url", f"{router}/mcp/backends/everything/", "--suite", "all")
    assert results(through) == direct, through.stdout[-4000:]
    assert all(failed == 0 for _, failed in direct.values()) and len(direct) >= 30, direct
    assert through.returncode == 0, through.stdout[-4000:]


def test_the_routers_own_endpoint_passes_every_scenario_that_applies(router: str) -> None:
    run = conformance("server", "--url", f"{router}/mcp/", "--expected-failures", "expected-failures.yml")
    assert run.returncode == 0, run.stdout[-4000:]
    passed = {name for name, (ok, failed) in results(run).items() if ok and not failed}
    assert {"server-initialize", "ping", "tools-list", "logging-set-level", "completion-complete",
            "dns-rebinding-protection"} <= passed


@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_the_router_as_a_client_passes_the_client_scenarios(scenario: str) -> None:
    run = conformance("client", "--command", f"{sys.executable} {HERE / 'router_client.py'}", "--scenario", scenario,
                      timeout=120)
    assert run.returncode == 0 and re.search(r"Passed: (\d+)/\1, 0 failed", run.stdout), run.stdout[-3000:]
