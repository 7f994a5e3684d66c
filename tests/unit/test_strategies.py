from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from router.models import AttemptInfo, ScoreBreakdown
from router.settings import ResilienceSettings
from router.stages.respond import failure_error
from router.strategies import STRATEGIES, StrategyContext
from router.strategies.base import StrategyResult, fan_out
from router.values import CallContext, Candidate, Capability, PlannedCall
from tests.unit.fake_executor import ScriptedExecutor, after, fail, ok, then_set, timeout, unavailable


def plan(*specs: str, arguments: dict[str, Any] | None = None) -> list[PlannedCall]:
    """`plan("a", "b/tool2", "c!")`: one call per backend[/tool], in ranking order; read-only capabilities,
    but for those marked `!` (they may act, and are not safe to repeat)."""
    out = []
    for spec in specs:
        backend, _, name = spec.removesuffix("!").partition("/")
        cap = Capability(backend=backend, name=name or "tool", read_only=not spec.endswith("!"))
        out.append(
            PlannedCall(
                candidate=Candidate(cap, ScoreBreakdown(), True),
                arguments=arguments or {},
                arguments_source="test",
            )
        )
    return out


@dataclass
class Harness:
    executor: ScriptedExecutor
    ctx: StrategyContext
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    outcomes: list[tuple[str, bool, str | None]] = field(default_factory=list)


def harness(
    executor: ScriptedExecutor,
    *,
    deadline_s: float = 10.0,
    hedge_ms: float = 10_000.0,
    timeout_s: float = 5.0,
    embed: Any = None,
    **settings: Any,
) -> Harness:
    h = Harness(executor, None)  # type: ignore[arg-type]
    h.ctx = StrategyContext(
        executor=executor,
        settings=ResilienceSettings(**settings),
        call=CallContext(question="what is the answer", intent="general"),
        deadline=time.monotonic() + deadline_s,
        timeout_for=lambda b: timeout_s,
        hedge_delay_ms=lambda b: hedge_ms,
        on_outcome=lambda c, o: h.outcomes.append((c.backend, o.ok, o.error_kind)),
        embed=embed,
        on_step=lambda name, attrs: h.steps.append((name, attrs)),
    )
    return h


def chain(h: Harness) -> list[tuple[str, str]]:
    return [(a.backend, a.outcome) for a in h.ctx.attempts]


# --- fallback -------------------------------------------------------------------------------


