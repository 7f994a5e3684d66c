"""Fixtures shared by the integration and end-to-end suites: one local Ray for the whole session."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TEST_SERVERS = Path(__file__).resolve().parent / "servers"


def fresh_state() -> str:
    """A state folder of one app's own (learned examples, pins, the knowledge base's store: nothing another
    test or a benchmark left there), sharing the examples' embedding cache so each text is embedded once."""
    shared = EXAMPLES / ".state" / "embeddings"
    shared.mkdir(parents=True, exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="mcp-router-state-"))
    (state / "embeddings").symlink_to(shared, target_is_directory=True)
    atexit.register(shutil.rmtree, state, ignore_errors=True)
    return str(state)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll until `predicate()` is truthy; returns its value or fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout} s (last value: {last!r})")


@pytest.fixture(scope="session")
def ray_local() -> Iterator[dict[str, Any]]:
    """A local Ray with 2 CPUs; the router's default ingress on a free port."""
    import ray

    from mcp_router.cli.local import free_port, ingress_environment, serve_ports, shutdown_ray
    from router.settings import RouterSettings

    port = free_port()
    settings = RouterSettings.model_validate({"server": {"port": port}})
    env = ingress_environment(settings, "127.0.0.1", port)
    os.environ.update(env)
    # The replicas export their spans to their output (Ray's worker logs), where tests can read them.
    os.environ.setdefault("OTEL_TRACES_EXPORTER", "console")
    http_port, proxy_port = serve_ports(settings, env, port)
    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_ADDRESS", None)  # never join a cluster an earlier test left behind
    ray.init(address="local", num_cpus=2, include_dashboard=False, namespace="mcp-router-test",
             log_to_driver=False, logging_level="WARNING")
    from ray import serve
    from ray.serve.config import HTTPOptions

    serve.start(http_options=HTTPOptions(host="127.0.0.1", port=http_port))
    yield {"port": port, "url": f"http://127.0.0.1:{port}", "proxy_url": f"http://127.0.0.1:{proxy_port}"}
    shutdown_ray()


def wait_listening(port: int, timeout: float = 20.0) -> None:
    """Wait until something accepts connections on 127.0.0.1:`port` (a server subprocess started)."""
    import socket

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, timeout=timeout)


def stdio(name: str, script: Path, *args: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "mcp_stdio", "command": sys.executable, "args": [str(script), *args], **extra}


@contextlib.contextmanager
def running_app(settings: Any, url: str, healthy: bool = True) -> Iterator[str]:
    """The router application under Serve on the session's Ray; removed (its backends with it), port freed."""
    from ray import serve

    from deployments.app import build_application
    from mcp_router.cli.local import wait_until_serving

    serve.run(build_application(settings), name=settings.server.app_name, route_prefix="/", blocking=False)
    try:
        wait_until_serving(url, 120)
        if healthy:
            import httpx

            wait_for(lambda: httpx.get(f"{url}/health").json()["status"] == "ok", timeout=30)
        yield url
    finally:
        serve.delete(settings.server.app_name)


def stop_process(proc: Any) -> None:
    """Terminate a server subprocess, killing it if it does not exit within 5 s."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
