"""Per-principal limits as a replica applies them: token buckets, buckets shared across replicas, requests in
flight (and MCP sessions' standing streams, counted apart), backend calls charged per call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deployments.middleware import Guard
from router.errors import Overloaded, RateLimited
from router.security.audit import AuditLog
from router.security.identity import key_hash, new_api_key
from router.security.limits import InFlight, Limiter, SharedBuckets, TokenBucket
from router.settings import AuditSettings, AuthSettings, RateLimit
from tests.unit.helpers import FakeClock

KEY = new_api_key()


def test_the_token_bucket_allows_its_burst_then_its_rate() -> None:
    clock = FakeClock(100.0)
    bucket = TokenBucket(rate=2.0, capacity=4, clock=clock)
    assert [bucket.take() for _ in range(4)] == [0.0] * 4
    assert bucket.take() == pytest.approx(0.5)
    clock.now += 0.5
    assert bucket.take() == 0.0 and bucket.take() > 0


async def test_a_principal_over_its_rate_gets_429_with_retry_after_and_others_are_unaffected() -> None:
    clock = FakeClock(100.0)
    limiter = Limiter(replicas=1, clock=clock)
    limit = RateLimit(requests_per_s=5, burst=5)
    for _ in range(5):
        await limiter.admit("a", limit)
        limiter.release("a")
    with pytest.raises(RateLimited) as err:
        await limiter.admit("a", limit)
    assert err.value.status_code == 429 and int(err.value.headers()["Retry-After"]) >= 1
    await limiter.admit("b", limit)  # another principal has its own bucket


async def test_idle_principals_state_is_dropped_and_a_busy_or_drained_ones_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A JWT issuer mints a principal per subject: their state must not be held for the life of the process."""
    monkeypatch.setattr("router.security.limits.MAX_IDLE_PRINCIPALS", 10)
    clock = FakeClock(100.0)
    limiter, shared = Limiter(replicas=1, clock=clock), SharedBuckets(clock)
    limit, slow = RateLimit(requests_per_s=1, burst=1), RateLimit(requests_per_s=0.001, burst=1)
    await limiter.admit("busy", RateLimit())  # in flight
    await limiter.admit("drained", slow)  # its one token spent, for the next 1,000 s
    limiter.release("drained")
    assert shared.grant("drained", 0.001, 1, 1) == (1, 0.0)
    for i in range(30):
        await limiter.admit(f"jwt:user-{i}", limit)
        limiter.release(f"jwt:user-{i}")
        shared.grant(f"jwt:user-{i}", 1, 1, 1)
        clock.now += 1  # their buckets fill again
    assert {"busy", "drained"} <= set(limiter._states) and len(limiter._states) <= 20
    assert "drained" in shared._buckets and len(shared._buckets) <= 20
    with pytest.raises(RateLimited):  # kept: a fresh bucket would have let it in
        await limiter.admit("drained", slow)


async def drive(replicas: list[Limiter], clock: FakeClock, limit: RateLimit, seconds: float, step: float,
                skew: int = 1) -> int:
    """Requests of one principal, `skew` times as many to the first replica as to the others."""
    admitted = 0
    for _ in range(round(seconds / step)):
        clock.now += step
        for i, limiter in enumerate(replicas):
            for _ in range(skew if i == 0 else 1):
                try:
                    await limiter.admit("a", limit)
                    limiter.release("a")
                    admitted += 1
                except RateLimited:
                    pass
    return admitted


async def test_shared_buckets_hold_the_limit_across_replicas_however_traffic_is_spread() -> None:
    clock = FakeClock(100.0)
    shared = SharedBuckets(clock)

    async def grant(key: str, rate: float, capacity: float, want: float) -> tuple[float, float]:
        return shared.grant(key, rate, capacity, want)

    limit = RateLimit(requests_per_s=10, burst=10)
    replicas = [Limiter(replicas=2, clock=clock, grant=grant) for _ in range(2)]
    admitted = await drive(replicas, clock, limit, seconds=10, step=0.01, skew=5)
    assert abs(admitted - (10 * 10 + 10)) <= 0.05 * 110
    # Everything through one replica: it still gets the whole rate, not its half.
    alone = [Limiter(replicas=2, clock=clock, grant=grant)]
    clock.now += 5
    assert abs(await drive(alone, clock, RateLimit(requests_per_s=10, burst=10), 10, 0.01) - 110) <= 6


async def test_without_the_shared_buckets_each_replica_keeps_its_share() -> None:
    clock = FakeClock(100.0)

    async def unreachable(key: str, rate: float, capacity: float, want: float) -> tuple[float, float]:
        raise ConnectionError("actor gone")

    replicas = [Limiter(replicas=2, clock=clock, grant=unreachable) for _ in range(2)]
    admitted = await drive(replicas, clock, RateLimit(requests_per_s=10, burst=10), seconds=10, step=0.05)
    assert abs(admitted - (10 * 10 + 10)) <= 0.1 * 110


