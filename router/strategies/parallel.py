"""parallel: send to the top k backends at once; the first success wins and the rest are cancelled.

Cancelling a loser cancels its Ray call, which cancels the MCP request (the backend receives
`notifications/cancelled`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from router.strategies.base import (
    StrategyContext,
    StrategyResult,
    attempt,
    cancel_all,
    distinct_backends,
)
from router.values import PlannedCall


async def run(calls: Sequence[PlannedCall], ctx: StrategyContext) -> StrategyResult:
    chosen = distinct_backends(calls, ctx.settings.parallel_k)
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
