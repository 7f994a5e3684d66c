"""Steps a replica repeats in the background (refreshing a local copy, flushing what it batched), each
on its own interval; a step that fails is logged and tried again at its next turn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("mcp_router.background")

Step = Callable[[], Awaitable[Any]]


class Background:
    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, *steps: tuple[Step, float]) -> None:
        self._tasks = [asyncio.create_task(_every(step, seconds)) for step, seconds in steps]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []


async def _every(step: Step, seconds: float) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            await step()
        except Exception:  # the loop outlives any one failed step; the next one tries again
            log.exception("background step %s failed", getattr(step, "__qualname__", step))
