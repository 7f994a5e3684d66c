"""Resilience under backend faults: success rate, latency and cost of each execution mode.

    python benchmarks/resilience.py [--requests N] [--json OUT]

Three equivalent backends run `examples/servers/faulty.py` over stdio, with the same tool and
description and different names: `flaky` fails 30% of its calls, `slow` has a slow tail (median
20 ms, one call in ten takes ten times as long, so its p95 is ten times its median) and `healthy`
answers in 20 ms. All latencies have +-10% jitter. They are listed worst first, so routing starts
on a faulty backend and has only its own performance history to move away from it.

For each mode (fallback, parallel, hedged, consensus) N questions go one after the other through
the real path: POST /v1/query to the router running under Ray Serve on a local Ray, its backend
actors and their stdio servers. Each mode runs on a freshly started router, so it starts from an
empty history and fresh outlier detectors. Reported per mode: the share of requests answered,
end-to-end latency percentiles of all requests, backend calls per request (every attempt in the
routing metadata, cancelled ones included) and calls that reached a server (each server's own
counters). `fastest_backend_p50_ms` is the healthy backend's server called directly with the MCP
client, without the router.

Settings are the router's defaults; `ROUTER_*` environment variables change them as they do for
the router itself, e.g. ``ROUTER_RESILIENCE__HEDGE_MAX_DELAY_MS=50``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from router.settings import ResilienceSettings, RouterSettings  # noqa: E402
from router.settings.file import load_settings  # noqa: E402

MODES = ("fallback", "parallel", "hedged", "consensus")
SERVER = str(ROOT / "examples" / "servers" / "faulty.py")
ANSWER = "42"
# name -> faulty.py flags; listed worst first (see the module docstring).
BACKENDS: dict[str, list[str]] = {
    "flaky": ["--latency-ms", "20", "--fail-rate", "0.3", "--seed", "1"],
    "slow": ["--latency-ms", "20", "--tail-rate", "0.1", "--tail-multiplier", "10", "--seed", "2"],
    "healthy": ["--latency-ms", "20", "--seed", "3"],
}
FASTEST = "healthy"
# Phrased to share words with the tool's description: the index here is BM25 only, no embeddings.
QUESTIONS = [
    "What is the capital of Peru?", "Who wrote Hamlet?", "Science question: which planet is the largest?",
    "History: in what year did the Berlin Wall fall?", "Which art museum holds the Mona Lisa?",
    "What is the capital of Canada?", "Geography: which river is the longest in Africa?",
    "Which people first climbed Everest?", "Science: what is the chemical symbol for gold?",
    "Geography question: which ocean is the largest?", "Who wrote the novel Don Quixote?",
    "What are the dates of the French Revolution in history?",
    "In nature, which animal is the largest mammal?",
    "What is the capital of Japan?", "Who developed the theory of general relativity in science?",
    "Which places in Europe have the oldest universities, by dates of founding?",
]


def settings(port: int = 8000) -> RouterSettings:
    """Router defaults, `ROUTER_*` environment variables applied, and the three faulty backends."""
    backends = [{"name": name, "kind": "mcp_stdio", "command": sys.executable, "timeout_s": 10.0,
                 "args": [SERVER, "--name", name, *flags]} for name, flags in BACKENDS.items()]
    # Resilience, not relevance, is measured: the three servers' general-knowledge tool matches the
    # question with a weak embedding similarity, below the default confidence thresholds (of the backend,
    # and of which of its tools: the admin tools `stats` and `configure` score as low as `answer`).
    return load_settings(None, overrides={"backends": backends, "server": {"port": port},
                                          "routing": {"min_confidence": 0.0, "min_tool_confidence": 0.0},
                                          "state_dir": str(ROOT / ".state")})


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else 0.0


def server_calls(client: httpx.Client, url: str) -> int:
    """Calls the three servers have answered or failed so far, from their own counters (an ejected
    backend refuses even this call, so it is asked again once its ejection is over)."""
    total = 0
    for name in BACKENDS:
        deadline = time.monotonic() + 120
        while True:
            r = client.post(f"{url}/v1/query", json={"question": "stats", "backend": name, "tool": "stats",
                                                     "include_routing_metadata": False})
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(1)
        r.raise_for_status()
        counts = json.loads(r.json()["answer"])
        total += counts["calls"]
    return total


def run_mode(mode: str, n: int, num_cpus: int) -> dict[str, Any]:
    """N requests in one mode against a freshly started router (empty history, fresh detectors)."""
    from actors.host import freeze_startup_heap
    from mcp_router.cli.local import free_port, start_local, stop_local, wait_until_healthy

    config = settings(free_port())
    url = start_local(config, num_cpus=num_cpus).url
    try:
        wait_until_healthy(url, 60)
        latencies: list[float] = []
        succeeded = calls = 0
        served: Counter[str] = Counter()
        outcomes: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        examples: dict[str, str] = {}  # the first message of each kind of error
        with httpx.Client(timeout=60) as client:
            for i in range(3):  # first calls pay for imports and caches in the server processes
                client.post(f"{url}/v1/query", json={"question": QUESTIONS[i], "mode": "parallel"})
            sent_before = server_calls(client, url)
            freeze_startup_heap()  # this process's own collections (of Ray, the router) stay out of the timings
            for i in range(n):
                started = time.perf_counter()
                r = client.post(f"{url}/v1/query", json={"question": QUESTIONS[i % len(QUESTIONS)], "mode": mode})
                latencies.append((time.perf_counter() - started) * 1000)
                body = r.json()
                if r.is_success:
                    attempts = body["routing"]["attempts"]
                    if body["capability"] == "answer" and body["answer"] == ANSWER:
                        succeeded += 1
                        served[body["backend"]] += 1
                    else:
                        errors[f"wrong answer from {body['backend']}/{body['capability']}"] += 1
                else:
                    attempts = body["error"].get("details", {}).get("attempts", [])
                    errors[body["error"]["type"]] += 1
                    examples.setdefault(body["error"]["type"], body["error"]["message"][:300])
                calls += len(attempts)
                outcomes.update(f"{a['backend']}:{a['outcome']}" for a in attempts)
            sent = server_calls(client, url) - sent_before
            backends = client.get(f"{url}/v1/stats").json()["backends"]
            named = []  # the fastest backend named by the caller: the router's own path, no choice to make
            for i in range(min(n, 100)):
                started = time.perf_counter()
                client.post(f"{url}/v1/query", json={"question": QUESTIONS[i % len(QUESTIONS)], "backend": FASTEST,
                                                     "tool": "answer", "include_routing_metadata": False})
                named.append((time.perf_counter() - started) * 1000)
    finally:
        stop_local(config)
    return {
        "requests": n, "success_rate": round(succeeded / n, 4), "p50_ms": pct(latencies, 50),
        "p95_ms": pct(latencies, 95), "p99_ms": pct(latencies, 99), "max_ms": round(max(latencies), 2),
        "calls_per_request": round(calls / n, 3),
        # Attempts that reached a server: without those the outlier detector refused on the spot.
        "sent_per_request": round(sent / n, 3),
        "served_by": dict(served), "attempts": dict(sorted(outcomes.items())), "errors": dict(errors),
        "error_examples": examples,
        "detectors": {name: {"state": b["health"], "ejections": b["ejections"]} for name, b in backends.items()},
        "fastest_named_p50_ms": pct(named, 50),
    }


async def call_directly(name: str, n: int) -> list[float]:
    """Latencies of one backend's server alone: the MCP client calls it directly, no routing."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=[SERVER, "--name", name, *BACKENDS[name]])
    times = []
    async with Client(params, cache=None) as client:
        for i in range(n + 3):
            started = time.perf_counter()
            await client.call_tool("answer", {"query": QUESTIONS[i % len(QUESTIONS)]})
            if i >= 3:  # the first calls pay for imports and caches in the server process
                times.append((time.perf_counter() - started) * 1000)
    return times


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {mode: run_mode(mode, args.requests, args.num_cpus) for mode in MODES}
    direct = asyncio.run(call_directly(FASTEST, min(args.requests, 200)))
    results["fastest_backend_p50_ms"] = round(statistics.median(direct), 2)
    return results


