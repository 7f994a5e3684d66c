"""Scale: how the router's cost grows with its backends and their tools.

    python benchmarks/scale.py [--backends 100,300,1000] [--tools-per-backend 20] [--per-host 100]
                               [--seconds 8] [--two-node N] [--json OUT]

For each N, one cheap MCP server process serves N endpoints of T tools (`benchmarks/scale_server.py`),
and the router (a local Ray with 2 CPUs, the default ingress) runs N streamable-HTTP backends on them, in
the 2025 protocol (sessions, so each hears its server's list changes), packed `--per-host` to a host actor.
Measured for each N:

- `start_s`: from deploying the application until every backend's tools are in the routing index, the first
  time (every description embedded); `start_warm_s` the same for a redeploy (their embeddings on disk);
- `rss_mb`: resident memory of the router's processes together (this driver, Ray's own and every actor
  and replica), from /proc, the scale server excluded;
- `decision_p50_ms` (`/v1/route`'s own decision time) and `query_p50_ms` (`/v1/query` end to end), one
  new question at a time, each naming a random backend's tool in words; `routed_right` how often the
  router chose that backend;
- `rps_repeated` and `rps_new`: `/v1/query` at concurrency 32 (wrk when installed);
- `refresh_s`: after 10 % of the backends announce `tools/list_changed` at once, until the index serves
  all their new catalogs (a changed description on its previous vector until embedded), and
  `refresh_embedded_s` until every new description is embedded too, with `storm_failed` requests failing
  meanwhile (a query load runs throughout). The
  backends trust their changes (`trust_changes: true`): by default a changed tool is held out of routing
  until approved, and a question meant for it is refused (503 `backend_not_callable`) meanwhile.

`--two-node N` also runs N backends on a two-node local Ray cluster (`ray start` twice on this machine, one
CPU each) and reports how the host actors were placed across the nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.overhead import pct, throughput  # noqa: E402
from benchmarks.scale_server import TOPICS, VERBS, topic  # noqa: E402


def question(rng: random.Random, n: int, tools: int) -> tuple[str, str]:
    """A question naming one tool of a random backend, in words; and that backend."""
    i, j = rng.randrange(n), rng.randrange(tools)
    verb = VERBS[j % len(VERBS)]
    return f"{verb} the {topic(i)} records, variant {j}", f"s{i}"


def rss_mb(exclude: set[int]) -> float:
    """Resident memory of this process and of Ray's (raylet, GCS, workers and actors), from /proc."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            if int(entry) != os.getpid() and b"ray" not in cmd and b"haproxy" not in cmd:
                continue
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total / 1024


def index_state(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/v1/stats", timeout=30).json().get("index") or {}


def wait_indexed(url: str, n: int, tools: int, timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        with_ok = index_state(url)
        if with_ok.get("capabilities", 0) >= n * tools:
            return time.monotonic() - started
        time.sleep(0.5)
    raise TimeoutError(f"not every backend indexed within {timeout_s:.0f} s: {index_state(url)}")


def timed(url: str, path: str, bodies: list[dict[str, Any]]) -> tuple[list[float], list[dict[str, Any]]]:
    out, answers = [], []
    with httpx.Client(timeout=60) as c:
        for body in bodies:
            t0 = time.perf_counter()
            r = c.post(url + path, json=body)
            out.append((time.perf_counter() - t0) * 1000)
            answers.append(r.json() if r.headers.get("content-type", "").startswith("application/json") else {})
    return out, answers


def storm(url: str, server: str, n: int, tools: int, rng: random.Random) -> dict[str, Any]:
    """10 % of the backends change their tools at once; until the index has all their new catalogs."""
    before = index_state(url).get("versions", {})
    failed, sent = [0], [0]
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(timeout=60) as c:
            while not stop.is_set():
                q, _ = question(rng, n, tools)
                try:
                    status = c.post(f"{url}/v1/query", json={"question": q}).status_code
                except httpx.HTTPError:
                    status = 599
                sent[0] += 1
                failed[0] += status >= 500

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    t0 = time.monotonic()
    announced = httpx.post(f"{server}/admin/change", json={"fraction": 0.1}, timeout=60).json()
    changed = [f"s{i}" for i in announced["changed"]]
    settled = embedded = None
    while time.monotonic() - t0 < 120 and embedded is None:
        state = index_state(url)
        now = state.get("versions", {})
        if all(now.get(b) and now.get(b) != before.get(b) for b in changed):
            settled = settled or time.monotonic() - t0
            if not state.get("provisional_vectors"):
                embedded = time.monotonic() - t0
        time.sleep(0.2)
    if settled is None or embedded is None:
        raise TimeoutError("the refresh storm did not settle within 120 s")
    time.sleep(1.0)
    stop.set()
    worker.join()
    return {"refresh_s": round(settled, 2), "refresh_embedded_s": round(embedded, 2),
            "changed_backends": len(changed), "storm_requests": sent[0],
            "storm_failed": failed[0]}


def run(n: int, tools: int, per_host: int, seconds: float, requests: int, address: str | None = None) -> dict[str, Any]:
    from ray import serve

    from actors.host import freeze_startup_heap
    from deployments.app import build_application
    from mcp_router.cli.local import free_port, start_local, stop_local, wait_until_serving
    from router.settings import RouterSettings

    rng = random.Random(n)
    sport = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "scale_server.py"), "--port", str(sport),
                               "--endpoints", str(n), "--tools", str(tools)])
    state = tempfile.mkdtemp(prefix="scale-")
    try:
        time.sleep(2.0)
        port = free_port()
        settings = RouterSettings.model_validate({
            "backends": [{"name": f"s{i}", "kind": "mcp_http", "url": f"http://127.0.0.1:{sport}/s{i}/mcp",
                          "protocol": "legacy", "description": f"{TOPICS[i % len(TOPICS)]} service {i}",
                          "health_interval_s": 15, "trust_changes": True} for i in range(n)],
            "server": {"port": port, "hosting": {"backends_per_host": per_host}}, "state_dir": state})
        if address:
            os.environ["RAY_ADDRESS"] = address
        t0 = time.monotonic()
        endpoints = start_local(settings, num_cpus=None if address else 2, wait_s=600)
        url = endpoints.url
        start_s = time.monotonic() - t0 + wait_indexed(url, n, tools, 600)
        # Again with the embeddings of the catalog on disk, as after a restart or a redeploy.
        serve.delete(settings.server.app_name)
        t0 = time.monotonic()
        serve.run(build_application(settings), name=settings.server.app_name, route_prefix="/", blocking=False)
        wait_until_serving(url, 600)
        warm_s = time.monotonic() - t0 + wait_indexed(url, n, tools, 600)
        memory = rss_mb({server.pid})
        freeze_startup_heap()  # this process's own collections (of Ray, the router) stay out of the timings
        asked = [question(rng, n, tools) for _ in range(requests)]
        route_ms, routes = timed(url, "/v1/route", [{"question": q} for q, _ in asked])
        decisions = [r.get("decision_ms", 0.0) for r in routes]
        right = sum(bool(r.get("candidates")) and r["candidates"][0]["backend"] == b
                    for r, (_, b) in zip(routes, asked, strict=True))
        fresh = [question(rng, n, tools)[0] + f" (take {k})" for k in range(requests)]
        query_ms, _ = timed(url, "/v1/query", [{"question": q} for q in fresh])
        repeated = json.dumps({"question": asked[0][0], "include_routing_metadata": False})
        rps_repeated = throughput(url, 32, seconds, body=repeated)
        rps_new = throughput(url, 32, seconds, new_questions=True,
                             ask=lambda k: question(random.Random(k), n, tools)[0] + f" (ask {k})")
        placed = Counter(b.get("node_id") for b in httpx.get(f"{url}/v1/backends", timeout=60).json())
        storm_report = storm(url, f"http://127.0.0.1:{sport}", n, tools, rng)
        serve.delete(settings.server.app_name)
        stop_local(settings)
    finally:
        server.terminate()
        server.wait(10)
        os.environ.pop("RAY_ADDRESS", None)
    return {"backends": n, "tools": n * tools, "per_host": per_host, "start_s": round(start_s, 1),
            "start_warm_s": round(warm_s, 1), "rss_mb": round(memory),
            "decision_p50_ms": round(statistics.median(decisions), 2),
            "decision_p99_ms": round(pct(decisions, 99), 2), "route_http_p50_ms": round(statistics.median(route_ms), 2),
            "query_p50_ms": round(statistics.median(query_ms), 2), "query_p99_ms": round(pct(query_ms, 99), 2),
            "routed_right": round(right / len(asked), 3), "rps_repeated": round(rps_repeated, 1),
            "rps_new": round(rps_new, 1), "backends_per_node": {str(k)[:12]: v for k, v in placed.items()},
            **storm_report}


