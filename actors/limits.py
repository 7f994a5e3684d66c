"""RateLimitActor: the application's shared token buckets, so per-principal rates hold across replicas.

Replicas lease tokens from it a few at a time (`router.security.limits.Limiter`); it keeps no state
worth saving: a restart starts every bucket full, which allows at most one extra burst.
"""

from __future__ import annotations

import ray

from router.security.limits import SharedBuckets


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class RateLimitActor:
    def __init__(self) -> None:
        self._buckets = SharedBuckets()

    def grant(self, key: str, rate: float, capacity: float, want: float) -> tuple[int, float]:
        return self._buckets.grant(key, rate, capacity, want)
