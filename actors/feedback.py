"""The owner of an application's labelled examples, and each replica's local copy of them.

`FeedbackActor` is the one writer of `feedback.sqlite` (under `state_dir`): the application's
`BackendPool` creates it on the head node, so however often the actor restarts (`max_restarts`) or
the application is redeployed, it reopens the same file. It also keeps the decisions replicas made
recently (by request id), so feedback reaching another replica than the query did still finds them.

`FeedbackView` is a replica's side (the router core's `LearningView`): decisions and examples are
buffered and sent without waiting; the examples come back as a local `ExampleIndex`, refreshed
every `learning.refresh_s` when the store's version changed, so the decision path makes no call.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray

from actors.background import Background
from router.cache import LRU
from router.learning.decisions import RecentDecision
from router.learning.evidence import ExampleIndex
from router.learning.examples import FEEDBACK_FILE, Example, ExampleStore
from router.settings import LearningSettings

log = logging.getLogger("mcp_router.feedback")
_FLUSH_S = 0.2
_LATEST = 1000



class FeedbackOwner:
    def __init__(self, path: str, settings: LearningSettings) -> None:
        self.store = ExampleStore(path, settings.max_examples_per_capability)
        # A decision holds its question's vector (1.5 KB with MiniLM) and up to 2,000 characters of it: 50,000
        # of them are at most about 300 MB.
        self._decisions: LRU[str, RecentDecision] = LRU(50_000, ttl_s=settings.decision_ttl_s, fair=True)
        self._latest: deque[RecentDecision] = deque(maxlen=_LATEST)  # for the operators' list, newest last
        log.info("feedback store %s: %d examples", path, self.store.count())

    async def remember(self, decisions: list[RecentDecision]) -> None:
        for d in decisions:
            self._decisions.put(d.request_id, d, owner=d.principal or "")  # a flood pushes out its own
            self._latest.append(d)

    async def latest(self, limit: int) -> list[dict[str, Any]]:
        """The newest decisions of every replica, newest first, as rows (no vectors)."""
        return [d.row() for d in list(self._latest)[::-1][:limit]]

    async def decision(self, request_id: str) -> RecentDecision | None:
        return self._decisions.get(request_id)

    async def add(self, examples: list[Example]) -> list[Example]:
        return await asyncio.to_thread(self.store.add, examples)

    async def snapshot(self, known_version: int) -> tuple[int, list[Example] | None]:
        """The store's version and, when it differs from the caller's, every example."""
        version = self.store.version
        if version == known_version:
            return version, None
        return version, await asyncio.to_thread(self.store.all)

    async def examples(self, backend: str) -> list[dict[str, Any]]:
        return [e.info() for e in await asyncio.to_thread(self.store.for_backend, backend)]

    async def delete(self, backend: str, names: list[str] | None = None) -> int:
        return await asyncio.to_thread(self.store.delete_backend, backend, names)


FeedbackActor = ray.remote(FeedbackOwner)


def create_feedback_actor(state_dir: str, settings: LearningSettings) -> Any:
    # On the head node: its disk holds state_dir across actor restarts and redeploys (a worker node,
    # and its disk, may go away with the autoscaler).
    return FeedbackActor.options(
        num_cpus=0, max_restarts=-1, max_task_retries=-1, max_concurrency=32, enable_task_events=False,
        resources={"node:__internal_head__": 0.001},
    ).remote(str(Path(state_dir) / FEEDBACK_FILE), settings)


class FeedbackView:
    def __init__(self, settings: LearningSettings, actor: Any, min_confidence: float = 0.0) -> None:
        """`min_confidence`: `routing.min_confidence`, below which retrieval counts as unsure."""
        self.settings = settings
        self.actor = actor
        self.min_confidence = min_confidence
        self._index = ExampleIndex([], settings, min_confidence)
        self._version = -1
        self._recent: LRU[str, RecentDecision] = LRU(10_000, ttl_s=settings.decision_ttl_s, fair=True)
        self._decisions: list[RecentDecision] = []
        self._examples: list[Example] = []
        self._background = Background()

    # -- LearningView (the request path: local reads, buffered writes) ------------------------

    def index(self) -> ExampleIndex:
        return self._index

    def remember(self, decision: RecentDecision) -> None:
        self._recent.put(decision.request_id, decision, owner=decision.principal or "")
        self._decisions.append(decision)

    def learn(self, examples: Sequence[Example]) -> None:
        self._examples.extend(examples)

    # -- feedback and operators (awaited) ---------------------------------------------------------

    async def decision(self, request_id: str) -> RecentDecision | None:
        local = self._recent.get(request_id)
        if local is not None:
            return local
        return await asyncio.wait_for(self.actor.decision.remote(request_id), 10)

    async def add(self, examples: list[Example]) -> list[Example]:
        stored: list[Example] = await asyncio.wait_for(self.actor.add.remote(examples), 10)
        await self.refresh()  # this replica sees its own feedback at once; the others within refresh_s
        return stored

    async def examples(self, backend: str) -> list[dict[str, Any]]:
        return await asyncio.wait_for(self.actor.examples.remote(backend), 10)

    async def latest(self, limit: int) -> list[dict[str, Any]]:
        await self.flush()  # this replica's own decisions first
        return await asyncio.wait_for(self.actor.latest.remote(limit), 10)

    async def delete(self, backend: str, names: list[str] | None = None) -> int:
        deleted: int = await asyncio.wait_for(self.actor.delete.remote(backend, names), 10)
        await self.refresh()
        return deleted

    # -- background ----------------------------------------------------------------------------

    async def refresh(self) -> None:
        version, examples = await asyncio.wait_for(self.actor.snapshot.remote(self._version), 10)
        if examples is not None:  # a second or more at a hundred thousand examples: off the event loop
            self._index = await asyncio.to_thread(ExampleIndex, examples, self.settings, self.min_confidence)
        self._version = version

    async def flush(self) -> None:
        if self._decisions:
            batch, self._decisions = self._decisions, []
            self.actor.remember.remote(batch)  # fire and forget: the request path never waits
        if self._examples:
            examples, self._examples = self._examples, []
            self.actor.add.remote(examples)

    def start(self) -> None:
        self._background.start((self.refresh, self.settings.refresh_s), (self.flush, _FLUSH_S))

    async def stop(self) -> None:
        await self._background.stop()
        await self.flush()