def two_node_cluster() -> tuple[str, list[str]]:
    """A head and a worker node on this machine, one CPU each; returns the address and the stop command."""
    ray = str(Path(sys.executable).parent / "ray")
    from mcp_router.cli.local import free_port

    port = free_port()
    # Ray 2.60's `ray start --head` turns token auth on, a joining `ray start` assumes it off: a cluster of
    # this machine's loopback runs without it, the driver included.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    subprocess.run([ray, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                    "--disable-usage-stats"], check=True, capture_output=True)
    address = f"127.0.0.1:{port}"
    subprocess.run([ray, "start", f"--address={address}", "--num-cpus=1"], check=True, capture_output=True)
    # `ray start` may return before the node has registered: the pool would then see one node.
    count = f"import ray; ray.init(address={address!r}); print(sum(n['Alive'] for n in ray.nodes()))"
    deadline = time.monotonic() + 60
    while subprocess.run([sys.executable, "-c", count], capture_output=True, text=True).stdout.split()[-1:] != ["2"]:
        if time.monotonic() > deadline:
            raise TimeoutError("the second node did not join within 60 s")
        time.sleep(1)
    return address, [ray, "stop", "--force"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="100,300,1000", help="comma-separated backend counts")
    parser.add_argument("--tools-per-backend", type=int, default=20)
    parser.add_argument("--per-host", type=int, default=100, help="backends per host actor")
    parser.add_argument("--seconds", type=float, default=8, help="each throughput run")
    parser.add_argument("--requests", type=int, default=200, help="sequential questions per latency figure")
    parser.add_argument("--two-node", type=int, default=0, help="also run this many backends on two nodes")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    rows = [run(int(n), args.tools_per_backend, args.per_host, args.seconds, args.requests)
            for n in args.backends.split(",")]
    if args.two_node:
        address, stop = two_node_cluster()
        try:
            two = run(args.two_node, args.tools_per_backend, args.per_host, args.seconds, args.requests, address)
            rows.append({**two, "nodes": 2})
        finally:
            subprocess.run(stop, capture_output=True)
    keys = ("backends", "tools", "start_s", "start_warm_s", "rss_mb", "decision_p50_ms", "query_p50_ms", "routed_right",
            "rps_repeated", "rps_new", "refresh_s", "refresh_embedded_s", "storm_failed")
    width = max(map(len, keys)) + 1
    print("".join(f"{k:>{width}}" for k in keys))
    for row in rows:
        print("".join(f"{row.get(k, ''):>{width}}" for k in keys) + ("  (two nodes: " + json.dumps(
            row["backends_per_node"]) + ")" if row.get("nodes") else ""))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
