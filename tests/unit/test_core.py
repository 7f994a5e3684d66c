"""Router.query: the decision executed by a strategy, its errors, its metadata and caches."""

from __future__ import annotations

from dataclasses import replace

import pytest

from router.errors import (
    AllBackendsFailed,
    AmbiguousRoute,
    ArgumentsRequired,
    BackendTimeout,
    BackendUnavailable,
    DeadlineExceeded,
    NoRelevantBackend,
    ToolFailed,
    UnknownBackend,
    UnknownCapability,
)
from router.models import QueryRequest, RouteRequest
from router.request import Request
from router.stages.scoring import PerfSnapshot
from router.values import Capability, Catalog
from tests.unit.fake_executor import fail, ok, timeout
from tests.unit.helpers import catalog, small_catalogs
from tests.unit.router_world import BOTH_CLOCKS, ONLY_TIME, UNRELATED, answers, query, route, world

# --- /query: decision and execution -----------------------------------------------------------


async def test_query_calls_the_best_backend_with_derived_arguments() -> None:
    w = world()
    resp = await query(w.router, QueryRequest(question=ONLY_TIME))
    assert (resp.answer, resp.backend, resp.capability, resp.kind) == (
        "answer from time",
        "time",
        "get_current_time",
        "tool",
    )
    assert w.executor.calls[0].arguments == {"timezone": "Asia/Tokyo"}
    meta = resp.routing
    assert meta is not None
    assert meta.arguments == {"timezone": "Asia/Tokyo"} and meta.arguments_source == "extracted: timezone"
    assert meta.chosen is not None and meta.chosen.backend == "time"
    assert [(a.backend, a.outcome) for a in meta.attempts] == [("time", "success")]
    assert (meta.mode, meta.decision, meta.cached, meta.fallbacks_used) == ("fallback", "route", False, 0)
    assert [(b, i, o.ok) for b, i, o in w.stats.recorded] == [("time", meta.intent, True)]


async def test_routing_metadata_can_be_left_out() -> None:
    resp = await query(world().router, QueryRequest(question=ONLY_TIME, include_routing_metadata=False))
    assert resp.routing is None and resp.answer == "answer from time"


async def test_no_relevant_match_raises_listing_the_closest_candidates() -> None:
    w = world()
    with pytest.raises(NoRelevantBackend) as info:
        await query(w.router, QueryRequest(question=UNRELATED))
    closest = info.value.details["candidates"]
    assert 1 <= len(closest) <= 3
    assert {"backend", "capability", "scores"} <= set(closest[0])
    assert info.value.status_code == 404
    assert w.executor.calls == []


async def test_fallback_takes_the_second_backend_when_the_first_times_out() -> None:
    w = world(answers(time=timeout()))
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    assert resp.backend == "clock"
    assert resp.routing is not None
    assert [(a.backend, a.outcome) for a in resp.routing.attempts] == [
        ("time", "timeout"),
        ("clock", "success"),
    ]
    assert resp.routing.fallbacks_used == 1
    assert [(b, o.ok) for b, _, o in w.stats.recorded] == [("time", False), ("clock", True)]


async def test_all_backends_failing_raises_with_the_attempt_chain() -> None:
    w = world(answers(time=fail("tool_failed", "bad zone"), clock=timeout()))
    with pytest.raises(AllBackendsFailed) as info:
        await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    err = info.value
    assert err.status_code == 502
    chain = [(a["backend"], a["capability"], a["outcome"]) for a in err.details["attempts"]]
    assert chain == [("time", "get_current_time", "error"), ("clock", "world_clock", "timeout")]
    assert "time/get_current_time (error)" in err.message and "clock/world_clock (timeout)" in err.message


async def test_a_single_timeout_raises_backend_timeout_naming_backend_and_tool() -> None:
    w = world(answers(calc=timeout()))
    with pytest.raises(BackendTimeout) as info:
        await query(w.router, QueryRequest(question="add 3 and 4"))
    err = info.value
    assert err.status_code == 504
    assert (err.details["backend"], err.details["tool"]) == ("calc", "add")
    assert "'calc'" in err.message and "'add'" in err.message
    assert len(err.details["attempts"]) == 1


