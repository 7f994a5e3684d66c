"""PerformanceActor: the cluster-wide call history, per (backend, intent), in bounded deques.

Router replicas send outcomes in batches without awaiting them and read a snapshot at most once a
second, so the request path never waits on this actor. The history is written to Ray's GCS
key-value store every `perf_snapshot_interval_s`; when the actor restarts (`max_restarts`) it
reloads the last snapshot, so at most that interval of history is lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import ray
from ray.experimental import internal_kv

from router.resilience.performance import CallRecord, PerformanceHistory
from router.settings import ResilienceSettings
from router.stages.scoring import PerfSnapshot

log = logging.getLogger("mcp_router.performance")


class PerformanceTracker:
    def __init__(self, settings: ResilienceSettings, snapshot_key: str) -> None:
        self.settings = settings
        self._key = snapshot_key.encode()
        self._history = self._restore()
        self._dirty = False
        self._saver: asyncio.Task[None] | None = None
        self.recorded = 0
        self.loadtest: dict[str, Any] | None = None

    def _restore(self) -> PerformanceHistory:
        window = self.settings.perf_window
        raw = internal_kv._internal_kv_get(self._key) if internal_kv._internal_kv_initialized() else None
        if not raw:
            return PerformanceHistory(window)
        try:
            history = PerformanceHistory.load(json.loads(raw), window)
            log.info("performance history restored from the last snapshot")
            return history
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("ignoring an unreadable performance snapshot: %s", exc)
            return PerformanceHistory(window)

    def _ensure_saver(self) -> None:
        if self._saver is None or self._saver.done():
            self._saver = asyncio.create_task(self._save_periodically())

    async def _save_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.settings.perf_snapshot_interval_s)
            self.save()

    def save(self) -> None:
        if self._dirty and internal_kv._internal_kv_initialized():
            internal_kv._internal_kv_put(self._key, json.dumps(self._history.dump()).encode(), overwrite=True)
            self._dirty = False

    async def record_many(self, records: list[tuple[str, str, float, float, bool, str | None, str | None]]) -> int:
        """Records as (backend, intent, ts, latency_ms, ok, error_type, caller)."""
        self._ensure_saver()
        for backend, intent, ts, latency_ms, ok, error_type, caller in records:
            self._history.record(backend, intent, CallRecord(ts, latency_ms, ok, error_type, caller))
        self.recorded += len(records)
        self._dirty = True
        return len(records)

    async def snapshot(self) -> dict[tuple[str, str], PerfSnapshot]:
        self._ensure_saver()
        return self._history.snapshots()

    async def stats(self) -> dict[str, Any]:
        rows = []
        for (backend, intent), snap in sorted(self._history.snapshots().items()):
            rows.append({
                "backend": backend, "intent": intent, "calls": snap.count,
                "success_rate_10": round(snap.success_rate_10, 4), "success_rate": round(snap.success_rate, 4),
                "mean_latency_ms_10": round(snap.mean_latency_ms_10, 2),
                "mean_latency_ms": round(snap.mean_latency_ms, 2), "p95_latency_ms": round(snap.p95_latency_ms, 2),
                "p95_latency_ms_10": round(snap.p95_latency_ms_10, 2), "perf_score": round(snap.score, 4),
                "errors": self._history.errors((backend, intent)),
                "recent": self._history.recent((backend, intent)),
            })
        return {"window": self._history.window, "recorded": self.recorded, "generated_at": time.time(),
                "series": rows}

    async def flush(self) -> None:
        self.save()

    # The last `mcp-router loadtest` report, sent by the load tester (the console's load test view).
    async def set_loadtest(self, report: dict[str, Any]) -> None:
        self.loadtest = report

    async def get_loadtest(self) -> dict[str, Any] | None:
        return self.loadtest


PerformanceActor = ray.remote(PerformanceTracker)
