"""Rate and concurrency limits per principal (token buckets), and the replica's global in-flight bound.

Rates hold across router replicas through one shared bucket per principal (`SharedBuckets`, kept by an
actor of the application). A replica does not ask it for every request: it leases a few tokens at a
time (about 50 ms of the rate, at least what the request needs) and spends them locally, so a principal
with a high rate costs one actor call per lease, and one without limits costs none. Tokens leave the
shared bucket when leased, so the sum over replicas never exceeds the configured rate and burst. If
the shared bucket cannot be reached, each replica falls back to its own share (1/N) of the limit.
Requests in flight are capped per replica, at its share of the principal's cap.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from router.errors import Overloaded, RateLimited
from router.settings import RateLimit

log = logging.getLogger("mcp_router.limits")

LEASE_S = 0.05  # a lease is about this many seconds of a principal's rate
# Principals' state is kept while it matters; past this many, whatever is idle is dropped (a JWT issuer can
# mint a principal per subject, and each would otherwise be held for the life of the process).
MAX_IDLE_PRINCIPALS = 10_000
GrantFn = Callable[[str, float, float, float], Awaitable[tuple[float, float]]]


@dataclass(slots=True)
class TokenBucket:
    rate: float
    capacity: float
    clock: Callable[[], float] = time.monotonic
    tokens: float = field(init=False)
    updated: float = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = self.capacity
        self.updated = self.clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def retune(self, rate: float, capacity: float) -> None:
        """Another policy's limit for the same principal (a JWT's scopes choose its policy token by token): the
        tokens left carry over, never more than the new capacity. A full bucket at every change of limit let
        a principal alternating two tokens take a burst at each request."""
        if (rate, capacity) != (self.rate, self.capacity):
            self._refill()
            self.rate, self.capacity = rate, capacity
            self.tokens = min(self.tokens, capacity)

    def take(self, n: float = 1.0) -> float:
        """0 when `n` tokens were taken; else the seconds until they would be there (nothing taken)."""
        self._refill()
        if self.tokens >= n:
            self.tokens -= n
            return 0.0
        return (n - self.tokens) / self.rate

    def take_up_to(self, want: float) -> tuple[int, float]:
        """As many whole tokens as are there, up to `want`; with none, the seconds until one is."""
        self._refill()
        granted = min(int(want), math.floor(self.tokens))
        if granted >= 1:
            self.tokens -= granted
            return granted, 0.0
        return 0, (1 - self.tokens) / self.rate

    @property
    def full(self) -> bool:
        """As a new bucket would be: dropping it and making another later changes nothing for its principal."""
        self._refill()
        return self.tokens >= self.capacity


V = TypeVar("V")


class Pruned(dict[str, V]):
    """A map of principals' state that, each time it has doubled past `MAX_IDLE_PRINCIPALS`, drops the entries
    `idle` says nothing depends on (a drained bucket, a request in flight keep theirs)."""

    def __init__(self, idle: Callable[[V], bool]) -> None:
        super().__init__()
        self._idle = idle
        self._prune_at = MAX_IDLE_PRINCIPALS

    def add(self, key: str, value: V) -> V:
        self[key] = value
        if len(self) > self._prune_at:
            for k in [k for k, v in self.items() if k != key and self._idle(v)]:
                del self[k]
            self._prune_at = max(MAX_IDLE_PRINCIPALS, 2 * len(self))
        return value


class SharedBuckets:
    """The application-wide buckets, one per (principal, kind of limit); an actor holds one of these."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._buckets: Pruned[TokenBucket] = Pruned(lambda bucket: bucket.full)

    def grant(self, key: str, rate: float, capacity: float, want: float) -> tuple[int, float]:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets.add(key, TokenBucket(rate, capacity, self.clock))
        bucket.retune(rate, capacity)
        return bucket.take_up_to(want)


@dataclass(slots=True)
class _State:
    max_in_flight: int | None
    in_flight: int = 0
    streams: int = 0  # standing streams open (MCP sessions' listening GETs)
    leases: dict[str, int] = field(default_factory=dict)
    local: dict[str, TokenBucket] = field(default_factory=dict)  # this replica's share, when unshared

    @property
    def idle(self) -> bool:
        """Nothing in flight and every bucket full (leased tokens not spent are given up)."""
        return not self.in_flight and not self.streams and all(b.full for b in self.local.values())


