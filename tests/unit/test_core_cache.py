"""Router.query's cache of answers: served only when every candidate is down, and never for what may act."""

from __future__ import annotations

from dataclasses import replace

import pytest

from router.errors import BackendUnavailable, ToolFailed
from router.models import QueryRequest
from tests.unit.fake_executor import fail
from tests.unit.helpers import small_catalogs
from tests.unit.router_world import ONLY_TIME, answers, query, world


async def test_cached_response_is_served_only_when_every_candidate_backend_is_unavailable() -> None:
    w = world()
    first = await query(w.router, QueryRequest(question=ONLY_TIME))
    assert first.routing is not None and first.routing.cached is False
    # Still healthy: the backend is called again (and its failure is reported, not masked by the cache).
    w.executor.script["time"] = fail("tool_failed", "temporarily broken")
    with pytest.raises(ToolFailed):
        await query(w.router, QueryRequest(question=ONLY_TIME))
    assert w.executor.called == ["time", "time"]
    # Down: the cached answer is served, marked as cached, and nothing is called.
    w.stats.health["time"] = "down"
    again = await query(w.router, QueryRequest(question="  what TIME is it in tokyo?  "))
    assert again.answer == first.answer and again.backend == "time"
    assert again.routing is not None and again.routing.cached is True
    assert again.routing.chosen is not None and again.routing.chosen.backend == "time"
    assert again.routing.attempts == []
    assert w.executor.called == ["time", "time"]


async def test_the_answer_of_a_capability_that_may_act_is_never_served_from_the_cache() -> None:
    acting = [replace(c, capabilities=tuple(replace(x, read_only=False) for x in c.capabilities))
              for c in small_catalogs()]
    w = world(catalogs=acting)
    await query(w.router, QueryRequest(question=ONLY_TIME))
    w.stats.health["time"] = "down"
    w.executor.script["time"] = fail("backend_unavailable", "connection refused")
    with pytest.raises(BackendUnavailable):  # tried, not answered with "done" for what was not done now
        await query(w.router, QueryRequest(question=ONLY_TIME))
    assert w.executor.called == ["time", "time"]


async def test_an_answer_kept_while_its_tool_only_read_is_not_served_once_the_tool_says_it_may_act() -> None:
    from router.retrieval.catalog import CatalogIndex, CatalogTexts
    from tests.unit.helpers import embed_texts

    w = world()
    await query(w.router, QueryRequest(question=ONLY_TIME))  # kept: the tool only read
    acting = [replace(c, capabilities=tuple(replace(x, read_only=False) for x in c.capabilities))
              for c in small_catalogs()]
    texts = CatalogTexts.build(acting)
    w.router.set_catalogs(acting, CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense),
                                               w.router.settings.routing))
    w.stats.health["time"] = "down"
    w.executor.script["time"] = fail("backend_unavailable", "connection refused")
    with pytest.raises(BackendUnavailable):
        await query(w.router, QueryRequest(question=ONLY_TIME))
    assert w.executor.called == ["time", "time"]


async def test_without_a_cached_response_a_down_backend_is_still_tried() -> None:
    w = world(answers(time=fail("backend_unavailable", "connection refused")))
    w.stats.health["time"] = "down"
    with pytest.raises(BackendUnavailable):
        await query(w.router, QueryRequest(question=ONLY_TIME))
    assert [(c.backend, c.force) for c in w.executor.calls] == [("time", True)]
