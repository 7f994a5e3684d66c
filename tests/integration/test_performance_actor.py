"""The PerformanceActor on a local Ray: batched records, snapshots, and history across a restart."""

from __future__ import annotations

import time
from typing import Any

import ray

from actors.pool import create_performance_actor
from router.settings import RouterSettings
from tests.conftest import wait_for


def test_history_survives_the_actor_restarting(ray_local: Any) -> None:
    settings = RouterSettings.model_validate({"resilience": {"perf_snapshot_interval_s": 0.2, "perf_window": 100}})
    actor = create_performance_actor(settings.resilience, f"perf-test-{time.time()}")
    now = time.time()
    records = [("a", "general", now, 10.0 + i, i % 4 != 0, None if i % 4 else "tool_failed", None) for i in range(120)]
    assert ray.get(actor.record_many.remote(records)) == 120
    snap = ray.get(actor.snapshot.remote())
    assert snap[("a", "general")].count == 100  # the deque is bounded
    assert snap[("a", "*")].success_rate_10 == 0.7 or snap[("a", "*")].success_rate_10 == 0.8
    time.sleep(0.6)  # at least one periodic snapshot to the GCS key-value store
    ray.kill(actor, no_restart=False)  # a crash: Ray restarts it (max_restarts=-1)

    def restored() -> Any:
        try:
            s = ray.get(actor.snapshot.remote(), timeout=5)
        except ray.exceptions.RayError:
            return None
        return s if ("a", "general") in s else None

    after = wait_for(restored, timeout=30, interval=0.5)
    assert after[("a", "general")].count == 100
    assert after[("a", "general")].mean_latency_ms == snap[("a", "general")].mean_latency_ms
    stats = ray.get(actor.stats.remote())
    row = next(r for r in stats["series"] if (r["backend"], r["intent"]) == ("a", "general"))
    assert row["errors"] == {"tool_failed": 25} and 0 <= row["perf_score"] <= 1
    ray.kill(actor, no_restart=True)
