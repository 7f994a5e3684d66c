"""Per (backend, intent) call history in bounded deques, and the snapshots the router scores with.

    history = PerformanceHistory(window=100)
    history.record("time", "technical-analysis", CallRecord(ts=..., latency_ms=12.0, ok=True))
    history.snapshots()[("time", "technical-analysis")].success_rate_10

Every record also lands in the backend's all-intents history (intent ``"*"``), used when an intent
has no history of its own.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from router.stages.scoring import ANY_INTENT, PerfSnapshot


@dataclass(frozen=True, slots=True)
class CallRecord:
    ts: float
    latency_ms: float
    ok: bool
    error_type: str | None = None


def summarize(backend: str, intent: str, records: deque[CallRecord] | list[CallRecord]) -> PerfSnapshot:
    items = list(records)
    last = items[-10:]

    def rate(rs: list[CallRecord]) -> float:
        return sum(r.ok for r in rs) / len(rs) if rs else 1.0

    def mean(rs: list[CallRecord]) -> float:
        return float(np.mean([r.latency_ms for r in rs])) if rs else 0.0

    def pct(rs: list[CallRecord], q: float) -> float:
        return float(np.percentile([r.latency_ms for r in rs], q)) if rs else 0.0

    return PerfSnapshot(backend=backend, intent=intent, count=len(items), success_rate_10=rate(last),
                        mean_latency_ms_10=mean(last), success_rate=rate(items), mean_latency_ms=mean(items),
                        p95_latency_ms=pct(items, 95), p95_latency_ms_10=pct(last, 95),
                        p50_latency_ms=pct(items, 50))


class PerformanceHistory:
    def __init__(self, window: int = 100) -> None:
        self.window = window
        self._hist: dict[tuple[str, str], deque[CallRecord]] = {}
        # Summaries are kept, and only those of histories recorded to since are computed again: replicas
        # read every one each second, and at a thousand backends computing them all took a quarter second.
        self._summaries: dict[tuple[str, str], PerfSnapshot] = {}
        self._changed: set[tuple[str, str]] = set()

    def record(self, backend: str, intent: str, rec: CallRecord) -> None:
        for key in ((backend, intent), (backend, ANY_INTENT)):
            dq = self._hist.get(key)
            if dq is None:
                dq = self._hist[key] = deque(maxlen=self.window)
            dq.append(rec)
            self._changed.add(key)

    def snapshots(self) -> dict[tuple[str, str], PerfSnapshot]:
        for key in self._changed:
            self._summaries[key] = summarize(key[0], key[1], self._hist[key])
        self._changed.clear()
        return dict(self._summaries)

    def recent(self, key: tuple[str, str], n: int = 30) -> list[list[Any]]:
        """The last `n` calls as [time, latency ms, ok], oldest first (the console's charts)."""
        return [[round(r.ts, 3), round(r.latency_ms, 2), r.ok] for r in list(self._hist.get(key, ()))[-n:]]

    def errors(self, key: tuple[str, str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self._hist.get(key, ()):
            if not r.ok:
                kind = r.error_type or "error"
                out[kind] = out.get(kind, 0) + 1
        return out

    def dump(self) -> dict[str, Any]:
        """Records as [ts, latency_ms, ok, error_type] lists: a fifth of the time of one object each."""
        return {"window": self.window,
                "history": [[b, i, [[r.ts, r.latency_ms, r.ok, r.error_type] for r in dq]]
                            for (b, i), dq in self._hist.items()]}

    @classmethod
    def load(cls, data: dict[str, Any], window: int) -> PerformanceHistory:
        """What `dump` wrote (records as lists, or as objects as written before)."""
        history = cls(window)
        for backend, intent, records in data.get("history", []):
            history._hist[(backend, intent)] = deque(
                (CallRecord(**r) if isinstance(r, dict) else CallRecord(*r) for r in records), maxlen=window)
            history._changed.add((backend, intent))
        return history