def report(results: dict[str, Any], n: int, res: ResilienceSettings) -> None:
    fastest = results["fastest_backend_p50_ms"]
    print(f"{n} requests per mode; backends in order: {', '.join(BACKENDS)}; fastest backend ({FASTEST}) "
          f"called directly: p50 {fastest:.1f} ms")
    print(f"hedge delay: the primary's p95, within {res.hedge_min_delay_ms:g}-{res.hedge_max_delay_ms:g} ms "
          f"({res.hedge_default_delay_ms:g} ms before it has 5 calls)")
    head = (f"{'mode':<10} {'success_rate':>12} {'p50_ms':>8} {'p95_ms':>8} {'p99_ms':>8} "
            f"{'calls_per_request':>17}")
    print(head)
    print("-" * len(head))
    for mode in MODES:
        r = results[mode]
        print(f"{mode:<10} {r['success_rate']:>12.2%} {r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f} "
              f"{r['p99_ms']:>8.1f} {r['calls_per_request']:>17.2f}")
    print()
    for mode in MODES:
        r = results[mode]
        served = ", ".join(f"{k} {v}" for k, v in sorted(r["served_by"].items()))
        errors = f"; errors: {r['errors']}" if r["errors"] else ""
        errors += "".join(f"; {name} ended {d['state']} after {d['ejections']} ejection(s)"
                          for name, d in r["detectors"].items() if d["ejections"])
        print(f"{mode:<10} served by: {served}; calls sent per request {r['sent_per_request']:.2f}{errors}")
        for kind, message in r["error_examples"].items():
            print(f"{'':<10} {kind}: {message}")
    fb, hd, par = results["fallback"], results["hedged"], results["parallel"]
    # The router's own path costs the same whoever answers: the fastest backend named by the caller, through
    # the router, is what parallel's first answer can at best match.
    named = statistics.median(results[m]["fastest_named_p50_ms"] for m in MODES)
    print(f"\nthe fastest backend named by the caller, through the router: p50 {named:.1f} ms")
    checks = [
        *((f"{m} success 100%", results[m]["success_rate"] == 1.0) for m in MODES),
        ("hedged p99 <= fallback p99 / 2", hd["p99_ms"] <= fb["p99_ms"] / 2),
        ("hedged calls/request <= 1.2", hd["calls_per_request"] <= 1.2),
        ("parallel p50 within 10% of the fastest backend's through the router", par["p50_ms"] <= 1.1 * named),
        ("parallel p50 within 10% of the fastest backend's called directly",
         abs(par["p50_ms"] - fastest) <= 0.1 * fastest),
    ]
    print()
    for name, ok in checks:
        print(f"  [{'met' if ok else 'MISSED'}] {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=300, help="requests per mode (default 300)")
    p.add_argument("--json", type=Path, help="write the results to this file")
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray (default 2)")
    args = p.parse_args()
    if args.requests < 1:
        p.error("--requests must be at least 1")
    results = run(args)
    report(results, args.requests, settings().resilience)
    if args.json:
        out = {m: results[m] for m in MODES} | {"fastest_backend_p50_ms": results["fastest_backend_p50_ms"]}
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
