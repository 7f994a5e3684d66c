"""Two replicas' views of one feedback owner, the actor calls made in-process (no Ray)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actors.feedback import FeedbackOwner, FeedbackView
from deployments.caller import Caller
from deployments.service import RouterService
from router.errors import UnknownBackend
from router.learning.decisions import RecentDecision
from router.learning.examples import Example
from router.security.identity import Principal
from router.security.policy import Access
from router.settings import LearningSettings, Policy, RouterSettings
from router.values import Capability, Catalog
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


async def test_an_operator_whose_policy_covers_part_of_a_backend_deletes_and_reads_only_that_part(
        tmp_path: Path) -> None:
    settings = LearningSettings()
    handle = InProcessHandle(FeedbackOwner(str(tmp_path / "feedback.sqlite"), settings))
    view = FeedbackView(settings, handle)
    vector = embed_texts(["q"])[0]
    await view.add([Example(backend="time", kind="tool", name=n, label=1, question="q", vector=vector)
                    for n in ("now", "convert")])
    report = {"backends": {"time": 3, "secret": 2}}
    tools = tuple(Capability(backend="time", name=n) for n in ("now", "convert"))
    catalog = Catalog(backend="time", version="1", description="", capabilities=tools)
    router = SimpleNamespace(catalogs={"time": catalog}, visible_backends=lambda access: ["time"])
    perf = SimpleNamespace(get_loadtest=SimpleNamespace(remote=lambda: asyncio.sleep(0, report)))
    service = RouterService(settings=RouterSettings(), router=router, learning=view,  # type: ignore[arg-type]
                            perf_actor=perf, directory=None, selector=None, chat_service=None,  # type: ignore[arg-type]
                            limiter=None, metrics=None, query_embed=None)  # type: ignore[arg-type]
    ops = Caller(Access(Principal("ops", "ops", "api_key"), Policy(stats=True, allow=["time/now"])))
    assert (await service.delete_examples("time", ops))["deleted"] == 1
    assert [e["name"] for e in await view.examples("time")] == ["convert"]  # not the operator's to delete
    assert (await service.loadtest(ops)) == {"backends": {"time": 3}}  # whoever ran it saw more


async def test_the_examples_of_a_backend_no_longer_configured_can_be_cleared_by_an_operator_of_everything(
        tmp_path: Path) -> None:
    # they kept speaking (diluting the learned default) and every delete was a 404 "unknown backend"
    settings = LearningSettings()
    view = FeedbackView(settings, InProcessHandle(FeedbackOwner(str(tmp_path / "feedback.sqlite"), settings)))
    await view.add([Example(backend="oldsearch", kind="tool", name="search", label=1, question="q",
                            vector=embed_texts(["q"])[0])])
    router = SimpleNamespace(catalogs={}, visible_backends=lambda access: [])
    service = RouterService(settings=RouterSettings(), router=router, learning=view,  # type: ignore[arg-type]
                            perf_actor=None, directory=None, selector=None, chat_service=None,  # type: ignore[arg-type]
                            limiter=None, metrics=None, query_embed=None)  # type: ignore[arg-type]
    partial = Caller(Access(Principal("ops", "ops", "api_key"), Policy(stats=True, allow=["time/*"])))
    with pytest.raises(UnknownBackend):
        await service.delete_examples("oldsearch", partial)
    everything = Caller(Access(Principal("root", "operator", "api_key"), Policy(stats=True)))
    assert (await service.delete_examples("oldsearch", everything))["deleted"] == 1
