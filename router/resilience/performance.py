"""Per (backend, intent) call history in bounded deques, and the snapshots the router scores with.

    history = PerformanceHistory(window=100)
    history.record("time", "technical-analysis", CallRecord(ts=..., latency_ms=12.0, ok=True))
    history.snapshots()[("time", "technical-analysis")].success_rate_10

Every record also lands in the backend's all-intents history (intent ``"*"``), used when an intent
has no history of its own.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
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

    def record(self, backend: str, intent: str, rec: CallRecord) -> None:
        for key in ((backend, intent), (backend, ANY_INTENT)):
            dq = self._hist.get(key)
            if dq is None:
                dq = self._hist[key] = deque(maxlen=self.window)
            dq.append(rec)

    def snapshots(self) -> dict[tuple[str, str], PerfSnapshot]:
        return {key: summarize(key[0], key[1], dq) for key, dq in self._hist.items()}

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
        return {"window": self.window,
                "history": [[b, i, [asdict(r) for r in dq]] for (b, i), dq in self._hist.items()]}

    @classmethod
    def load(cls, data: dict[str, Any], window: int) -> PerformanceHistory:
        history = cls(window)
        for backend, intent, records in data.get("history", []):
            history._hist[(backend, intent)] = deque((CallRecord(**r) for r in records), maxlen=window)
        return history
