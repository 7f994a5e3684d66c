"""Running the router on a local Ray: the embedded default for a laptop.

By default Ray Serve's HAProxy ingress listens on the configured host and port and forwards to the
ingress replicas' own HTTP servers (direct ingress behind it): close to direct ingress in latency,
and the address keeps working when a replica dies and is replaced, or with several replicas
(docs/operations.md, "Ingress modes"). Ray's internal ports are protected by its token
authentication, which Ray 2.60 turns on by default and sets up by itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from router.settings import RouterSettings


@dataclass(frozen=True, slots=True)
class LocalEndpoints:
    url: str
    proxy_url: str


# Ports picked before Ray starts come from below the kernel's ephemeral range (32768 and up on Linux),
# where the ports Ray's own processes bind at random cannot take them in the meantime; Ray's worker
# ports stop at 19999.
_PICK_FROM, _PICK_TO = 20000, 32767
_given: set[int] = set()  # never the same port twice from one process (it is free only until used)


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, outside the ranges Ray binds at random."""
    for port in random.sample(range(_PICK_FROM, _PICK_TO), 200):
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            _given.add(port)
            return port
    raise OSError(f"no free port between {_PICK_FROM} and {_PICK_TO} on {host}")


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port (another router, another program). As a server binds
    it (address reuse on), so a port a stopped router left in TIME_WAIT counts as free."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def ingress_environment(settings: RouterSettings, host: str, port: int) -> dict[str, str]:
    """Environment Ray must see before it starts (its processes read these at import)."""
    env = {"RAY_SERVE_DEFAULT_HTTP_HOST": host, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           # The router's code is all async: running it on the replica's own event loop (and the handle
           # router on the same loop) saves the cross-thread hops, about 1 ms a request here.
           "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0"}
    if settings.server.ingress == "haproxy":
        # HAProxy listens on host:port and forwards to the replicas' own servers on ports Serve picks;
        # when a replica is replaced, HAProxy reloads (keeping its socket) and the address keeps working.
        # Private (0700): the admin socket lives here. Short: Ray adds the node id, and a socket path must
        # stay under 98 bytes.
        state = tempfile.mkdtemp(prefix="mrh-", dir="/tmp")
        env.update({
            "RAY_SERVE_ENABLE_HA_PROXY": "1", "RAY_SERVE_HAPROXY_NBTHREAD": "1",
            "RAY_SERVE_HAPROXY_METRICS_ENABLED": "0",
            "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": str(free_port(host)),
            "RAY_SERVE_HAPROXY_STATS_PORT": str(free_port(host)),
            "RAY_SERVE_HAPROXY_METRICS_PORT": str(free_port(host)),
            "RAY_SERVE_HAPROXY_SOCKET_PATH": f"{state}/admin.sock",
            "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": f"{state}/haproxy.cfg",
            "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": state,
            "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": f"{state}/server-state",
            "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": f"{state}/metrics.sock",
            "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2",
        })
    elif settings.server.ingress == "direct":
        env.update({
            "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
            "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
            "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + settings.server.replicas + 1),
            # A local replica being replaced frees its port after this long (Ray's default is 30 s), and
            # its successor takes the same port at once (Ray would quarantine it for 150 s and move on).
            "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2",
            "RAY_SERVE_PORT_QUARANTINE_S": "0",
        })
    return env


def serve_ports(settings: RouterSettings, env: dict[str, str], port: int) -> tuple[int, int]:
    """(Serve's `http_options` port, the Serve proxy's port) for an ingress mode: HAProxy binds
    `http_options` and its fallback proxy has a port of its own; direct ingress leaves the configured
    port to the replicas and puts the proxy elsewhere; the proxy mode is the proxy on the port."""
    if settings.server.ingress == "haproxy":
        return port, int(env["RAY_SERVE_FALLBACK_PROXY_HTTP_PORT"])
    if settings.server.ingress == "direct":
        other = free_port(settings.server.host)
        return other, other
    return port, port


def start_local(settings: RouterSettings, *, num_cpus: int | None = None, wait_s: float = 180.0,
                quiet: bool = True) -> LocalEndpoints:
    """Start Ray and the Serve app in this process; returns once the router answers HTTP."""
    import ray
    from ray import serve
    from ray.serve.config import HTTPOptions
    from ray.serve.schema import LoggingConfig

    from deployments.app import build_application

    host, port = settings.server.host, settings.server.port
    env = ingress_environment(settings, host, port)
    os.environ.update(env)
    http_port, proxy_port = serve_ports(settings, env, port)
    if not ray.is_initialized():
        ray.init(num_cpus=num_cpus, include_dashboard=False, namespace=settings.server.namespace,
                 log_to_driver=not quiet, configure_logging=True,
                 logging_level=logging.WARNING if quiet else logging.INFO)
        if threading.current_thread() is threading.main_thread():
            # Ray's own SIGTERM handler would kill its processes at once; as Ctrl-C instead, the caller's
            # clean-up (stop_local) deletes the application gracefully first.
            signal.signal(signal.SIGTERM, signal.default_int_handler)
    serve.start(http_options=HTTPOptions(host=host, port=http_port),
                logging_config=LoggingConfig(log_level="WARNING" if quiet else "INFO", enable_access_log=not quiet))
    serve.run(build_application(settings), name=settings.server.app_name, route_prefix="/", blocking=False)
    url = f"http://{host}:{port}"
    wait_until_serving(url, wait_s)
    return LocalEndpoints(url=url, proxy_url=f"http://{host}:{proxy_port}")


