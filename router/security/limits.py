"""Rate and concurrency limits per principal (token buckets), and the replica's global in-flight bound.

The limits hold across router replicas by division: each of N replicas enforces 1/N of every rate,
burst and in-flight cap. Serve spreads requests over replicas evenly (HAProxy and Serve's router both
balance by load), so the sum stays at the configured limit without a shared counter on the request
path; a replica that happens to get more of one principal's traffic refuses a little early.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from router.errors import Overloaded, RateLimited
from router.security.settings import RateLimit


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

    def take(self, n: float = 1.0) -> float:
        """0 when `n` tokens were taken; else the seconds until they would be there (nothing taken)."""
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= n:
            self.tokens -= n
            return 0.0
        return (n - self.tokens) / self.rate


@dataclass(slots=True)
class _State:
    requests: TokenBucket | None
    calls: TokenBucket | None
    max_in_flight: int | None
    in_flight: int = 0


class Limiter:
    """Per-principal limits of this replica (its share of the configured ones)."""

    def __init__(self, replicas: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        self.share = 1.0 / max(1, replicas)
        self.clock = clock
        self._states: dict[str, _State] = {}

    def _state(self, principal: str, limit: RateLimit) -> _State:
        state = self._states.get(principal)
        if state is None:
            state = self._states[principal] = _State(self._bucket(limit.requests_per_s, limit.burst),
                                                     self._bucket(limit.backend_calls_per_s, None),
                                                     None if limit.max_in_flight is None else
                                                     max(1, round(limit.max_in_flight * self.share)))
        return state

    def _bucket(self, rate: float | None, burst: int | None) -> TokenBucket | None:
        if rate is None:
            return None
        rate *= self.share
        capacity = max(1.0, (burst if burst is not None else rate / self.share) * self.share)
        return TokenBucket(rate, capacity, self.clock)

    def admit(self, principal: str, limit: RateLimit) -> None:
        """Count one request in (raises `RateLimited`); `release` when it ends."""
        state = self._state(principal, limit)
        if state.max_in_flight is not None and state.in_flight >= state.max_in_flight:
            raise RateLimited(f"{principal!r} has {state.in_flight} requests in flight, its limit here",
                              retry_after_s=1)
        if state.requests is not None:
            wait = state.requests.take()
            if wait:
                raise RateLimited(f"{principal!r} is over its rate of {limit.requests_per_s} requests/s",
                                  retry_after_s=round(wait, 3))
        state.in_flight += 1

    def release(self, principal: str) -> None:
        state = self._states.get(principal)
        if state is not None and state.in_flight > 0:
            state.in_flight -= 1

    def charge_calls(self, principal: str, limit: RateLimit, calls: int) -> None:
        """Backend calls a request is about to make (parallel and consensus make several)."""
        state = self._state(principal, limit)
        if state.calls is not None and calls > 0:
            wait = state.calls.take(min(calls, state.calls.capacity))
            if wait:
                raise RateLimited(f"{principal!r} is over its {limit.backend_calls_per_s} backend calls/s",
                                  retry_after_s=round(wait, 3))


class InFlight:
    """The replica's bound on requests running at once: over it, 503 at once instead of a queue."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def enter(self) -> None:
        if self.count >= self.limit:
            raise Overloaded(f"the router has {self.count} requests in flight on this replica, its limit",
                             retry_after_s=1)
        self.count += 1

    def exit(self) -> None:
        self.count = max(0, self.count - 1)
