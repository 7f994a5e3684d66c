"""Execution strategies, one module each; a request picks one with ``mode``.

    result = await STRATEGIES["hedged"](planned_calls, ctx)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from router.strategies import consensus, fallback, hedged, parallel
from router.strategies.base import Executor, StrategyContext, StrategyResult
from router.values import PlannedCall

Strategy = Callable[[Sequence[PlannedCall], StrategyContext], Awaitable[StrategyResult]]

STRATEGIES: dict[str, Strategy] = {
    "fallback": fallback.run,
    "parallel": parallel.run,
    "hedged": hedged.run,
    "consensus": consensus.run,
}

__all__ = ["STRATEGIES", "Executor", "Strategy", "StrategyContext", "StrategyResult"]
