"""Chaos under load: backend processes, backend actors and router replicas killed while 32 clients ask.

    python benchmarks/chaos.py [--duration S] [--concurrency 32] [--json OUT]

The router runs as `mcp-router serve` would (local Ray, the default ingress), with three equivalent
stdio backends (`examples/servers/faulty.py`, 5 ms a call). Four phases, each `--duration` seconds
of closed-loop load on POST /v1/query (every request with a 10 s deadline and client timeout):

1. backend processes: one stdio server killed (SIGKILL) every 10 s;
2. backend actors: one backend actor's process killed every 12 s (Ray restarts it);
3. one router replica, killed once: `replica_recovery_s` is the time from the kill to the next
   request answered on the configured port;
4. two router replicas, one killed once: `replica_kill_success` is the share answered.

A request counts as answered when it returns 200 with the right answer. The JSON has
`backend_kill_success`, `actor_kill_success`, `replica_kill_success`, `replica_recovery_s`, and per
phase the request count, the success share, p50/p99 and the slowest request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp_router.cli.local import free_port, processes_mentioning, start_local, stop_local, wait_until_healthy  # noqa: E402
from router.settings import RouterSettings  # noqa: E402

SERVER = str(ROOT / "examples" / "servers" / "faulty.py")
BODY = {"question": "Answer a general knowledge question: what is the capital of Peru?", "deadline_s": 10,
        "include_routing_metadata": False}


def settings(port: int, replicas: int, marker: str) -> RouterSettings:
    backends = [{"name": n, "kind": "mcp_stdio", "command": sys.executable, "health_interval_s": 1,
                 "args": [SERVER, "--name", n, "--latency-ms", "5", "--answer", "Lima", "--seed", marker]}
                for n in ("a", "b", "c")]
    # Recovery, not relevance, is measured: every candidate counts (see benchmarks/resilience.py).
    return RouterSettings.model_validate({"backends": backends, "state_dir": str(ROOT / ".state"),
                                          "routing": {"min_confidence": 0.0},
                                          "server": {"port": port, "replicas": replicas}})


async def load(url: str, concurrency: int, seconds: float, samples: list[tuple[float, float, bool]]) -> None:
    stop = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=10.0, limits=httpx.Limits(max_connections=concurrency)) as client:
        async def worker() -> None:
            while time.monotonic() < stop:
                started = time.monotonic()
                try:
                    r = await client.post(f"{url}/v1/query", json=BODY)
                    ok = r.status_code == 200 and r.json()["answer"] == "Lima"
                except (httpx.HTTPError, ValueError, KeyError):
                    ok = False
                samples.append((started, time.monotonic() - started, ok))
        await asyncio.gather(*(worker() for _ in range(concurrency)))


async def killer(needle: str, every_s: float, seconds: float, kills: list[float]) -> None:
    """Kill one process matching `needle` every `every_s` seconds, the first a third of the way in
    (or after half a period, when that is sooner)."""
    stop = time.monotonic() + seconds
    await asyncio.sleep(min(every_s / 2, seconds / 3))
    while time.monotonic() < stop - 1:
        pids = sorted(processes_mentioning(needle))
        if pids:
            os.kill(random.choice(pids), signal.SIGKILL)
            kills.append(time.monotonic())
        await asyncio.sleep(max(0.0, min(every_s, stop - time.monotonic())))


def summary(samples: list[tuple[float, float, bool]]) -> dict[str, Any]:
    latencies = sorted(s[1] * 1000 for s in samples)
    ok = sum(s[2] for s in samples)
    return {"requests": len(samples), "success": round(ok / max(len(samples), 1), 4),
            "p50_ms": round(statistics.median(latencies), 1) if latencies else 0.0,
            "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else 0.0,
            "max_ms": round(latencies[-1], 1) if latencies else 0.0}


async def phase(url: str, args: argparse.Namespace, needle: str | None, every_s: float) -> dict[str, Any]:
    samples: list[tuple[float, float, bool]] = []
    kills: list[float] = []
    jobs = [load(url, args.concurrency, args.duration, samples)]
    if needle is not None:
        jobs.append(killer(needle, every_s, args.duration, kills))
    await asyncio.gather(*jobs)
    result = summary(samples)
    result["kills"] = len(kills)
    if kills:
        first = kills[0]
        after = sorted(s[0] + s[1] for s in samples if s[2] and s[0] >= first)
        result["recovery_s"] = round(after[0] - first, 2) if after else None
    return result


def run_with(replicas: int, args: argparse.Namespace, steps: list[tuple[str, str | None, float]]
             ) -> dict[str, Any]:
    marker = str(random.randrange(10**9))
    config = settings(free_port(), replicas, marker)
    url = start_local(config, num_cpus=args.num_cpus).url
    results = {}
    try:
        wait_until_healthy(url, 60)
        asyncio.run(phase(url, argparse.Namespace(**{**vars(args), "duration": 3}), None, 0))  # warm up
        for name, needle, every_s in steps:
            results[name] = asyncio.run(phase(url, args, needle, every_s))
            wait_until_healthy(url, 60)
    finally:
        stop_local(config)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load per phase (default 60)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    replica = "ServeReplica:mcp-router:RouterIngress"
    one = run_with(1, args, [("backend_process", SERVER, 10.0), ("backend_actor", "ray::BackendSupervisor", 12.0),
                             ("replica_one", replica, 10**6)])
    two = run_with(2, args, [("replica_two", replica, 10**6)])
    phases = {**one, **two}
    report = {"backend_kill_success": phases["backend_process"]["success"],
              "actor_kill_success": phases["backend_actor"]["success"],
              "replica_kill_success": phases["replica_two"]["success"],
              "replica_recovery_s": phases["replica_one"].get("recovery_s"), "phases": phases,
              "duration_s": args.duration, "concurrency": args.concurrency}
    print(f"{'phase':<18}{'requests':>10}{'success':>10}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'kills':>7}"
          f"{'recovery s':>12}")
    for name, r in phases.items():
        print(f"{name:<18}{r['requests']:>10}{r['success']:>10.2%}{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}"
              f"{r['max_ms']:>9.1f}{r['kills']:>7}{r.get('recovery_s') or '-':>12}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
