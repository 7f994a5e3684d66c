"""parallel: send to the top k backends at once; the first success wins and the rest are cancelled.

Cancelling a loser cancels its Ray call, which cancels the MCP request (the backend receives
`notifications/cancelled`). Only read-only capabilities are called at once: when the best one may act,
the request runs as fallback, one call at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from router.strategies.base import (
    StrategyContext,
    StrategyResult,
    attempt,
    cancel_all,
    fan_out,
)
from router.strategies.fallback import run as one_at_a_time
from router.values import PlannedCall


async def run(calls: Sequence[PlannedCall], ctx: StrategyContext) -> StrategyResult:
    chosen = fan_out(calls, ctx.settings.parallel_k)
    if not chosen:
        ctx.step("one_at_a_time", capability=calls[0].capability.name if calls else None)
        return await one_at_a_time(calls, ctx)
    ctx.step("parallel", backends=[c.backend for c in chosen])
    tasks = {asyncio.ensure_future(attempt(ctx, c)): c for c in chosen}
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                outcome = t.result()
                if outcome.ok:
                    await cancel_all(list(pending))
                    return StrategyResult(outcome=outcome, call=tasks[t], attempts=ctx.attempts)
    finally:
        await cancel_all(list(pending))
    return StrategyResult(outcome=None, call=None, attempts=ctx.attempts)
