"""Resilience under Serve with three equivalent fault-injection MCP servers (examples/servers/faulty.py).

Each test sets the servers' behaviour through their admin tool, called through the router itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from router.settings import RouterSettings
from tests.conftest import EXAMPLES, fresh_state, running_app, stdio, wait_for

QUESTION = "What is the capital of France?"
FAULTY = EXAMPLES / "servers" / "faulty.py"


@pytest.fixture(scope="module")
def app(ray_local: dict[str, Any]) -> Iterator[str]:
    settings = RouterSettings.model_validate({
        "backends": [stdio(n, FAULTY, "--name", n, "--answer", answer, "--seed", "1", timeout_s=2.0)
                     for n, answer in (("a", "Paris"), ("b", "Paris"), ("c", "Lyon"))],
        # Resilience, not relevance, is under test: the general-knowledge question's weak embedding match
        # (cosine 0.12) sits below the default confidence threshold, so every candidate counts here.
        "routing": {"min_confidence": 0.0},
        "resilience": {"ejection": {"consecutive_failures": 3, "base_ejection_s": 1.5, "min_requests": 50},
                       # Hedges wait at least 300 ms, whatever the fast calls before say of the delay.
                       "hedge_min_delay_ms": 300, "hedge_default_delay_ms": 300},
        "server": {"namespace": "mcp-router-test", "port": ray_local["port"]},
        "state_dir": fresh_state(),
    })
    with running_app(settings, ray_local["url"]) as url:
        yield url


def admin(url: str, backend: str, tool: str, **arguments: Any) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/query", json={"question": tool, "backend": backend, "tool": tool,
                                            "arguments": arguments}, timeout=30)
    assert r.status_code == 200, r.text
    return json.loads(r.json()["answer"])


@pytest.fixture(autouse=True)
def healthy(app: str) -> Iterator[None]:
    for b in "abc":
        admin(app, b, "configure", fail_rate=0.0, latency_ms=0.0, hang_rate=0.0, tail_rate=0.0)
    yield


def ask(url: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/query", json={"question": QUESTION, **body}, timeout=60)


def test_fallback_takes_the_next_backend_when_the_first_fails_and_reports_the_chain(app: str) -> None:
    admin(app, "a", "configure", fail_rate=1.0)
    r = ask(app, backend="a", fallback_on_override=True)
    assert r.status_code == 200, r.text
    meta = r.json()["routing"]
    assert r.json()["backend"] in ("b", "c")
    assert meta["attempts"][0]["backend"] == "a" and meta["attempts"][0]["outcome"] == "error"
    assert "injected failure" in meta["attempts"][0]["error"]
    assert meta["attempts"][-1]["outcome"] == "success" and meta["fallbacks_used"] >= 1


def test_fallback_moves_on_when_the_first_backend_times_out(app: str) -> None:
    admin(app, "a", "configure", hang_rate=1.0)
    r = ask(app, backend="a", fallback_on_override=True)
    assert r.status_code == 200, r.text
    first = r.json()["routing"]["attempts"][0]
    assert (first["backend"], first["outcome"]) == ("a", "timeout")
    assert 1500 < first["latency_ms"] < 4000


def test_all_backends_failing_answers_502_with_the_chain(app: str) -> None:
    for b in "abc":
        admin(app, b, "configure", fail_rate=1.0)
    r = ask(app)
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["type"] == "all_backends_failed"
    assert {a["backend"] for a in err["details"]["attempts"]} == {"a", "b", "c"}


def test_parallel_returns_the_fast_answer_and_cancels_the_slow_calls_on_the_server(app: str) -> None:
    admin(app, "a", "configure", latency_ms=1500)
    admin(app, "c", "configure", latency_ms=1500)
    admin(app, "b", "configure", latency_ms=300)  # long enough for every call to reach its server
    before = {b: admin(app, b, "stats")["cancelled"] for b in "ac"}
    started = time.monotonic()
    r = ask(app, mode="parallel")
    assert r.status_code == 200 and r.json()["backend"] == "b"
    assert time.monotonic() - started < 1.4
    outcomes = {a["backend"]: a["outcome"] for a in r.json()["routing"]["attempts"]}
    assert outcomes == {"a": "cancelled", "b": "success", "c": "cancelled"}
    wait_for(lambda: all(admin(app, b, "stats")["cancelled"] > before[b] for b in "ac"), timeout=5)


def test_hedged_sends_the_second_call_only_after_the_delay(app: str) -> None:
    admin(app, "a", "configure", latency_ms=1200)
    r = ask(app, mode="hedged", backend="a", fallback_on_override=True)
    assert r.status_code == 200, r.text
    attempts = r.json()["routing"]["attempts"]
    second = next(a for a in attempts if a["backend"] != "a")
    assert second["started_ms"] >= 250 and second["outcome"] == "success"
    fast = ask(app, mode="hedged", backend="b", fallback_on_override=True)
    assert [a["backend"] for a in fast.json()["routing"]["attempts"]] == ["b"]


def test_consensus_returns_the_majority_answer_with_agreement(app: str) -> None:
    r = ask(app, mode="consensus")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["answer"] == "Paris"
    meta = body["routing"]
    assert meta["agreement"] == pytest.approx(2 / 3, abs=1e-3)
    assert meta["disagreed"] == ["c"] and len(meta["answers"]) == 3


def test_a_failing_backend_ranks_below_an_equally_relevant_healthy_one(app: str) -> None:
    # The tests before leave failures and slow calls in both histories, in an order the machine's speed
    # decides; ten answers each make the recent history (the last 10 calls) the same for both.
    for b in "bc":
        for _ in range(10):
            assert ask(app, backend=b).status_code == 200
    admin(app, "b", "configure", fail_rate=1.0)
    for _ in range(2):
        ask(app, backend="b")
    admin(app, "b", "configure", fail_rate=0.0)

    def ranked() -> list[str] | None:
        cands = httpx.post(f"{app}/v1/route", json={"question": QUESTION}).json()["candidates"]
        order = [c["backend"] for c in cands if c["capability"] == "answer"]
        return order if order.index("b") > order.index("c") else None

    order = wait_for(ranked, timeout=10)
    assert order[-1] == "b" or order.index("b") > order.index("c")


def test_backend_is_ejected_after_consecutive_failures_and_one_probe_decides_its_return(app: str) -> None:
    # Runs last: it leaves backend "a" healthy again, but only after two ejections.
    def backend_a() -> dict[str, Any]:
        return {b["name"]: b for b in httpx.get(f"{app}/v1/backends").json()}["a"]

    admin(app, "a", "configure", fail_rate=1.0)
    for _ in range(3):
        assert ask(app, backend="a").status_code == 502
    first = wait_for(lambda: backend_a() if backend_a()["health"] == "ejected" else None, timeout=5)
    assert first["ejected_until"] is not None
    refused = ask(app, backend="a")
    assert refused.status_code == 503 and "ejected" in refused.json()["error"]["message"]
    routed = ask(app)
    assert routed.status_code == 200 and routed.json()["backend"] != "a"
    time.sleep(1.6)  # the first ejection (1.5 s) is over: the next call is the half-open probe, and it fails
    assert ask(app, backend="a").status_code == 502
    wait_for(lambda: backend_a()["health"] == "ejected", timeout=5)
    time.sleep(3.1)  # the second ejection lasts twice as long; this time the probe (an admin call) succeeds
    admin(app, "a", "configure", fail_rate=0.0)
    wait_for(lambda: backend_a()["health"] == "healthy", timeout=5)
    assert ask(app, backend="a").json()["answer"] == "Paris"