def wait_until_serving(url: str, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{url}/health", timeout=5)
            # The router's own report (HAProxy or Serve's proxy answer first with errors of their own).
            if r.status_code in (200, 503) and r.json().get("status") in ("ok", "degraded", "down"):
                return
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            last = exc
        time.sleep(0.25)
    raise TimeoutError(f"the router did not answer on {url} within {wait_s:.0f} s ({last})")


def wait_until_healthy(url: str, wait_s: float) -> dict:
    """Poll /health until every backend is up or the time runs out; returns the last report."""
    deadline = time.monotonic() + wait_s
    report: dict = {}
    while time.monotonic() < deadline:
        try:
            report = httpx.get(f"{url}/health", timeout=5).json()
            if report.get("status") == "ok":
                break
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    return report


def stop_local(settings: RouterSettings) -> None:
    import ray
    from ray import serve

    if not ray.is_initialized():
        return
    try:
        # A graceful stop: the backend pool shuts its backends down (MCP sessions closed, stdio and
        # launched servers ended) before its replica goes.
        within(_GRACE_S, lambda: serve.delete(settings.server.app_name))
    finally:
        shutdown_ray()


# A stop signal sent to the whole process group (systemd's default, `kill -- -PGID`) reaches Ray's own processes
# too, which then end: Serve's clean-up would wait on them until Ray ends this process a minute later, before
# the ingress is stopped. So it is waited for only while Ray's control store answers, and at most this long.
_GRACE_S = 120.0


def within(seconds: float, step: Callable[[], object]) -> None:
    """Run `step` (on a daemon thread, which a process exit does not wait for) until it finishes, Ray stops
    answering, or `seconds` pass. Its error, if it raised one, is raised here."""
    done, failed = threading.Event(), []

    def run() -> None:
        try:
            step()
        except BaseException as exc:  # handed to the caller below
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="mcp-router-stop", daemon=True).start()
    deadline = time.monotonic() + seconds
    while not done.wait(0.5) and time.monotonic() < deadline and ray_reachable():
        pass
    if failed:
        raise failed[0]


def ray_reachable(timeout_s: float = 1.0) -> bool:
    """Whether the local Ray's control store still takes connections."""
    import ray

    host, _, port = ray.get_runtime_context().gcs_address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def shutdown_ray() -> None:
    """Serve first (its proxies stop their HAProxy), then any HAProxy of ours that a hard stop left behind,
    then the local Ray, which belongs to this process, then once more any HAProxy of ours, and its state
    directory."""
    import ray
    from ray import serve

    state = os.path.dirname(os.environ.get("RAY_SERVE_HAPROXY_CONFIG_FILE_LOC", ""))
    ours = state.startswith("/tmp/mrh-")
    try:
        within(_GRACE_S, serve.shutdown)
    finally:
        try:
            if ours:
                end_processes_mentioning(state)
        finally:
            ray.shutdown()
            if ours:
                # Again once Ray is gone: a proxy still reloading HAProxy as Serve stopped could start one
                # after the first sweep, and nothing of Ray's is left to stop it.
                end_processes_mentioning(state, settle_s=2.0)
                shutil.rmtree(state, ignore_errors=True)  # one per start, else /tmp fills with them


def end_processes_mentioning(text: str, grace_s: float = 5.0, settle_s: float = 0.0) -> None:
    """SIGTERM every process whose command line mentions `text` (SIGKILL once `grace_s` passed) until none has
    been seen for `settle_s`, so that one starting meanwhile is ended too; for at most `grace_s` + 10 s."""
    started = last_seen = time.monotonic()
    while time.monotonic() - started < grace_s + 10:
        now = time.monotonic()
        pids = processes_mentioning(text)
        if pids:
            last_seen = now
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL if now - started >= grace_s else signal.SIGTERM)
        elif now - last_seen >= settle_s:
            return
        time.sleep(0.1)


def processes_mentioning(text: str) -> set[int]:
    """Live processes (other than this one) whose command line contains `text` (Linux /proc)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError):
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    pids.add(int(entry))
    return pids