async def test_a_single_tool_error_raises_tool_failed() -> None:
    w = world(answers(calc=fail("tool_failed", "division by zero")))
    with pytest.raises(ToolFailed, match="division by zero"):
        await query(w.router, QueryRequest(question="add 3 and 4"))


async def test_arguments_that_cannot_be_derived_raise_for_the_top_candidate() -> None:
    w = world()
    with pytest.raises(ArgumentsRequired) as info:
        await query(w.router, QueryRequest(question="What time is it"))
    assert info.value.details["tool"] == "get_current_time"
    assert w.executor.calls == []


async def test_caller_arguments_are_passed_through() -> None:
    w = world()
    resp = await query(w.router, QueryRequest(question="What time is it", arguments={"timezone": "UTC"}))
    assert w.executor.calls[0].arguments == {"timezone": "UTC"}
    assert resp.routing is not None and resp.routing.arguments_source == "caller"


async def test_explicit_backend_override_is_used_even_when_it_ranks_lower() -> None:
    w = world()
    resp = await query(w.router, QueryRequest(question=ONLY_TIME, backend="clock"))
    assert resp.backend == "clock"
    assert w.executor.called == ["clock"]
    assert resp.routing is not None and resp.routing.decision == "override"


async def test_explicit_backend_and_tool_pick_that_tool() -> None:
    w = world()
    resp = await query(w.router, QueryRequest(question="add 2 and 3", backend="calc", tool="multiply"))
    assert (resp.backend, resp.capability) == ("calc", "multiply")
    assert w.executor.calls[0].arguments == {"a": 2.0, "b": 3.0}


async def test_a_named_tool_is_found_however_far_below_the_dense_recall_it_ranks() -> None:
    w = world(settings={"routing": {"dense_top_n": 1}})  # a backend of more tools than the dense half recalls
    resp = await query(w.router, QueryRequest(question="add 2 and 3", backend="calc", tool="multiply"))
    assert (resp.backend, resp.capability) == ("calc", "multiply")


async def test_unknown_backend_or_tool_override_is_rejected() -> None:
    w = world()
    with pytest.raises(UnknownBackend) as info:
        await query(w.router, QueryRequest(question=ONLY_TIME, backend="sundial"))
    assert info.value.status_code == 404
    with pytest.raises(UnknownCapability):
        await query(w.router, QueryRequest(question=ONLY_TIME, backend="calc", tool="divide"))
    assert w.executor.calls == []


async def test_override_of_a_down_backend_raises_backend_unavailable() -> None:
    w = world()
    w.stats.health["clock"] = "down"
    with pytest.raises(BackendUnavailable) as info:
        await query(w.router, QueryRequest(question=BOTH_CLOCKS, backend="clock"))
    err = info.value
    assert err.status_code == 503
    assert err.details["backend"] == "clock"
    assert (
        "down" in err.message
        and "connection refused" in err.message
        and "fallback_on_override" in err.message
    )
    assert w.executor.calls == []


async def test_override_of_a_down_backend_falls_back_when_allowed() -> None:
    w = world()
    w.stats.health["clock"] = "down"
    resp = await query(w.router,
        QueryRequest(question=BOTH_CLOCKS, backend="clock", fallback_on_override=True)
    )
    assert resp.backend == "time"
    assert "clock" not in w.executor.called