async def test_in_flight_caps_per_principal_and_per_replica() -> None:
    limiter = Limiter()
    limit = RateLimit(max_in_flight=2)
    await limiter.admit("a", limit)
    await limiter.admit("a", limit)
    with pytest.raises(RateLimited, match="in flight"):
        await limiter.admit("a", limit)
    limiter.release("a")
    await limiter.admit("a", limit)
    bound = InFlight(1)
    bound.enter()
    with pytest.raises(Overloaded) as err:
        bound.enter()
    assert err.value.status_code == 503 and err.value.headers()["Retry-After"] == "1"


async def test_open_mcp_streams_hold_no_request_slot_and_are_bounded_apart(tmp_path: Path) -> None:
    """An MCP session's standing GET stays open while the session lives: counted with requests, a client's
    own stream (or a few idle sessions) would refuse every request of its key, or of everyone."""
    listening = asyncio.Event()
    released = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] == "GET":
            listening.set()
            await released.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    settings = AuthSettings.model_validate({"api_keys": [{"name": "alice", "sha256": key_hash(KEY),
                                                          "policy": "one"}],
                                            "policies": {"one": {"rate_limit": {"max_in_flight": 1}}}})
    guard = Guard(app, settings, max_header_bytes=16384, max_in_flight=1,
                  audit=AuditLog(AuditSettings(path=str(tmp_path / "audit.jsonl"))), limiter=Limiter(1))

    async def ask(method: str) -> int:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        scope = {"type": "http", "method": method, "path": "/mcp/backends/b/", "headers": [
            (b"authorization", f"Bearer {KEY}".encode())]}
        await guard(scope, receive, send)
        return int(sent[0]["status"])

    stream = asyncio.create_task(ask("GET"))
    await listening.wait()
    assert await ask("POST") == 200  # the replica's one slot and alice's one are the requests'
    assert await ask("GET") == 503  # the replica's streams are bounded apart
    released.set()
    assert await stream == 200
    limiter, one = Limiter(1), RateLimit(max_in_flight=1)
    await limiter.admit("alice", one, standing=True)
    await limiter.admit("alice", one)
    with pytest.raises(RateLimited, match="1 standing streams open"):  # and a principal's as its requests are
        await limiter.admit("alice", one, standing=True)


async def test_requests_arriving_together_while_a_rate_lease_is_fetched_still_meet_the_in_flight_cap() -> None:
    buckets = SharedBuckets()

    async def grant(key: str, rate: float, capacity: float, want: float) -> tuple[float, float]:
        await asyncio.sleep(0.002)  # the shared buckets are an actor call away
        return buckets.grant(key, rate, capacity, want)

    limiter = Limiter(grant=grant)
    limit = RateLimit(requests_per_s=20, burst=40, max_in_flight=16)
    results = await asyncio.gather(*(limiter.admit("demo", limit) for _ in range(40)), return_exceptions=True)
    assert sum(r is None for r in results) == 16 and all(isinstance(r, RateLimited) for r in results if r is not None)
    assert limiter._states["demo"].in_flight == 16


async def test_backend_calls_are_charged_per_call() -> None:
    clock = FakeClock(100.0)
    limiter = Limiter(clock=clock)
    limit = RateLimit(backend_calls_per_s=3)
    await limiter.charge_calls("a", limit, 3)
    with pytest.raises(RateLimited, match="backend calls"):
        await limiter.charge_calls("a", limit, 1)


@pytest.mark.parametrize("shared", [True, False])
async def test_a_principal_alternating_two_policies_limits_gets_no_fresh_burst_at_each_change(shared: bool) -> None:
    # a JWT's scopes choose its policy token by token: each change of limit made a new, full bucket
    clock = FakeClock(100.0)
    buckets = SharedBuckets(clock)

    async def grant(key: str, rate: float, capacity: float, want: float) -> tuple[float, float]:
        return buckets.grant(key, rate, capacity, want)

    limiter = Limiter(replicas=1, clock=clock, grant=grant if shared else None)
    slow, faster = RateLimit(requests_per_s=1, burst=5), RateLimit(requests_per_s=1.5, burst=5)
    admitted = 0
    for i in range(100):
        try:
            await limiter.admit("jwt:alice", slow if i % 2 else faster)
            admitted += 1
            limiter.release("jwt:alice")
        except RateLimited:
            pass
    assert admitted == 5


async def test_the_in_flight_cap_is_the_policy_of_each_requests_credential() -> None:
    limiter = Limiter()
    await limiter.admit("jwt:alice", RateLimit())  # a token whose policy sets no cap came first
    with pytest.raises(RateLimited, match="in flight"):
        await limiter.admit("jwt:alice", RateLimit(max_in_flight=1))
