"""Router overhead and throughput, all measured in one run on this machine.

    python benchmarks/overhead.py [--requests 200] [--ingress direct|proxy] [--json OUT]

1. p50/p99 of a trivial tool (the calculator's `calculate`) called directly with the MCP client;
2. the same tool through POST /v1/query (sequential requests), with one question (after the first
   request the router reuses its analysis) and with a new question each time (embedding, intent and
   retrieval run for every request);
3. a bare Serve echo app in the same ingress mode (the floor Ray Serve itself sets);
4. /v1/query throughput at concurrency 1, 8, 32 and 64 (with `wrk` when installed, else httpx).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from router.config import RouterSettings  # noqa: E402

QUESTION = "What is 1 plus 1?"
BODY = json.dumps({"question": QUESTION, "include_routing_metadata": False})


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, round(p / 100 * (len(v) - 1)))]


async def direct_mcp(n: int) -> list[float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=[str(ROOT / "examples/servers/calculator.py")])
    out = []
    async with Client(params, cache=None) as client:
        for _ in range(20):
            await client.call_tool("calculate", {"query": QUESTION})
        for _ in range(n):
            t0 = time.perf_counter()
            await client.call_tool("calculate", {"query": QUESTION})
            out.append((time.perf_counter() - t0) * 1000)
    return out


def unseen(i: int) -> str:
    """A question the router has not seen: embedding and retrieval run again (no question cache hit)."""
    return json.dumps({"question": f"What is {i} plus {i + 7}?", "include_routing_metadata": False})


def sequential(url: str, n: int, body: str | Callable[[int], str] = BODY, path: str = "/v1/query") -> list[float]:
    make = body if callable(body) else (lambda _: body)
    out = []
    with httpx.Client(timeout=30) as c:
        for i in range(20):
            c.post(url + path, content=make(100_000 + i), headers={"content-type": "application/json"})
        for i in range(n):
            t0 = time.perf_counter()
            r = c.post(url + path, content=make(i), headers={"content-type": "application/json"})
            out.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
    return out


def throughput(url: str, concurrency: int, seconds: float) -> float:
    if shutil.which("wrk"):
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write(f'wrk.method = "POST"\nwrk.body = {json.dumps(BODY)}\n'
                    'wrk.headers["Content-Type"] = "application/json"\n')
        out = subprocess.run(["wrk", f"-t{min(2, concurrency)}", f"-c{concurrency}", f"-d{int(seconds)}s", "-s",
                              f.name, url + "/v1/query"], capture_output=True, text=True, check=True).stdout
        os.unlink(f.name)
        errors = [ln for ln in out.splitlines() if "Non-2xx" in ln or "Socket errors" in ln]
        if errors:
            print("   wrk:", "; ".join(errors))
        return float(next(ln for ln in out.splitlines() if ln.startswith("Requests/sec")).split()[1])

    async def run() -> float:
        done = 0
        stop = time.monotonic() + seconds
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=concurrency)) as c:
            async def worker() -> None:
                nonlocal done
                while time.monotonic() < stop:
                    await c.post(url + "/v1/query", content=BODY, headers={"content-type": "application/json"})
                    done += 1
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / seconds
    return asyncio.run(run())


def find_echo(port: int) -> str:
    """Direct ingress gives the new app the next free port of its range while the old one drains."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for p in range(port, port + 4):
            try:
                r = httpx.post(f"http://127.0.0.1:{p}/v1/query", content=BODY,
                               headers={"content-type": "application/json"}, timeout=2)
                if r.is_success and r.json().get("question") == QUESTION:
                    return f"http://127.0.0.1:{p}"
            except (httpx.HTTPError, ValueError):
                pass
        time.sleep(0.5)
    raise TimeoutError("the echo app did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--ingress", choices=["direct", "proxy"], default="direct")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()

    import ray
    from fastapi import FastAPI
    from ray import serve

    from cli.local import free_port, start_local, stop_local

    direct = asyncio.run(direct_mcp(args.requests))
    port = free_port()
    settings = RouterSettings.model_validate({
        "backends": [{"name": "calculator", "kind": "mcp_stdio", "command": sys.executable,
                      "args": [str(ROOT / "examples/servers/calculator.py")]}],
        "server": {"port": port, "ingress": args.ingress}, "state_dir": str(ROOT / ".state"),
    })
    endpoints = start_local(settings, num_cpus=2)
    url = endpoints.url
    routed = sequential(url, args.requests)
    routed_new = sequential(url, args.requests, unseen)
    rps = {c: throughput(url, c, args.seconds) for c in (1, 8, 32, 64)}
    serve.delete(settings.server.app_name)

    echo_app = FastAPI()

    @serve.deployment(ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1000)
    @serve.ingress(echo_app)
    class Echo:
        @echo_app.post("/v1/query")
        async def echo(self, body: dict) -> dict:
            return body

    serve.run(Echo.bind(), name="echo", route_prefix="/")
    echo_url = find_echo(port) if args.ingress == "direct" else url
    echo = sequential(echo_url, args.requests)
    serve.delete("echo")
    stop_local(settings)
    assert not ray.is_initialized()

    report = {
        "ingress": args.ingress, "requests": args.requests,
        "direct_p50_ms": statistics.median(direct), "direct_p99_ms": pct(direct, 99),
        "router_p50_ms": statistics.median(routed), "router_p99_ms": pct(routed, 99),
        "router_new_p50_ms": statistics.median(routed_new), "router_new_p99_ms": pct(routed_new, 99),
        "echo_p50_ms": statistics.median(echo), "echo_p99_ms": pct(echo, 99),
        "rps": {str(k): round(v, 1) for k, v in rps.items()},
    }
    report["added_p50_ms"] = report["router_p50_ms"] - report["direct_p50_ms"]
    print(f"\ningress mode: {args.ingress}, {args.requests} sequential requests each")
    print(f"{'path':<34}{'p50 ms':>10}{'p99 ms':>10}")
    for label, key in (("MCP client -> tool (direct)", "direct"), ("HTTP -> router -> actor -> tool", "router"),
                       ("  the same, every question new", "router_new"), ("HTTP -> bare Serve echo", "echo")):
        print(f"{label:<34}{report[key + '_p50_ms']:>10.2f}{report[key + '_p99_ms']:>10.2f}")
    print(f"added by the router (p50): {report['added_p50_ms']:.2f} ms")
    print(f"{'concurrency':<14}" + "".join(f"{c:>10}" for c in rps))
    print(f"{'req/s':<14}" + "".join(f"{v:>10.0f}" for v in rps.values()))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