class Limiter:
    """Per-principal limits as this replica applies them."""

    def __init__(self, replicas: int = 1, clock: Callable[[], float] = time.monotonic,
                 grant: GrantFn | None = None) -> None:
        self.share = 1.0 / max(1, replicas)
        self.clock = clock
        self._grant = grant
        self._states: Pruned[_State] = Pruned(lambda state: state.idle)

    def _state(self, principal: str, limit: RateLimit) -> _State:
        cap = None if limit.max_in_flight is None else max(1, round(limit.max_in_flight * self.share))
        state = self._states.get(principal)
        if state is None:
            return self._states.add(principal, _State(cap))
        state.max_in_flight = cap  # the policy of this request's credential, not of the principal's first
        return state

    async def admit(self, principal: str, limit: RateLimit, standing: bool = False) -> None:
        """Count one request in (raises `RateLimited`); `release` when it ends. A standing stream (an MCP
        session's listening GET, open for the session's life) is counted apart from requests, under the same
        bound: a client's open streams never refuse its own requests, nor its requests its streams."""
        state = self._state(principal, limit)
        held = state.streams if standing else state.in_flight
        if state.max_in_flight is not None and held >= state.max_in_flight:
            what = "standing streams open" if standing else "requests in flight"
            raise RateLimited(f"{principal!r} has {held} {what}, its limit here", retry_after_s=1)
        # Counted in before the rate limit's await: requests arriving together all see each other.
        self._count(state, standing, 1)
        if limit.requests_per_s is not None:
            burst = float(limit.burst) if limit.burst is not None else max(1.0, limit.requests_per_s)
            try:
                await self._take(principal, state, "requests", limit.requests_per_s, burst, 1,
                                 f"its rate of {limit.requests_per_s} requests/s")
            except BaseException:  # refused, or the request cancelled while it waited: it never got in
                self.release(principal, standing)
                raise

    def release(self, principal: str, standing: bool = False) -> None:
        state = self._states.get(principal)
        if state is not None:
            self._count(state, standing, -1)

    @staticmethod
    def _count(state: _State, standing: bool, n: int) -> None:
        if standing:
            state.streams = max(0, state.streams + n)
        else:
            state.in_flight = max(0, state.in_flight + n)

    async def charge_calls(self, principal: str, limit: RateLimit, calls: int) -> None:
        """Backend calls a request is about to make (parallel and consensus make several)."""
        rate = limit.backend_calls_per_s
        if rate is None or calls <= 0:
            return
        capacity = max(1.0, rate)
        await self._take(principal, self._state(principal, limit), "calls", rate, capacity, min(calls, capacity),
                         f"its {rate} backend calls/s")

    async def _take(self, principal: str, state: _State, kind: str, rate: float, capacity: float, n: float,
                    what: str) -> None:
        lease = state.leases.get(kind, 0)
        if lease >= n:
            state.leases[kind] = int(lease - n)
            return
        if self._grant is not None:
            try:
                granted, wait = await asyncio.wait_for(
                    self._grant(f"{principal}\x00{kind}", rate, capacity, max(n, rate * LEASE_S)), 1.0)
            except Exception as exc:  # the shared buckets are unreachable: this replica's share instead
                log.warning("shared rate limits unavailable, using this replica's share: %s", exc)
            else:
                total = lease + granted
                state.leases[kind] = int(total - n) if total >= n else int(total)
                if total >= n:
                    return
                raise RateLimited(f"{principal!r} is over {what}", retry_after_s=round(wait, 3))
        rate, capacity = rate * self.share, max(1.0, capacity * self.share)
        bucket = state.local.get(kind)
        if bucket is None:
            bucket = state.local[kind] = TokenBucket(rate, capacity, self.clock)
        bucket.retune(rate, capacity)
        wait = bucket.take(n)
        if wait:
            raise RateLimited(f"{principal!r} is over {what}", retry_after_s=round(wait, 3))


class InFlight:
    """The replica's bound on requests running at once: over it, 503 at once instead of a queue."""

    def __init__(self, limit: int, what: str = "requests in flight") -> None:
        self.limit = limit
        self.what = what
        self.count = 0

    def enter(self) -> None:
        if self.count >= self.limit:
            raise Overloaded(f"the router has {self.count} {self.what} on this replica, its limit", retry_after_s=1)
        self.count += 1

    def exit(self) -> None:
        self.count = max(0, self.count - 1)
