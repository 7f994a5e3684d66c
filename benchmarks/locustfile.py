"""Locust load test for a running router, for those who prefer Locust to `mcp-router loadtest`.

Locust is not a dependency of the project; install it where you run it:

    pip install locust
    locust -f benchmarks/locustfile.py --host http://127.0.0.1:8000                  # web UI on :8089
    locust -f benchmarks/locustfile.py --host http://127.0.0.1:8000 --headless \\
        --users 32 --spawn-rate 8 --run-time 1m --csv results/locust

Environment: MCP_ROUTER_MODE (fallback, parallel, hedged, consensus; default: the router's own) and
MCP_ROUTER_QUESTIONS (a file, one question per line). Each user sends POST /v1/query as soon as its
last answer arrives. A failure is reported as its HTTP status and `error.type` (for example
"503 backend_unavailable"), so Locust's failure table groups errors by cause. When the test stops,
the answers per backend and the fallback rate (answers with `routing.fallbacks_used` > 0 or more
than one attempt) are printed; with `--processes` or distributed workers, each process prints its own.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from pathlib import Path
from typing import Any

from locust import FastHttpUser, constant, events, task

DEFAULT_QUESTIONS = [
    "What time is it in Tokyo?",
    "What is 12 times (3 + 4)?",
    "Convert 5 km to miles",
    "Echo back the message hello router",
]
_FILE = os.environ.get("MCP_ROUTER_QUESTIONS")
QUESTIONS = ([q.strip() for q in Path(_FILE).read_text().splitlines() if q.strip()] if _FILE
             else DEFAULT_QUESTIONS)
MODE = os.environ.get("MCP_ROUTER_MODE")
_questions = itertools.cycle(QUESTIONS)
backends: Counter[str] = Counter()
fallbacks = 0


class RouterUser(FastHttpUser):
    wait_time = constant(0)

    @task
    def query(self) -> None:
        global fallbacks
        payload = {"question": next(_questions)} | ({"mode": MODE} if MODE else {})
        with self.client.post("/v1/query", json=payload, catch_response=True) as resp:
            try:
                body: Any = resp.json()
            except Exception:
                body = None
            if not isinstance(body, dict):
                body = {}
            if resp.status_code != 200:
                error = body.get("error") or {}
                resp.failure(f"{resp.status_code} {error.get('type', 'no error body')}")
                return
            resp.success()
        routing = body.get("routing") or {}
        backends[str(body.get("backend"))] += 1
        if (routing.get("fallbacks_used") or 0) > 0 or len(routing.get("attempts") or ()) > 1:
            fallbacks += 1


@events.test_stop.add_listener
def _print_routing_summary(**_: Any) -> None:
    answers = sum(backends.values())
    if answers:
        print("answers by backend: " + ", ".join(f"{name} x{n}" for name, n in backends.most_common()))
        print(f"fallback rate: {fallbacks / answers:.1%} ({fallbacks} of {answers} answers)")
