"""FairSlots: a backend's `max_concurrency` call slots, shared fairly among the principals calling it.

    slots = FairSlots(64)
    async with slots.held("alice"):      # waits while all 64 are taken
        outcome = await backend.call(...)

A plain semaphore hands freed slots out first come, first served, so one caller with a flood of slow
calls queues every other caller behind the whole flood. Here, while calls wait, a freed slot goes to the
waiting principal that holds the fewest (the longest waiting among equals): another caller waits for
one call of the flood to end, not for all of them. A caller alone still gets every slot, and callers
without a name (anonymous) share one turn.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from router.errors import BackendBusy, DeadlineExceeded


class NoSlot(DeadlineExceeded):
    """Every slot stayed taken for the whole of the call's time: it was never sent. Neither the caller's
    fault nor the backend's, and no answer to count against either."""


class FairSlots:
    def __init__(self, limit: int, max_waiting: int | None = None) -> None:
        """`max_waiting`: calls that may wait at once (default four times `limit`, at least 64); one more is
        refused, never sent: each waiting call holds a place in its host, which its other backends' calls need."""
        self.limit = limit
        self.max_waiting = max(4 * limit, 64) if max_waiting is None else max_waiting
        self._held: Counter[str] = Counter()
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}  # in the order each began to wait

    @property
    def in_use(self) -> int:
        return sum(self._held.values())

    @asynccontextmanager
    async def held(self, principal: str | None, wait_s: float | None = None) -> AsyncIterator[None]:
        """A slot for the block; waiting for one at most `wait_s` (then `NoSlot`)."""
        key = principal or ""
        if self._waiting or self.in_use >= self.limit:
            if sum(map(len, self._waiting.values())) >= self.max_waiting:
                raise BackendBusy(f"all {self.limit} of the backend's call slots are taken and {self.max_waiting} "
                                  "calls already wait for one; the call was not sent")
            turn = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(key, deque()).append(turn)
            try:
                async with asyncio.timeout(wait_s):
                    await turn
            except (asyncio.CancelledError, TimeoutError) as exc:
                if turn.done() and not turn.cancelled():
                    self._release(key)  # given a slot just as the wait was cancelled: hand it on
                else:
                    self._forget(key, turn)
                if isinstance(exc, TimeoutError):
                    raise NoSlot(f"all {self.limit} of the backend's call slots stayed taken for {wait_s:.1f} s; "
                                 "the call was not sent") from None
                raise
        else:
            self._held[key] += 1
        try:
            yield
        finally:
            self._release(key)

    def _release(self, key: str) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self.in_use < self.limit:
            key = min(self._waiting, key=lambda k: self._held[k])  # ties: the first to have waited
            queue = self._waiting.pop(key)
            turn = queue.popleft()
            if queue:
                self._waiting[key] = queue  # to the back: among equals the others go first
            if not turn.done():
                self._held[key] += 1
                turn.set_result(None)

    def _forget(self, key: str, turn: asyncio.Future[None]) -> None:
        queue = self._waiting.get(key)
        if queue is not None and turn in queue:
            queue.remove(turn)
            if not queue:
                del self._waiting[key]
        self._grant()
