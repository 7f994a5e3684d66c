"""Router overhead and throughput, all measured in one run on this machine.

    python benchmarks/overhead.py [--requests 200] [--ingress direct|proxy] [--compute auto|int8|float] [--json OUT]

1. p50/p99 of a trivial tool (the calculator's `calculate`) called directly with the MCP client;
2. the same tool through POST /v1/query (sequential requests) with a new question each time (the
   headline: embedding, intent and retrieval run for every request), broken down per stage from the
   router's own timings (`routing.stages_ms`; "ingress" is the client's latency less the router's
   total; the execute stage also split into the MCP call as the backend's host timed it and the rest),
   and with one repeated question (the router reuses its analysis);
3. the embedding model alone on the same new questions;
4. a bare Serve echo app in the same ingress mode (the floor Ray Serve itself sets);
5. /v1/query throughput at concurrency 1, 8, 32 and 64 with the repeated question and with new
   questions drawn from a pool of a few thousand (with `wrk` when installed, else httpx), beside the
   bare echo's at 32 and 64 and the direct MCP client's with 32 calls in flight;
6. the repeated question again after redeploying the router with authentication on (an API key and a
   policy that denies one tool, so routing runs in the principal's own view): the cost of security.
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

from router.settings import RouterSettings  # noqa: E402

QUESTION = "What is 1 plus 1?"
BODY = json.dumps({"question": QUESTION, "include_routing_metadata": False})


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, round(p / 100 * (len(v) - 1)))]


async def direct_mcp(n: int, seconds: float) -> tuple[list[float], float]:
    """Latencies of `n` sequential direct calls, then calls per second with 32 in flight on the one
    session: the tool's own ceiling, which the router's throughput shares the cores with."""
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
        done, stop = 0, time.monotonic() + seconds

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < stop:
                await client.call_tool("calculate", {"query": QUESTION})
                done += 1
        await asyncio.gather(*(worker() for _ in range(32)))
    return out, done / seconds


_TEMPLATES = ("What is {a} plus {b}?", "Compute {a} times {b}", "How much is {a} minus {b}?",
              "Calculate {a} divided by {b}", "What is {b} percent of {a}?", "Add {a} and {b} please")


def question(i: int) -> str:
    """The i-th of a pool of distinct questions the router has not seen before."""
    return _TEMPLATES[i % len(_TEMPLATES)].format(a=1000 + i, b=i % 97 + 2)


def unseen(i: int) -> str:
    """A new question with its routing metadata (for the stage timings)."""
    return json.dumps({"question": question(i)})


def sequential(url: str, n: int, body: str | Callable[[int], str] = BODY, path: str = "/v1/query",
               stages: list[dict[str, float]] | None = None, headers: dict[str, str] | None = None) -> list[float]:
    make = body if callable(body) else (lambda _: body)
    out = []
    with httpx.Client(timeout=30, headers=headers) as c:
        for i in range(20):
            c.post(url + path, content=make(100_000 + i), headers={"content-type": "application/json"})
        for i in range(n):
            t0 = time.perf_counter()
            r = c.post(url + path, content=make(i), headers={"content-type": "application/json"})
            out.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
            if stages is not None:
                meta = r.json()["routing"]
                # The execute stage split: the MCP call as the backend's host timed it, and the rest (the Ray hop
                # to the host and back, admission and the call slot).
                call = meta["attempts"][0]["latency_ms"] if meta["attempts"] else 0.0
                stages.append({"ingress": out[-1] - meta["total_ms"], **meta["stages_ms"], "backend_call": call,
                               "execute_outside_call": meta["stages_ms"].get("execute", 0.0) - call})
    return out


def model_alone(n: int, compute: str) -> list[float]:
    """The local embedding model on one new question at a time, as a router replica runs it."""
    from router.retrieval.embeddings import build_embedder
    from router.settings import EmbeddingSettings

    model = build_embedder(EmbeddingSettings(compute=compute))
    encode = model.encode  # type: ignore[attr-defined]
    for i in range(20):
        encode([question(200_000 + i)])
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        encode([question(300_000 + i)])
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _wrk_script(new_questions: bool, body: str = BODY, ask: Callable[[int], str] = question) -> str:
    if not new_questions:
        return (f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\n'
                'wrk.headers["Content-Type"] = "application/json"\n')
    pool = ",\n".join(json.dumps(json.dumps({"question": ask(400_000 + i), "include_routing_metadata": False}))
                      for i in range(4000))
    return ('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
            f"local bodies = {{\n{pool}\n}}\n"
            "request = function()\n  return wrk.format(nil, nil, nil, bodies[math.random(#bodies)])\nend\n")


def throughput(url: str, concurrency: int, seconds: float, new_questions: bool = False, body: str = BODY,
               ask: Callable[[int], str] = question) -> float:
    """/v1/query requests per second at `concurrency`: `body` again and again, or new questions from `ask`."""
    if shutil.which("wrk"):
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write(_wrk_script(new_questions, body, ask))
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
                    sent = json.dumps({"question": ask(500_000 + done)}) if new_questions else body
                    await c.post(url + "/v1/query", content=sent, headers={"content-type": "application/json"})
                    done += 1
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / seconds
    return asyncio.run(run())


def with_authentication(settings: RouterSettings, url: str, n: int) -> list[float]:
    """Redeploy with an API key whose policy denies one tool, then the repeated question with that key."""
    from ray import serve

    from deployments.app import build_application
    from mcp_router.cli.local import wait_until_serving
    from router.security.identity import key_hash, new_api_key

    key = new_api_key()
    secured = settings.model_copy(update={"server": settings.server.model_copy(update={
        "auth": {"api_keys": [{"name": "bench", "sha256": key_hash(key), "policy": "bench"}],
                 "policies": {"bench": {"deny": ["calculator/nothing_*"]}}}})})
    secured = RouterSettings.model_validate(secured.model_dump(mode="python"))
    serve.run(build_application(secured), name=settings.server.app_name, route_prefix="/", blocking=False)
    wait_until_serving(url, 120)
    headers = {"Authorization": f"Bearer {key}"}
    while httpx.post(url + "/v1/query", content=BODY, headers={**headers, "content-type": "application/json"},
                     timeout=30).status_code != 200:
        time.sleep(0.2)
    return sequential(url, n, headers=headers)


def bare_ray_call(n: int) -> list[float]:
    """Ray's own cost: one async actor awaiting another's trivial method (what the execute stage's actor call
    costs before any of the router's work), with a small payload."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        async def echo(self, value: dict) -> dict:
            return value

    @ray.remote(num_cpus=0)
    class Caller:
        async def loop(self, target: object, n: int) -> list[float]:
            out = []
            for i in range(n + 20):
                t0 = time.perf_counter()
                await target.echo.remote({"question": question(i), "arguments": {"query": "2 + 2"}})  # type: ignore[attr-defined]
                out.append((time.perf_counter() - t0) * 1000)
            return out[20:]

    echo, caller = Echo.remote(), Caller.remote()  # type: ignore[attr-defined]
    try:
        return list(ray.get(caller.loop.remote(echo, n)))
    finally:
        ray.kill(echo)
        ray.kill(caller)


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
    parser.add_argument("--ingress", choices=["haproxy", "direct", "proxy"], default="direct")
    parser.add_argument("--compute", choices=["auto", "int8", "float"], default="auto",
                        help="embeddings.compute: how the local model multiplies (auto: by processor)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()

    import ray
    from fastapi import FastAPI
    from ray import serve

    from actors.host import freeze_startup_heap
    from mcp_router.cli.local import free_port, start_local, stop_local

    freeze_startup_heap()  # the baselines as the router: without this process's collections of its imports
    direct, direct_rps = asyncio.run(direct_mcp(args.requests, args.seconds))
    model = model_alone(args.requests, args.compute)
    port = free_port()
    settings = RouterSettings.model_validate({
        # The example's own server: a definition changed since an earlier run's pin is not a change to review.
        "backends": [{"name": "calculator", "kind": "mcp_stdio", "command": sys.executable, "trust_changes": True,
                      "args": [str(ROOT / "examples/servers/calculator.py")]}],
        "server": {"port": port, "ingress": args.ingress}, "state_dir": str(ROOT / ".state"),
        "embeddings": {"compute": args.compute},
    })
    endpoints = start_local(settings, num_cpus=2)
    url = endpoints.url
    freeze_startup_heap()  # this process's own collections (of Ray, the router) stay out of the timings
    stages: list[dict[str, float]] = []
    routed_new = sequential(url, args.requests, unseen, stages=stages)
    routed = sequential(url, args.requests)
    rps = {c: throughput(url, c, args.seconds) for c in (1, 8, 32, 64)}
    rps_new = {c: throughput(url, c, args.seconds, new_questions=True) for c in (1, 8, 32, 64)}
    routed_auth = with_authentication(settings, url, args.requests)
    ray_call = bare_ray_call(args.requests)
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
    rps_echo = {c: throughput(echo_url, c, args.seconds) for c in (32, 64)}
    serve.delete("echo")
    stop_local(settings)
    assert not ray.is_initialized()

    report = {
        "ingress": args.ingress, "requests": args.requests, "compute": args.compute,
        "direct_p50_ms": statistics.median(direct), "direct_p99_ms": pct(direct, 99),
        "router_p50_ms": statistics.median(routed), "router_p99_ms": pct(routed, 99),
        "router_new_p50_ms": statistics.median(routed_new), "router_new_p99_ms": pct(routed_new, 99),
        "echo_p50_ms": statistics.median(echo), "echo_p99_ms": pct(echo, 99),
        "rps": {str(k): round(v, 1) for k, v in rps.items()},
        # What the parts alone serve, above which the router cannot go: Serve alone, the tool alone.
        "rps_echo": {str(k): round(v, 1) for k, v in rps_echo.items()}, "direct_rps_32": round(direct_rps, 1),
        "new_question_p50_ms": statistics.median(routed_new),
        "new_question_stages_ms": {name: round(statistics.median(s.get(name, 0.0) for s in stages), 3)
                                   for name in ("ingress", "analyse", "decide", "plan", "execute", "respond",
                                                "backend_call", "execute_outside_call")},
        "model_p50_ms": statistics.median(model), "model_p99_ms": pct(model, 99),
        "rps_new": {str(k): round(v, 1) for k, v in rps_new.items()},
        "router_auth_p50_ms": statistics.median(routed_auth), "router_auth_p99_ms": pct(routed_auth, 99),
        "ray_call_p50_ms": statistics.median(ray_call), "ray_call_p99_ms": pct(ray_call, 99),
    }
    report["auth_added_p50_ms"] = report["router_auth_p50_ms"] - report["router_p50_ms"]
    report["added_p50_ms"] = report["router_p50_ms"] - report["direct_p50_ms"]
    report["new_question_added_p50_ms"] = report["new_question_p50_ms"] - report["direct_p50_ms"]
    report["new_question_added_without_model_p50_ms"] = report["new_question_added_p50_ms"] - report["model_p50_ms"]
    print(f"\ningress mode: {args.ingress}, {args.requests} sequential requests each")
    print(f"{'path':<40}{'p50 ms':>10}{'p99 ms':>10}")
    for label, key in (("HTTP -> router -> actor -> tool, new question", "router_new"),
                       ("  the same, one repeated question", "router"),
                       ("  the same, with an API key and a policy", "router_auth"),
                       ("MCP client -> tool (direct)", "direct"),
                       ("the embedding model alone", "model"), ("HTTP -> bare Serve echo", "echo"),
                       ("actor -> actor, a bare Ray call", "ray_call")):
        print(f"{label:<40}{report[key + '_p50_ms']:>10.2f}{report[key + '_p99_ms']:>10.2f}")
    print(f"added by the router (p50): new question {report['new_question_added_p50_ms']:.2f} ms "
          f"({report['new_question_added_without_model_p50_ms']:.2f} ms without the model), "
          f"repeated question {report['added_p50_ms']:.2f} ms")
    print(f"added by authentication and policy (p50): {report['auth_added_p50_ms']:.2f} ms")
    print("new question, p50 per stage (ms): " + ", ".join(f"{k} {v:.2f}"
                                                        for k, v in report["new_question_stages_ms"].items()))
    print(f"{'concurrency':<22}" + "".join(f"{c:>10}" for c in rps))
    print(f"{'req/s, repeated':<22}" + "".join(f"{v:>10.0f}" for v in rps.values()))
    print(f"{'req/s, new questions':<22}" + "".join(f"{v:>10.0f}" for v in rps_new.values()))
    print(f"{'req/s, bare Serve echo':<22}" + " " * 20 + "".join(f"{v:>10.0f}" for v in rps_echo.values()))
    print(f"req/s, MCP client -> tool (direct), 32 in flight: {direct_rps:.0f}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
