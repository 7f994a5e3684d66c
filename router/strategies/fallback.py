"""fallback (default): try candidates in composite-score order; the first success wins.

A backend that failed as a whole (down, timed out) is not tried again for another of its tools. A call
that may have acted (it was sent and timed out, lost its connection or failed in the server) to a
capability not safe to repeat ends the request: trying another backend could do the same thing twice. So
does a request the backend refused as invalid: it is the caller's to fix.
"""

from __future__ import annotations

from collections.abc import Sequence

from router.strategies.base import (
    StrategyContext,
    StrategyResult,
    attempt,
    only_copies_after,
    refused_as_invalid,
    unknown_effect,
)
from router.values import PlannedCall


async def run(calls: Sequence[PlannedCall], ctx: StrategyContext) -> StrategyResult:
    dead: set[str] = set()
    tried = 0
    acted = None  # an idempotent call that may have acted: only its copies may follow
    for call in calls:
        if tried >= ctx.settings.max_attempts or ctx.remaining() <= 0:
            break
        if call.backend in dead or (acted is not None and not call.capability.same_as(acted)):
            continue
        if tried:
            ctx.step("fallback", backend=call.backend, capability=call.capability.name, attempt=tried + 1)
        tried += 1
        outcome = await attempt(ctx, call)
        if outcome.ok:
            return StrategyResult(outcome=outcome, call=call, attempts=ctx.attempts)
        if (reason := unknown_effect(call, outcome)) is not None:
            return StrategyResult(outcome=None, call=None, attempts=ctx.attempts, not_retried=reason)
        if refused_as_invalid(outcome):
            break
        acted = acted or only_copies_after(call, outcome)
        if outcome.error_kind is not None and outcome.error_kind.backend_level:
            dead.add(call.backend)
    return StrategyResult(outcome=None, call=None, attempts=ctx.attempts)
