"""Resilience under backend faults: success rate, latency and cost of each execution mode.

    python benchmarks/resilience.py [--requests N] [--json OUT]

Three equivalent backends run `examples/servers/faulty.py` over stdio, with the same tool and
description and different names: `flaky` fails 30% of its calls, `slow` has a slow tail (median
20 ms, one call in ten takes ten times as long, so its p95 is ten times its median) and `healthy`
answers in 20 ms. All latencies have +-10% jitter. They are listed worst first, so routing starts
on a faulty backend and has only its own performance history to move away from it.

For each mode (fallback, parallel, hedged, consensus) N questions go one after the other through
the router's own decision and strategy code, wired in-process (`benchmarks/inprocess.py`: no
Ray, no HTTP), each mode starting from an empty history. Reported per mode: the share of requests
answered, end-to-end latency percentiles of all requests, and backend calls per request (every
attempt in the routing metadata, cancelled ones included). `fastest_backend_p50_ms` is the
healthy backend called directly, without the router, half before the modes and half after (every
backend first answers a few direct calls, so that no mode pays for a server's first call).

Settings are the router's defaults; `ROUTER_*` environment variables change them as they do for
the router itself, e.g. ``ROUTER_RESILIENCE__HEDGE_MAX_DELAY_MS=50``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.inprocess import InProcessRouter  # noqa: E402
from router.config import ResilienceSettings, RouterSettings  # noqa: E402
from router.config_file import load_settings  # noqa: E402
from router.errors import RouterError  # noqa: E402
from router.models import QueryRequest  # noqa: E402
from router.strategies import CallContext  # noqa: E402

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


def settings() -> RouterSettings:
    """Router defaults, `ROUTER_*` environment variables applied, and the three faulty backends."""
    backends = [{"name": name, "kind": "mcp_stdio", "command": sys.executable, "timeout_s": 10.0,
                 "args": [SERVER, "--name", name, *flags]} for name, flags in BACKENDS.items()]
    return load_settings(None, overrides={"backends": backends})


def pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else 0.0


async def run_mode(local: InProcessRouter, mode: str, n: int) -> dict[str, Any]:
    local.reset()
    sent_before = sum(b.sent for b in local.backends.values())
    latencies: list[float] = []
    succeeded = calls = 0
    served: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for i in range(n):
        req = QueryRequest(question=QUESTIONS[i % len(QUESTIONS)], mode=mode)  # type: ignore[arg-type]
        started = time.perf_counter()
        try:
            resp = await local.router.query(req)
            attempts = [a.model_dump() for a in resp.routing.attempts] if resp.routing else []
            if resp.capability == "answer" and resp.answer == ANSWER:
                succeeded += 1
                served[resp.backend] += 1
            else:
                errors[f"wrong answer from {resp.backend}/{resp.capability}"] += 1
        except RouterError as exc:
            attempts = exc.details.get("attempts", [])
            errors[exc.code] += 1
        latencies.append((time.perf_counter() - started) * 1000)
        calls += len(attempts)
        outcomes.update(f"{a['backend']}:{a['outcome']}" for a in attempts)
    sent = sum(b.sent for b in local.backends.values()) - sent_before
    return {
        "requests": n, "success_rate": round(succeeded / n, 4), "p50_ms": pct(latencies, 50),
        "p95_ms": pct(latencies, 95), "p99_ms": pct(latencies, 99), "max_ms": round(max(latencies), 2),
        "calls_per_request": round(calls / n, 3),
        # Attempts that reached a server: without those the outlier detector refused on the spot.
        "sent_per_request": round(sent / n, 3),
        "served_by": dict(served), "attempts": dict(sorted(outcomes.items())), "errors": dict(errors),
        # Outlier detectors at the end ("half_open" with a probe in flight refuses calls until it returns).
        "detectors": {name: {"state": b.detector.state, "ejections": b.detector.ejections}
                      for name, b in local.backends.items()},
    }


async def call_directly(local: InProcessRouter, name: str, n: int) -> list[float]:
    """Latencies of the backend alone: its MCP client called directly, no routing."""
    backend = local.backends[name].backend
    cap = next(c for c in local.backends[name].catalog.capabilities if c.name == "answer")  # type: ignore[union-attr]
    ctx = CallContext(question="", intent="general")
    times = []
    for i in range(n):
        started = time.perf_counter()
        with contextlib.suppress(RouterError):
            await backend.call(cap, {"query": QUESTIONS[i % len(QUESTIONS)]}, timeout_s=10.0, context=ctx)
        times.append((time.perf_counter() - started) * 1000)
    return times


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with InProcessRouter(settings()) as local:
        for name in local.backends:  # first calls pay for imports and caches in the server process
            await call_directly(local, name, 3)
        # Half the direct samples before the modes and half after, so that both see the same machine.
        k = max(min(args.requests, 200) // 2, 1)
        direct = await call_directly(local, FASTEST, k)
        for mode in MODES:
            results[mode] = await run_mode(local, mode, args.requests)
        direct += await call_directly(local, FASTEST, k)
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
    fb, hd, par = results["fallback"], results["hedged"], results["parallel"]
    checks = [
        ("fallback success >= 99.9%", fb["success_rate"] >= 0.999),
        ("hedged p99 <= fallback p99 / 2", hd["p99_ms"] <= fb["p99_ms"] / 2),
        ("hedged calls/request <= 1.2", hd["calls_per_request"] <= 1.2),
        ("parallel p50 within 10% of the fastest backend's", abs(par["p50_ms"] - fastest) <= 0.1 * fastest),
    ]
    print()
    for name, ok in checks:
        print(f"  [{'met' if ok else 'MISSED'}] {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=300, help="requests per mode (default 300)")
    p.add_argument("--json", type=Path, help="write the results to this file")
    args = p.parse_args()
    if args.requests < 1:
        p.error("--requests must be at least 1")
    results = asyncio.run(main_async(args))
    report(results, args.requests, settings().resilience)
    if args.json:
        out = {m: results[m] for m in MODES} | {"fastest_backend_p50_ms": results["fastest_backend_p50_ms"]}
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