async def test_fallback_returns_the_first_success_without_calling_the_rest() -> None:
    h = harness(ScriptedExecutor({"a": ok("A"), "b": ok("B")}))
    result = await STRATEGIES["fallback"](plan("a", "b"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "A"
    assert result.call is not None and result.call.backend == "a"
    assert h.executor.called == ["a"]
    assert chain(h) == [("a", "success")]


async def test_fallback_takes_the_next_candidate_when_the_first_errors() -> None:
    h = harness(ScriptedExecutor({"a": fail("tool_failed"), "b": ok("B")}))
    result = await STRATEGIES["fallback"](plan("a", "b"), h.ctx)
    assert result.outcome is not None and result.outcome.backend == "b"
    assert chain(h) == [("a", "error"), ("b", "success")]
    assert h.ctx.attempts[0].error_type == "tool_failed"
    assert h.outcomes == [("a", False, "tool_failed"), ("b", True, None)]
    assert [name for name, _ in h.steps] == ["fallback"]
    assert h.steps[0][1]["backend"] == "b" and h.steps[0][1]["attempt"] == 2


async def test_fallback_takes_the_second_backend_when_the_first_times_out() -> None:
    h = harness(ScriptedExecutor({"a": timeout(), "b": ok("B")}))
    result = await STRATEGIES["fallback"](plan("a", "b"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "B"
    assert chain(h) == [("a", "timeout"), ("b", "success")]


async def test_fallback_skips_other_tools_of_a_backend_that_failed_as_a_whole() -> None:
    h = harness(ScriptedExecutor({"a": unavailable(), "b": ok("B")}))
    result = await STRATEGIES["fallback"](plan("a/t1", "a/t2", "b/t3"), h.ctx)
    assert result.call is not None and result.call.capability.name == "t3"
    assert [(c.backend, c.capability) for c in h.executor.calls] == [("a", "t1"), ("b", "t3")]
    assert chain(h) == [("a", "unavailable"), ("b", "success")]


async def test_fallback_tries_another_tool_of_a_backend_whose_tool_failed() -> None:
    h = harness(ScriptedExecutor({"a": fail("tool_failed"), "b": ok("B")}), max_attempts=3)
    await STRATEGIES["fallback"](plan("a/t1", "a/t2", "b/t3"), h.ctx)
    assert [c.capability for c in h.executor.calls] == ["t1", "t2", "t3"]


async def test_fallback_stops_after_max_attempts() -> None:
    h = harness(ScriptedExecutor({"a": fail(), "b": fail(), "c": ok("C")}), max_attempts=2)
    result = await STRATEGIES["fallback"](plan("a", "b", "c"), h.ctx)
    assert result.outcome is None and result.call is None
    assert h.executor.called == ["a", "b"]
    assert chain(h) == [("a", "error"), ("b", "error")]


async def test_fallback_makes_no_attempt_after_the_deadline() -> None:
    h = harness(ScriptedExecutor({"a": ok("A")}), deadline_s=-1.0)
    result = await STRATEGIES["fallback"](plan("a"), h.ctx)
    assert result.outcome is None
    assert h.executor.calls == []


async def test_an_attempt_gets_the_smaller_of_backend_timeout_and_remaining_deadline() -> None:
    h = harness(ScriptedExecutor({"a": ok("A"), "b": ok("B")}), deadline_s=2.0, timeout_s=30.0)
    await STRATEGIES["fallback"](plan("a"), h.ctx)
    assert 1.0 < h.executor.calls[0].timeout_s <= 2.0
    h2 = harness(ScriptedExecutor({"b": ok("B")}), deadline_s=60.0, timeout_s=3.0)
    await STRATEGIES["fallback"](plan("b"), h2.ctx)
    assert h2.executor.calls[0].timeout_s == 3.0


async def test_planned_arguments_force_and_request_context_reach_the_executor() -> None:
    h = harness(ScriptedExecutor({"a": ok("A")}))
    call = plan("a", arguments={"timezone": "Asia/Tokyo"})[0]
    forced = PlannedCall(candidate=call.candidate, arguments=call.arguments, arguments_source="x", force=True)
    await STRATEGIES["fallback"]([forced], h.ctx)
    sent = h.executor.calls[0]
    assert sent.arguments == {"timezone": "Asia/Tokyo"}
    assert sent.force is True
    assert sent.context.question == "what is the answer"


# --- parallel -------------------------------------------------------------------------------


async def test_parallel_returns_the_fast_one_and_cancels_the_slow_one() -> None:
    executor = ScriptedExecutor({"fast": ok("quick answer")})
    executor.hang("slow")
    h = harness(executor)
    result = await STRATEGIES["parallel"](plan("slow", "fast"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "quick answer"
    assert result.call is not None and result.call.backend == "fast"
    assert executor.cancelled == ["slow"]  # the slow coroutine saw CancelledError
    assert sorted(chain(h)) == [("fast", "success"), ("slow", "cancelled")]
    assert h.outcomes == [("fast", True, None)]  # a cancelled loser is not scored as a failure
    assert h.steps == [("parallel", {"backends": ["slow", "fast"]})]


async def test_parallel_waits_past_a_failure_for_a_later_success() -> None:
    gate = asyncio.Event()
    h = harness(ScriptedExecutor({"a": then_set(gate, fail()), "b": after(gate, ok("B"))}))
    result = await STRATEGIES["parallel"](plan("b", "a"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "B"
    assert chain(h) == [("a", "error"), ("b", "success")]


async def test_parallel_fans_out_to_k_distinct_backends() -> None:
    h = harness(ScriptedExecutor({"a": fail(), "b": fail(), "c": fail()}), parallel_k=2)
    result = await STRATEGIES["parallel"](plan("a/t1", "a/t2", "b", "c"), h.ctx)
    assert result.outcome is None
    assert sorted(h.executor.called) == ["a", "b"]
    assert sorted(chain(h)) == [("a", "error"), ("b", "error")]


def test_fan_out_keeps_the_best_call_per_backend_in_order() -> None:
    calls = plan("a/t1", "b/t1", "a/t2", "c/t1")
    assert [(c.backend, c.capability.name) for c in fan_out(calls, 5)] == [
        ("a", "t1"),
        ("b", "t1"),
        ("c", "t1"),
    ]
    assert [c.backend for c in fan_out(calls, 2)] == ["a", "b"]


def test_fan_out_leaves_out_calls_that_may_act_and_is_empty_when_the_best_one_may() -> None:
    assert [c.backend for c in fan_out(plan("a", "b!", "c"), 3)] == ["a", "c"]
    assert fan_out(plan("a!", "b", "c"), 3) == []
    idempotent = PlannedCall(candidate=Candidate(Capability(backend="d", name="set", idempotent=True),
                                                 ScoreBreakdown(), True), arguments={}, arguments_source="test")
    assert fan_out([idempotent, *plan("e")], 3) == []  # repeating it is harmless; a runner-up beside it is not


async def test_parallel_runs_one_call_at_a_time_when_the_best_capability_may_act() -> None:
    h = harness(ScriptedExecutor({"a": fail(), "b": ok("B"), "c": ok("C")}))
    result = await STRATEGIES["parallel"](plan("a!", "b", "c"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "B"
    assert h.executor.called == ["a", "b"]  # in order, as fallback: a reported its failure, b answered
    assert [name for name, _ in h.steps] == ["one_at_a_time", "fallback"]


async def test_consensus_asks_one_backend_when_the_best_capability_may_act() -> None:
    h = harness(ScriptedExecutor({"a": ok("x"), "b": ok("x"), "c": ok("x")}))
    result = await STRATEGIES["consensus"](plan("a!", "b", "c"), h.ctx)
    assert result.outcome is not None and h.executor.called == ["a"]
    assert result.agreement is None


async def test_fallback_stops_after_a_call_that_may_have_acted() -> None:
    # A backend that failed in the call, or answered what the router would not pass on, may have acted too.
    for failure in (timeout(), unavailable(), fail("backend_failed"), fail("answer_too_large")):
        h = harness(ScriptedExecutor({"a": failure, "b": ok("B")}))
        result = await STRATEGIES["fallback"](plan("a!", "b"), h.ctx)
        assert result.outcome is None and h.executor.called == ["a"]
        assert result.not_retried is not None and "a/tool may have acted" in result.not_retried
        error = failure_error(result)
        assert result.not_retried in error.message and error.details["backend"] == "a"


@pytest.mark.parametrize("mode", ["fallback", "hedged"])
async def test_after_an_idempotent_call_that_may_have_acted_only_its_copies_are_tried(mode: str) -> None:
    # Repeating "set the thermostat to eco" is safe; setting the lights' scene instead is another action.
    def setter(backend: str, name: str) -> PlannedCall:
        return PlannedCall(candidate=Candidate(Capability(backend=backend, name=name, idempotent=True),
                                               ScoreBreakdown(), True), arguments={}, arguments_source="test")

    h = harness(ScriptedExecutor({"thermo": timeout(), "lights": ok("L"), "thermo2": ok("T")}))
    calls = [setter("thermo", "set_mode"), setter("lights", "set_scene"), setter("thermo2", "set_mode")]
    result = await STRATEGIES[mode](calls, h.ctx)
    assert h.executor.called == ["thermo", "thermo2"] and result.outcome is not None and result.outcome.text == "T"


@pytest.mark.parametrize("mode", ["fallback", "hedged"])
async def test_a_request_a_backend_refuses_as_invalid_is_the_callers_400_and_no_other_backend_runs_it(
        mode: str) -> None:
    h = harness(ScriptedExecutor({"a": fail("invalid_request", "tweaks may not set a session_id"), "b": ok("B")}))
    result = await STRATEGIES[mode](plan("a", "b"), h.ctx)
    assert result.outcome is None and h.executor.called == ["a"]
    error = failure_error(result)
    assert error.status_code == 400 and "tweaks may not set a session_id" in error.message


@pytest.mark.parametrize(("kind", "status"), [("backend_rejected_arguments", 422), ("answer_too_large", 502),
                                              ("flow_not_found", 502), ("backend_unauthorized", 502)])
def test_a_lone_failed_attempt_keeps_its_own_kind_and_status(kind: str, status: int) -> None:
    attempt = AttemptInfo(backend="b", capability="t", outcome="error", latency_ms=1, started_ms=0,
                          error_type=kind, error="x")
    error = failure_error(StrategyResult(outcome=None, call=None, attempts=[attempt]))
    assert (error.kind.value, error.status_code, error.details["backend"]) == (kind, status, "b")


async def test_fallback_goes_on_after_a_call_that_was_refused_or_answered_with_an_error() -> None:
    refused = ScriptedExecutor({"a": unavailable(), "b": ok("B")})

    async def refuse(capability: Capability, arguments: dict[str, Any], *, timeout_s: float, context: Any,
                     force: bool = False) -> Any:
        outcome = await ScriptedExecutor.call(refused, capability, arguments, timeout_s=timeout_s,
                                              context=context, force=force)
        return outcome if outcome.ok else replace(outcome, sent=False)  # ejected: never sent

    refused.call = refuse  # type: ignore[method-assign]
    for executor in (refused, ScriptedExecutor({"a": fail(), "b": ok("B")})):
        h = harness(executor)
        result = await STRATEGIES["fallback"](plan("a!", "b"), h.ctx)
        assert result.outcome is not None and result.outcome.text == "B" and result.not_retried is None


# --- hedged ---------------------------------------------------------------------------------


async def test_hedged_sends_the_second_call_only_after_the_delay() -> None:
    executor = ScriptedExecutor({"backup": ok("from backup")})
    executor.hang("primary")
    h = harness(executor, hedge_ms=60.0)
    result = await STRATEGIES["hedged"](plan("primary", "backup"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "from backup"
    first, second = executor.calls
    assert (first.backend, second.backend) == ("primary", "backup")
    assert second.started - first.started >= 0.055
    assert executor.cancelled == ["primary"]
    assert [name for name, _ in h.steps] == ["hedge"]
    assert h.steps[0][1]["delay_ms"] == 60.0
    assert sorted(chain(h)) == [("backup", "success"), ("primary", "cancelled")]


async def test_hedged_does_not_send_a_second_call_when_the_first_answers_quickly() -> None:
    h = harness(ScriptedExecutor({"a": ok("A"), "b": ok("B")}), hedge_ms=10_000.0)
    result = await STRATEGIES["hedged"](plan("a", "b"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "A"
    assert h.executor.called == ["a"]
    assert h.steps == []


async def test_hedged_races_only_copies_of_one_capability_not_another_tool() -> None:
    executor = ScriptedExecutor({"primary": ok("from primary"), "other": ok("from another tool")})
    gate = asyncio.Event()

    async def slow(call: Any) -> Any:
        await gate.wait()
        return await ok("from primary")(call)

    executor.script["primary"] = slow
    h = harness(executor, hedge_ms=20.0)
    task = asyncio.ensure_future(STRATEGIES["hedged"](plan("primary", "other/another_tool"), h.ctx))
    await asyncio.sleep(0.1)  # far past the hedge delay: a copy would have been sent
    gate.set()
    result = await task
    assert result.outcome is not None and result.outcome.text == "from primary"
    assert executor.called == ["primary"] and h.steps == []


async def test_hedged_starts_the_next_candidate_at_once_when_the_first_fails() -> None:
    h = harness(ScriptedExecutor({"a": fail(), "b": ok("B")}), hedge_ms=10_000.0)
    result = await STRATEGIES["hedged"](plan("a", "b"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "B"
    a, b = h.executor.calls
    assert b.started - a.started < 1.0  # far less than the 10 s hedge delay
    assert chain(h) == [("a", "error"), ("b", "success")]


async def test_hedged_never_hedges_a_call_that_may_act_nor_retries_it_after_a_timeout() -> None:
    async def slow_timeout(call: Any) -> Any:
        await asyncio.sleep(0.2)
        return await timeout()(call)

    executor = ScriptedExecutor({"primary": slow_timeout, "backup": ok("B")})
    h = harness(executor, hedge_ms=20.0)
    result = await STRATEGIES["hedged"](plan("primary!", "backup"), h.ctx)
    assert result.outcome is None and executor.called == ["primary"]
    assert h.steps == [] and result.not_retried is not None
    # The first call only reads, but the hedge may act: it waits for the first call's failure.
    h = harness(ScriptedExecutor({"primary": slow_timeout, "backup": ok("B")}), hedge_ms=20.0)
    result = await STRATEGIES["hedged"](plan("primary", "backup!"), h.ctx)
    assert result.outcome is not None and result.outcome.text == "B"
    first, second = h.executor.calls
    assert second.started - first.started >= 0.19  # after the first call's failure, not the 20 ms delay


async def test_hedged_returns_nothing_when_every_candidate_fails() -> None:
    h = harness(ScriptedExecutor({"a": fail(), "b": timeout(), "c": fail()}), max_attempts=2)
    result = await STRATEGIES["hedged"](plan("a", "b", "c"), h.ctx)
    assert result.outcome is None
    assert chain(h) == [("a", "error"), ("b", "timeout")]


async def test_hedged_skips_other_tools_of_a_backend_that_failed_as_a_whole_as_fallback_does() -> None:
    # it spent every attempt on the timed-out backend's other tools and failed where fallback answered
    h = harness(ScriptedExecutor({"a": timeout(), "b": ok("B")}), max_attempts=3)
    result = await STRATEGIES["hedged"](plan("a/t1", "a/t2", "a/t3", "b/t9"), h.ctx)
    assert result.call is not None and result.call.capability.name == "t9"
    assert [(c.backend, c.capability) for c in h.executor.calls] == [("a", "t1"), ("b", "t9")]
