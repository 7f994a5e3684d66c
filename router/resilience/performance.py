"""Per (backend, intent) call history in bounded deques, and the snapshots the router scores with.

    history = PerformanceHistory(window=100)
    history.record("time", "technical-analysis", CallRecord(ts=..., latency_ms=12.0, ok=True))
    history.snapshots()[("time", "technical-analysis")].success_rate_10

Every record also lands in the backend's all-intents history (intent ``"*"``), used when an intent
has no history of its own.

The history is every caller's, and no caller's alone. A caller's own calls can make a backend slow or
time out for it (a long operation it asked for, a flood of them) without the backend failing anyone
else, so each record carries its caller, and:
- when the window is full, a new record pushes out the oldest record of the caller holding the most, so
  one caller's flood replaces its own records rather than everyone else's;
- with several callers in the window, each figure of the snapshot is the median of the callers' own, so
  one caller among three or more moves nothing, and one of two moves it half-way.
Callers the router cannot tell apart (`caller` None: no authentication) are one caller, as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
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
    caller: str | None = None


def summarize(backend: str, intent: str, records: Iterable[CallRecord]) -> PerfSnapshot:
    """The snapshot of `records` (oldest first): of all of them when one caller made them, else each figure
    the median of the callers' own."""
    by_caller: dict[str | None, list[CallRecord]] = {}
    for r in records:
        by_caller.setdefault(r.caller, []).append(r)
    return _of_callers(backend, intent, list(by_caller.values()))


def _of_callers(backend: str, intent: str, groups: list[list[CallRecord]]) -> PerfSnapshot:
    """`summarize` of records already grouped by caller, each group oldest first."""
    if len(groups) <= 1:
        return _summary(backend, intent, groups[0] if groups else [])
    parts = [_summary(backend, intent, rs) for rs in groups]
    return PerfSnapshot(backend=backend, intent=intent, count=sum(map(len, groups)), **{
        name: float(np.median([getattr(p, name) for p in parts])) for name in _FIGURES})


_FIGURES = ("success_rate_10", "mean_latency_ms_10", "success_rate", "mean_latency_ms", "p95_latency_ms",
            "p95_latency_ms_10", "p50_latency_ms")


def _summary(backend: str, intent: str, items: list[CallRecord]) -> PerfSnapshot:
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


class _Window:
    """One (backend, intent)'s records, per caller, at most `size` in all."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.by_caller: dict[str | None, deque[CallRecord]] = {}
        self.count = 0

    def add(self, rec: CallRecord) -> None:
        self.by_caller.setdefault(rec.caller, deque()).append(rec)
        self.count += 1
        while self.count > self.size:
            # The caller holding the most gives up its oldest (the earliest among equals).
            fullest = max(self.by_caller.items(), key=lambda kv: (len(kv[1]), -kv[1][0].ts))[0]
            held = self.by_caller[fullest]
            held.popleft()
            self.count -= 1
            if not held:
                del self.by_caller[fullest]

    def records(self) -> list[CallRecord]:
        """Oldest first."""
        if len(self.by_caller) == 1:
            return list(next(iter(self.by_caller.values())))
        return sorted((r for rs in self.by_caller.values() for r in rs), key=lambda r: r.ts)


class PerformanceHistory:
    def __init__(self, window: int = 100) -> None:
        self.window = window
        self._hist: dict[tuple[str, str], _Window] = {}
        # Summaries are kept, and only those of histories recorded to since are computed again: replicas
        # read every one each second, and at a thousand backends computing them all took a quarter second.
        self._summaries: dict[tuple[str, str], PerfSnapshot] = {}
        self._changed: set[tuple[str, str]] = set()

    def record(self, backend: str, intent: str, rec: CallRecord) -> None:
        for key in ((backend, intent), (backend, ANY_INTENT)):
            window = self._hist.get(key)
            if window is None:
                window = self._hist[key] = _Window(self.window)
            window.add(rec)
            self._changed.add(key)

    def snapshots(self) -> dict[tuple[str, str], PerfSnapshot]:
        for key in self._changed:
            groups = [list(rs) for rs in self._hist[key].by_caller.values()]  # no merge: grouped already
            self._summaries[key] = _of_callers(key[0], key[1], groups)
        self._changed.clear()
        return dict(self._summaries)

    def recent(self, key: tuple[str, str], n: int = 30) -> list[list[Any]]:
        """The last `n` calls as [time, latency ms, ok], oldest first (the console's charts)."""
        return [[round(r.ts, 3), round(r.latency_ms, 2), r.ok] for r in self._records(key)[-n:]]

    def _records(self, key: tuple[str, str]) -> list[CallRecord]:
        window = self._hist.get(key)
        return [] if window is None else window.records()

    def errors(self, key: tuple[str, str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self._records(key):
            if not r.ok:
                kind = r.error_type or "error"
                out[kind] = out.get(kind, 0) + 1
        return out

    def dump(self) -> dict[str, Any]:
        """Records as [ts, latency_ms, ok, error_type, caller] lists: a fifth of the time of one object each."""
        return {"window": self.window,
                "history": [[b, i, [[r.ts, r.latency_ms, r.ok, r.error_type, r.caller] for r in w.records()]]
                            for (b, i), w in self._hist.items()]}

    @classmethod
    def load(cls, data: dict[str, Any], window: int) -> PerformanceHistory:
        """What `dump` wrote (records as lists, without a caller as written before, or as objects)."""
        history = cls(window)
        for backend, intent, records in data.get("history", []):
            kept = history._hist[(backend, intent)] = _Window(window)
            for r in records:
                kept.add(CallRecord(**r) if isinstance(r, dict) else CallRecord(*r))
            history._changed.add((backend, intent))
        return history
