from __future__ import annotations

import json

import pytest

from router.resilience.performance import CallRecord, PerformanceHistory, summarize
from router.stages.scoring import ANY_INTENT


def rec(ms: float, ok: bool = True, error_type: str | None = None, ts: float = 0.0) -> CallRecord:
    return CallRecord(ts=ts, latency_ms=ms, ok=ok, error_type=error_type)


def test_each_record_lands_in_its_intent_and_in_the_all_intents_history() -> None:
    h = PerformanceHistory(window=100)
    h.record("time", "technical-analysis", rec(10))
    h.record("time", "general", rec(30, ok=False))
    snaps = h.snapshots()
    assert set(snaps) == {("time", "technical-analysis"), ("time", "general"), ("time", ANY_INTENT)}
    assert snaps[("time", "technical-analysis")].count == 1
    assert snaps[("time", ANY_INTENT)].count == 2
    assert snaps[("time", ANY_INTENT)].success_rate == 0.5
    assert snaps[("time", ANY_INTENT)].mean_latency_ms == 20.0


def test_history_is_bounded_by_the_window() -> None:
    h = PerformanceHistory(window=12)
    for i in range(30):
        h.record("a", "general", rec(float(i)))
    snap = h.snapshots()[("a", "general")]
    assert snap.count == 12
    # only the newest 12 (18..29) remain
    assert snap.mean_latency_ms == pytest.approx(sum(range(18, 30)) / 12)


def test_snapshot_separates_the_last_ten_calls_from_the_whole_window() -> None:
    records = [rec(1000.0, ok=False)] * 10 + [rec(100.0, ok=True)] * 10
    snap = summarize("a", "general", records)
    assert snap.count == 20
    assert snap.success_rate_10 == 1.0
    assert snap.mean_latency_ms_10 == 100.0
    assert snap.success_rate == 0.5
    assert snap.mean_latency_ms == 550.0
    assert snap.p95_latency_ms == 1000.0
    assert snap.p95_latency_ms_10 == 100.0


def test_snapshot_of_no_records_is_neutral() -> None:
    snap = summarize("a", "general", [])
    assert (snap.count, snap.success_rate_10, snap.mean_latency_ms) == (0, 1.0, 0.0)
    assert snap.score == 0.5


def test_errors_are_counted_by_type() -> None:
    h = PerformanceHistory()
    h.record("a", "general", rec(1, ok=False, error_type="backend_timeout"))
    h.record("a", "general", rec(1, ok=False, error_type="backend_timeout"))
    h.record("a", "general", rec(1, ok=False))
    h.record("a", "general", rec(1, ok=True))
    assert h.errors(("a", "general")) == {"backend_timeout": 2, "error": 1}
    assert h.errors(("missing", "general")) == {}


def test_dump_and_load_round_trip_through_json() -> None:
    h = PerformanceHistory(window=50)
    for i in range(15):
        h.record(
            "a",
            "code-review",
            rec(float(i * 10), ok=i % 3 != 0, error_type=None if i % 3 else "tool_failed", ts=100.0 + i),
        )
    h.record("b", "general", rec(5.0))
    data = json.loads(json.dumps(h.dump()))
    restored = PerformanceHistory.load(data, window=50)
    assert restored.snapshots() == h.snapshots()
    assert restored.errors(("a", "code-review")) == h.errors(("a", "code-review"))


def test_load_applies_the_new_window() -> None:
    h = PerformanceHistory(window=50)
    for i in range(20):
        h.record("a", "general", rec(float(i)))
    restored = PerformanceHistory.load(h.dump(), window=10)
    assert restored.snapshots()[("a", "general")].count == 10
    restored.record("a", "general", rec(99.0))
    assert restored.snapshots()[("a", "general")].count == 10


def test_snapshots_after_more_records_equal_those_computed_afresh() -> None:
    h = PerformanceHistory(window=20)
    for i in range(30):
        h.record(f"b{i % 3}", "general", rec(float(i), ok=i % 4 != 0))
    h.snapshots()
    h.record("b1", "general", rec(500.0, ok=False))  # only b1's histories changed since
    fresh = PerformanceHistory.load(h.dump(), window=20).snapshots()
    assert h.snapshots() == fresh and fresh[("b1", "general")].success_rate_10 < 1.0


