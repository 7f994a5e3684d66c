"""Fault-injection MCP server: one question-answering tool whose failures and latency you choose.

    python examples/servers/faulty.py                                   # healthy, stdio, answers "42"
    python examples/servers/faulty.py --name flaky --fail-rate 0.3      # 30% of calls fail
    python examples/servers/faulty.py --latency-ms 20 --tail-rate 0.1 --tail-multiplier 10
                                                                        # median 20 ms, p95 200 ms
    python examples/servers/faulty.py --hang-rate 0.05 --seed 7         # 5% never answer
    python examples/servers/faulty.py --http 8931                       # http://127.0.0.1:8931/mcp

A call to `answer` first decides whether it hangs (it then waits until the client cancels it),
then sleeps its latency (the median, times `--tail-multiplier` with probability `--tail-rate`,
spread by +-`--jitter`), then fails with probability `--fail-rate` or returns the answer. A failure
is the server's own fault by default, a JSON-RPC error (`--fail-as error`, what a router counts
against the backend); `--fail-as tool-error` reports it as a tool result with `isError`, the answer
a tool gives about one request (what a router does not count against the backend). `configure`
changes any of this while the server runs; `stats` returns the counters, including the calls the
client cancelled (`notifications/cancelled`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from dataclasses import asdict, dataclass, field

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, ToolAnnotations

RATES = ("fail_rate", "tail_rate", "hang_rate")


@dataclass
class Faults:
    answer: str = "42"
    fail_rate: float = 0.0
    latency_ms: float = 0.0
    tail_rate: float = 0.0
    tail_multiplier: float = 10.0
    hang_rate: float = 0.0
    jitter: float = 0.1  # each latency is spread uniformly by +- this fraction; the median stays put
    fail_as: str = "error"  # "error": a JSON-RPC error (the server's fault); "tool-error": an isError result
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def latency_s(self) -> float:
        slow = self.rng.random() < self.tail_rate
        base = self.latency_ms * (self.tail_multiplier if slow else 1.0)
        return max(0.0, base * (1 + self.rng.uniform(-self.jitter, self.jitter))) / 1000

    def settings(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if k not in ("rng", "fail_as")}


def check(name: str, value: float) -> None:
    if value < 0 or (name in RATES and value > 1):
        allowed = "between 0 and 1" if name in RATES else "at least 0"
        raise ValueError(f"{name} must be {allowed}, got {value}")


def build_server(name: str, faults: Faults) -> MCPServer:
    # WARNING: the SDK logs every failed call at INFO, and failing is this server's job.
    server = MCPServer(name, instructions="Answers general knowledge questions.", log_level="WARNING")
    counts = {"calls": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "hung": 0, "in_flight": 0}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def answer(query: str) -> str:
        """Answer a general knowledge question about history, geography, science, nature, art, people,
        places or dates, e.g. 'what is the capital of Peru?' or 'who wrote Hamlet?'."""
        counts["calls"] += 1
        counts["in_flight"] += 1
        try:
            if faults.rng.random() < faults.hang_rate:
                counts["hung"] += 1
                await asyncio.Event().wait()  # until the client cancels the request
            await asyncio.sleep(faults.latency_s())
            if faults.rng.random() < faults.fail_rate:
                counts["failed"] += 1
                message = "the knowledge base is temporarily unavailable (injected failure)"
                if faults.fail_as == "tool-error":
                    raise ToolError(message)
                raise MCPError(INTERNAL_ERROR, message)
            counts["succeeded"] += 1
            return faults.answer
        except asyncio.CancelledError:
            counts["cancelled"] += 1
            raise
        finally:
            counts["in_flight"] -= 1

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True))
    def configure(fail_rate: float | None = None, latency_ms: float | None = None,
                  tail_rate: float | None = None, tail_multiplier: float | None = None,
                  hang_rate: float | None = None, answer: str | None = None) -> str:
        """Fault-injection admin: change this test server's injected failure rate, latency, slow tail,
        hang rate or canned reply; settings left out are kept. Returns the settings now in force."""
        numbers = {"fail_rate": fail_rate, "latency_ms": latency_ms, "tail_rate": tail_rate,
                   "tail_multiplier": tail_multiplier, "hang_rate": hang_rate}
        changes = {k: v for k, v in numbers.items() if v is not None}
        try:
            for key, value in changes.items():
                check(key, value)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        for key, value in changes.items():
            setattr(faults, key, value)
        if answer is not None:
            faults.answer = answer
        return json.dumps(faults.settings())

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def stats() -> str:
        """Fault-injection admin: this test server's call counters as JSON (calls, succeeded, failed,
        cancelled, hung, in_flight)."""
        return json.dumps(counts)

    return server


def main() -> None:
    p = argparse.ArgumentParser(description="Fault-injection MCP server")
    p.add_argument("--name", default="faulty", help="server name reported to clients")
    p.add_argument("--answer", default="42", help="what `answer` replies")
    p.add_argument("--fail-rate", type=float, default=0.0, help="probability a call returns an error")
    p.add_argument("--latency-ms", type=float, default=0.0, help="median latency of a call")
    p.add_argument("--tail-rate", type=float, default=0.0, help="probability a call is slow")
    p.add_argument("--tail-multiplier", type=float, default=10.0, help="a slow call takes latency times this")
    p.add_argument("--jitter", type=float, default=0.1, help="latency spread, +- this fraction (default 0.1)")
    p.add_argument("--hang-rate", type=float, default=0.0, help="probability a call waits until cancelled")
    p.add_argument("--seed", type=int, default=None, help="random seed, for repeatable runs")
    p.add_argument("--fail-as", choices=["error", "tool-error"], default="error",
                   help="a failure as a JSON-RPC error (the server's fault; default) or an isError tool result")
    p.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT at /mcp")
    a = p.parse_args()
    faults = Faults(answer=a.answer, fail_rate=a.fail_rate, latency_ms=a.latency_ms, tail_rate=a.tail_rate,
                    tail_multiplier=a.tail_multiplier, hang_rate=a.hang_rate, jitter=a.jitter,
                    fail_as=a.fail_as, rng=random.Random(a.seed))
    for key in (*RATES, "latency_ms", "tail_multiplier", "jitter"):
        try:
            check(key, getattr(faults, key))
        except ValueError as exc:
            p.error(str(exc))
    server = build_server(a.name, faults)
    if a.http is None:
        server.run()
    else:
        import uvicorn

        app = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=True)
        uvicorn.run(app, host="127.0.0.1", port=a.http, log_level="warning")


if __name__ == "__main__":
    main()