async def test_fallback_on_override_with_a_named_tool_falls_back_only_to_its_copies() -> None:
    # The caller named clock's world_clock; time's get_current_time is another tool, which the caller did not
    # name and routing would have had to judge on its own: it is not called in its place.
    w = world()
    w.stats.health["clock"] = "down"
    request = QueryRequest(question=BOTH_CLOCKS, backend="clock", tool="world_clock", fallback_on_override=True)
    resp = await query(w.router, request)  # nothing else may answer for it: the caller's backend, tried anyway
    assert resp.backend == "clock" and w.executor.called == ["clock"]
    copy = replace(w.router.catalogs["clock"].capabilities[0], backend="echo")  # echo serves a copy of it
    w = world(catalogs=[*small_catalogs()[:3], catalog("echo", "world clock service", copy)])
    w.stats.health["clock"] = "down"
    resp = await query(w.router, request)
    assert (resp.backend, resp.capability) == ("echo", "world_clock")


async def test_fallback_on_override_only_falls_back_to_relevant_candidates() -> None:
    # The overridden calculator is down and the one relevant backend fails: the echo server, which would
    # take any question as free text, must not be called in its place.
    w = world(answers(time=fail("tool_failed")))
    w.stats.health["calc"] = "down"
    with pytest.raises(ToolFailed):
        await query(w.router, QueryRequest(question=ONLY_TIME, backend="calc", fallback_on_override=True))
    assert w.executor.called == ["time"]


async def test_down_backends_are_skipped_while_another_candidate_is_up() -> None:
    w = world()
    w.stats.health["time"] = "down"
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    assert resp.backend == "clock"
    assert w.executor.called == ["clock"]
    assert w.executor.calls[0].force is False


async def test_when_every_candidate_is_down_they_are_still_tried_with_force() -> None:
    w = world()
    w.stats.health.update(time="ejected", clock="down")
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    assert resp.backend == "time"
    assert [(c.backend, c.force) for c in w.executor.calls] == [("time", True)]


async def test_the_callers_backend_is_tried_first_whether_or_not_others_may_follow() -> None:
    # With fallback allowed, the named backend's weak match was skipped for the routed one, while the decision
    # said "chosen by the caller".
    for fallback in (False, True):
        w = world(answers(echo=ok("echoed")))
        resp = await query(w.router, QueryRequest(question=ONLY_TIME, backend="echo", fallback_on_override=fallback))
        assert resp.backend == "echo" and w.executor.called == ["echo"]


async def test_a_session_sticks_to_the_backend_that_served_it() -> None:
    w = world()
    await query(w.router, QueryRequest(question=BOTH_CLOCKS, backend="clock", session_id="s1"))
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS, session_id="s1"))
    assert resp.backend == "clock"
    assert resp.routing is not None and resp.routing.decision == "session"
    other = await query(w.router, QueryRequest(question=BOTH_CLOCKS, session_id="s2"))
    assert other.backend == "time"


async def test_a_session_does_not_stick_to_a_down_backend() -> None:
    w = world()
    await query(w.router, QueryRequest(question=BOTH_CLOCKS, backend="clock", session_id="s1"))
    w.stats.health["clock"] = "down"
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS, session_id="s1"))
    assert resp.backend == "time"


async def test_the_caller_may_lower_the_deadline_but_not_raise_it() -> None:
    w = world(settings={"resilience": {"deadline_s": 20.0}}, backend_options={"time": {"timeout_s": 120.0}})
    await query(w.router, QueryRequest(question=ONLY_TIME, deadline_s=500.0))
    assert 19.0 < w.executor.calls[-1].timeout_s <= 20.0
    await query(w.router, QueryRequest(question=ONLY_TIME, deadline_s=2.0))
    assert 1.0 < w.executor.calls[-1].timeout_s <= 2.0


async def test_a_deadline_that_passes_before_any_call_is_a_504_not_a_backend_failure() -> None:
    w = world()
    with pytest.raises(DeadlineExceeded) as info:
        await query(w.router, QueryRequest(question=ONLY_TIME, deadline_s=5e-324))
    assert info.value.status_code == 504 and "deadline_s" in info.value.message
    assert w.executor.calls == [] and info.value.details["attempts"] == []
    # Consensus starts its attempts at once: each is recorded as cut short by the deadline.
    with pytest.raises(DeadlineExceeded) as info:
        await query(w.router, QueryRequest(question=ONLY_TIME, deadline_s=5e-324, mode="consensus"))
    assert info.value.details["backend"] == "time" and "time/get_current_time" in info.value.message
    assert [a["error_type"] for a in info.value.details["attempts"]] == ["deadline_exceeded"]