def test_a_snapshot_saved_with_records_as_objects_still_loads() -> None:
    h = PerformanceHistory(window=50)
    h.record("a", "general", rec(7.0, ok=False, error_type="backend_timeout", ts=100.0))
    old = {"window": 50, "history": [["a", "general", [{"ts": 100.0, "latency_ms": 7.0, "ok": False,
                                                         "error_type": "backend_timeout"}]]]}
    restored = PerformanceHistory.load(old, window=50)
    assert restored.snapshots()[("a", "general")] == h.snapshots()[("a", "general")]


# -- one caller's calls among everyone's --------------------------------------------------------------


def by(caller: str | None, ms: float, ok: bool = True, ts: float = 0.0) -> CallRecord:
    return CallRecord(ts=ts, latency_ms=ms, ok=ok, error_type=None if ok else "backend_timeout", caller=caller)


def test_one_callers_flood_of_slow_failing_calls_moves_nothing_among_several_callers() -> None:
    h = PerformanceHistory(window=30)
    for i in range(10):
        h.record("a", "general", by("alice", 20.0, ts=i))
        h.record("a", "general", by("bob", 30.0, ts=i))
    before = h.snapshots()[("a", "general")]
    for i in range(10, 210):  # mallory's calls time out: a long operation she asked for
        h.record("a", "general", by("mallory", 30_000.0, ok=False, ts=i))
    after = h.snapshots()[("a", "general")]
    assert before.success_rate_10 == 1.0 and before.mean_latency_ms_10 == 25.0
    # The median of three callers is one of the two she is not.
    assert after.success_rate_10 == 1.0 and after.mean_latency_ms_10 == 30.0 and after.score > 0.99
    # Her flood pushed out her own records, not theirs: she holds a third of the window.
    assert after.count == 30 and h.errors(("a", "general")) == {"backend_timeout": 10}


def test_one_of_two_callers_moves_the_history_half_way() -> None:
    h = PerformanceHistory(window=30)
    for i in range(10):
        h.record("a", "general", by("alice", 20.0, ts=i))
    for i in range(10, 60):
        h.record("a", "general", by("mallory", 30_000.0, ok=False, ts=i))
    snap = h.snapshots()[("a", "general")]
    assert snap.success_rate_10 == 0.5 and snap.count == 30 and h.errors(("a", "general")) == {"backend_timeout": 20}


def test_a_backend_that_fails_everyone_falls_whoever_calls_it() -> None:
    h = PerformanceHistory(window=60)
    for i in range(30):
        h.record("a", "general", by(("alice", "bob", "carol")[i % 3], 20.0, ts=i))
    for i in range(30, 60):
        h.record("a", "general", by(("alice", "bob", "carol")[i % 3], 5000.0, ok=False, ts=i))
    snap = h.snapshots()[("a", "general")]
    assert snap.success_rate_10 == 0.0 and snap.success_rate == 0.5 and snap.score == 0.0


def test_one_caller_alone_is_summarised_as_before() -> None:
    records = [by("alice", float(i), ok=i % 3 != 0, ts=i) for i in range(25)]
    anonymous = [CallRecord(r.ts, r.latency_ms, r.ok, r.error_type) for r in records]
    assert summarize("a", "general", records) == summarize("a", "general", anonymous)


def test_callers_survive_a_dump_and_load_and_a_caller_less_snapshot_still_loads() -> None:
    h = PerformanceHistory(window=30)
    for i in range(5):
        h.record("a", "general", by("alice", 10.0, ts=i))
        h.record("a", "general", by("mallory", 9000.0, ok=False, ts=i))
        h.record("a", "general", by("bob", 12.0, ts=i))
    restored = PerformanceHistory.load(json.loads(json.dumps(h.dump())), window=30)
    assert restored.snapshots() == h.snapshots() and restored.snapshots()[("a", "general")].success_rate == 1.0
    old = {"window": 30, "history": [["a", "general", [[1.0, 7.0, True, None], [2.0, 9.0, False, "backend_timeout"]]]]}
    assert PerformanceHistory.load(old, window=30).snapshots()[("a", "general")].success_rate == 0.5
