"""execute: run a plan with its strategy (fallback, parallel, hedged, consensus) within its deadline.

The strategy never raises for backend faults: every call becomes an attempt in the chain, each
outcome is recorded for the performance history, and the hedge delay comes from that history.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from router.literals import EmbedFn
from router.request import Request
from router.settings import ResilienceSettings, RouterSettings
from router.stages.scoring import ANY_INTENT, PerfSnapshot
from router.strategies import STRATEGIES, Executor, StrategyContext, StrategyResult
from router.strategies.base import ChargedExecutor
from router.telemetry import TRACER, record_step
from router.values import CallContext, CallOutcome, Decision, Plan, PlannedCall

RecordFn = Callable[[str, str, CallOutcome, str | None], None]  # backend, intent, outcome, caller
_HEDGE_HISTORY = 5  # calls a history needs before its percentiles set the hedge delay


def hedge_delay_ms(perf: Mapping[tuple[str, str], PerfSnapshot], backend: str, intent: str,
                   res: ResilienceSettings) -> float:
    """How long a call to `backend` runs before it is hedged: its p95 for this intent, or over every intent
    while this one has too few calls (a backend's speed is mostly its own); while the backend has too few
    calls of any kind, the longest delay among the backends that have enough (a constant default let a
    new backend's slow call run hundreds of milliseconds where every backend answers in tens); with no
    history anywhere, the default."""
    snap = next((s for s in (perf.get((backend, intent)), perf.get((backend, ANY_INTENT)))
                 if s is not None and s.count >= _HEDGE_HISTORY), None)
    if snap is not None:
        return _delay(snap, res)
    others = [_delay(s, res) for (_, i), s in perf.items() if i == ANY_INTENT and s.count >= _HEDGE_HISTORY]
    return max(others) if others else min(res.hedge_default_delay_ms, res.hedge_max_delay_ms)


def _delay(snap: PerfSnapshot, res: ResilienceSettings) -> float:
    # The p95, but no more than three medians: when over 5% of calls are slow the p95 is the slow
    # tail itself, and hedging only after it would never help.
    delay = min(snap.p95_latency_ms, 3 * snap.p50_latency_ms) if snap.p50_latency_ms else snap.p95_latency_ms
    return min(max(delay, res.hedge_min_delay_ms), res.hedge_max_delay_ms)


class Execution:
    """The execute stage, with what stays the same from one request to the next: the settings, each
    backend's timeout, the executor the calls go through, the embedder (consensus compares answers) and
    the performance history (read for hedge delays, written with every outcome)."""

    def __init__(self, settings: RouterSettings, executor: Executor, embed: EmbedFn | None, *,
                 perf: Callable[[], Mapping[tuple[str, str], PerfSnapshot]], record: RecordFn) -> None:
        self.settings = settings
        self.executor = executor
        self.embed = embed
        self.perf = perf
        self.record = record
        self.timeouts = {b.name: b.timeout_s for b in settings.backends}

    async def run(self, plan: Plan, decision: Decision, request: Request, started: float) -> StrategyResult:
        """Run the plan within the request's deadline (counted from `started`, monotonic); each call sent
        is charged to the request's `charge`, when it has one."""
        res = self.settings.resilience
        deadline = started + request.deadline_s
        intent = decision.intent
        perf = self.perf()
        executor = self.executor if request.charge is None else ChargedExecutor(self.executor, request.charge)

        def on_outcome(call: PlannedCall, outcome: CallOutcome) -> None:
            self.record(call.backend, intent, outcome, request.principal)

        ctx = StrategyContext(
            executor=executor, settings=res, deadline=deadline, timeout_for=lambda b: self.timeouts.get(b, 30.0),
            call=CallContext(question=request.question, intent=intent, session_id=request.session,
                             parameters=request.parameters, principal=request.principal),
            hedge_delay_ms=lambda backend: hedge_delay_ms(perf, backend, intent, res), on_outcome=on_outcome,
            embed=self.embed, on_step=record_step, started=time.monotonic())
        with TRACER.start_as_current_span(f"router.strategy.{plan.mode}") as span:
            span.set_attribute("router.mode", plan.mode)
            result = await STRATEGIES[plan.mode](plan.calls, ctx)
            span.set_attribute("router.attempts", len(result.attempts))
        return result