async def test_the_backend_timeout_applies_when_shorter_than_the_deadline() -> None:
    w = world(backend_options={"time": {"timeout_s": 4.0}})
    await query(w.router, QueryRequest(question=ONLY_TIME))
    assert w.executor.calls[0].timeout_s == 4.0


async def test_the_request_mode_selects_the_strategy() -> None:
    w = world(answers(time=ok("12:00"), clock=ok("12:00")))
    resp = await query(w.router, QueryRequest(question=BOTH_CLOCKS, mode="consensus"))
    assert resp.routing is not None
    assert resp.routing.mode == "consensus"
    assert resp.routing.agreement == 1.0
    assert sorted(w.executor.called) == ["clock", "time"]


async def test_a_close_call_between_two_tools_is_ambiguous() -> None:
    w = world(settings={"routing": {"ambiguity_margin": 0.5}})
    with pytest.raises(AmbiguousRoute) as info:
        await query(w.router, QueryRequest(question=BOTH_CLOCKS))
    assert info.value.status_code == 409
    assert [c["backend"] for c in info.value.details["candidates"]] == ["time", "clock"]
    assert w.executor.calls == []
    resp = await route(w.router, RouteRequest(question=BOTH_CLOCKS))
    assert resp.decision == "ambiguous"


async def test_recent_failures_demote_a_backend_below_an_equally_relevant_one() -> None:
    w = world()
    bad = PerfSnapshot(
        backend="time",
        intent="*",
        count=10,
        success_rate_10=0.0,
        mean_latency_ms_10=5000.0,
        success_rate=0.0,
        mean_latency_ms=5000.0,
        p95_latency_ms=5000.0,
        p95_latency_ms_10=5000.0,
    )
    w.stats.snapshots[("time", "*")] = bad
    w.stats.health["time"] = "degraded"
    resp = await route(w.router, RouteRequest(question=BOTH_CLOCKS))
    # time still matches better, but its health and performance push it below clock
    assert [c.backend for c in resp.candidates[:2]] == ["clock", "time"]
    assert resp.candidates[1].scores.match > resp.candidates[0].scores.match


def server_clock_catalogs() -> list[Catalog]:
    """`clock` replaced by a server clock that needs no arguments."""
    time, _, calc, echo = small_catalogs()
    server_time = Capability(
        backend="clock",
        name="server_time",
        description="Current time of the server clock",
        input_schema={"type": "object", "properties": {}},
        read_only=True,
    )
    return [time, catalog("clock", "server clock", server_time), calc, echo]


async def test_a_close_callable_runner_up_is_called_when_the_best_match_needs_arguments() -> None:
    # "What time is it" names no time zone: get_current_time cannot be called, server_time can.
    w = world(settings={"routing": {"callable_margin": 0.2}}, catalogs=server_clock_catalogs())
    decision = await w.router.decide(Request(question="What time is it"))
    gap = decision.candidates[0].scores.composite - decision.candidates[1].scores.composite
    assert [c.capability.name for c in decision.candidates[:2]] == ["get_current_time", "server_time"]
    assert 0.1 < gap < 0.2
    resp = await query(w.router, QueryRequest(question="What time is it"))
    assert (resp.backend, resp.capability) == ("clock", "server_time")
    assert w.executor.calls[0].arguments == {}


async def test_a_distant_runner_up_is_not_called_in_place_of_the_best_match() -> None:
    w = world(settings={"routing": {"callable_margin": 0.1}}, catalogs=server_clock_catalogs())
    with pytest.raises(ArgumentsRequired) as info:
        await query(w.router, QueryRequest(question="What time is it"))
    assert info.value.details["tool"] == "get_current_time"
    assert w.executor.calls == []
