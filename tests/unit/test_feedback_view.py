"""Two replicas' views of one feedback owner, the actor calls made in-process (no Ray)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from actors.feedback import FeedbackOwner, FeedbackView
from router.learning.decisions import RecentDecision
from router.learning.examples import Example
from router.settings import LearningSettings
from tests.unit.helpers import embed_texts


class _Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.fn(*args))  # runs whether or not the caller awaits it, like Ray


class InProcessHandle:
    """An actor handle whose `.remote` calls run the owner's methods in this event loop."""

    def __init__(self, owner: FeedbackOwner) -> None:
        self.owner = owner

    def __getattr__(self, name: str) -> _Method:
        return _Method(getattr(self.owner, name))


async def test_feedback_on_one_replica_reaches_a_decision_made_on_another_and_both_see_the_examples(
        tmp_path: Path) -> None:
    settings = LearningSettings(min_similarity=0.3)
    handle = InProcessHandle(FeedbackOwner(str(tmp_path / "feedback.sqlite"), settings))
    a, b = FeedbackView(settings, handle), FeedbackView(settings, handle)
    vector = embed_texts(["what time is it in tokyo"])[0]
    a.remember(RecentDecision(request_id="r1", question="what time is it in tokyo", vector=vector,
                              chosen=("time", "tool", "now")))
    assert await b.decision("r1") is None  # not sent yet: decisions go in batches
    await a.flush()
    await asyncio.sleep(0)
    remembered = await b.decision("r1")
    assert remembered is not None and remembered.chosen == ("time", "tool", "now")

    await b.add([Example(backend="time", kind="tool", name="now", label=1, question=remembered.question,
                         vector=remembered.vector)])
    assert b.index().evidence(vector)["time/tool/now"].score > 0.9  # the replica that took it sees it at once
    assert a.index().evidence(vector) == {}
    await a.refresh()
    assert a.index().evidence(vector)["time/tool/now"].examples == 1

    a.learn([Example(backend="time", kind="tool", name="now", label=1, question="q", vector=vector,
                     source="routed")])
    await a.flush()
    for _ in range(500):  # the batch is sent without waiting: poll, with a bound
        if len(await a.examples("time")) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(await a.examples("time")) == 2 and await b.delete("time") == 2
    assert b.index().evidence(vector) == {}
