"""hedged: call the best backend; if it has not answered within a delay, also call the next.

The delay is the best backend's recent p95 latency (bounded); the first success wins and the other
call is cancelled. A failure starts the next candidate at once, so hedging never does worse than
fallback, and a backend that failed as a whole (down, timed out) is not tried again for another of its
tools. Most requests cost one call. A call is hedged only with a copy of the same capability on another
backend (a different tool's answer is a different answer, not the same one sooner), and only when it is
read-only; otherwise the next candidate waits for the first call's failure, as in fallback, and not even
then when that call may have acted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from router.strategies.base import (
    StrategyContext,
    StrategyResult,
    attempt,
    cancel_all,
    only_copies_after,
    refused_as_invalid,
    unknown_effect,
)
from router.values import CallOutcome, PlannedCall


async def run(calls: Sequence[PlannedCall], ctx: StrategyContext) -> StrategyResult:
    queue = list(calls)
    dead: set[str] = set()  # backends that failed as a whole: their other tools are not tried, as in fallback
    started = 0
    running: dict[asyncio.Future[CallOutcome], PlannedCall] = {}
    acted = None  # an idempotent call that may have acted: only its copies may follow

    def start(call: PlannedCall) -> None:
        nonlocal started
        started += 1
        running[asyncio.ensure_future(attempt(ctx, call))] = call

    try:
        while True:
            queue = [c for c in queue if c.backend not in dead and (acted is None or c.capability.same_as(acted))]
            more = bool(queue) and started < ctx.settings.max_attempts
            if not running:
                if not more:
                    break
                start(queue.pop(0))
                more = bool(queue) and started < ctx.settings.max_attempts
            current = next(iter(running.values()))
            hedge = (more and current.capability.read_only and queue[0].capability.read_only
                     and queue[0].capability.same_as(current.capability))
            delay = ctx.hedge_delay_ms(current.backend) / 1000 if hedge else None
            if delay is not None:
                delay = min(delay, max(ctx.remaining(), 0))
            done, _ = await asyncio.wait(running, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                call = queue.pop(0)
                ctx.step("hedge", backend=call.backend, capability=call.capability.name,
                         delay_ms=round((delay or 0) * 1000, 1))
                start(call)
                continue
            for t in done:
                call = running.pop(t)
                outcome = t.result()
                if outcome.ok:
                    await cancel_all(list(running))
                    return StrategyResult(outcome=outcome, call=call, attempts=ctx.attempts)
                if (reason := unknown_effect(call, outcome)) is not None:
                    return StrategyResult(outcome=None, call=None, attempts=ctx.attempts, not_retried=reason)
                if refused_as_invalid(outcome):
                    return StrategyResult(outcome=None, call=None, attempts=ctx.attempts)
                acted = acted or only_copies_after(call, outcome)
                if outcome.error_kind is not None and outcome.error_kind.backend_level:
                    dead.add(call.backend)
            if ctx.remaining() <= 0:
                break
    finally:
        await cancel_all(list(running))
    return StrategyResult(outcome=None, call=None, attempts=ctx.attempts)
