"""Router.route: the decision alone (a dry run), with every score component."""

from __future__ import annotations

import pytest

from router.errors import (
    UnknownIntent,
)
from router.models import RouteRequest
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from tests.unit.helpers import embed_texts
from tests.unit.router_world import BOTH_CLOCKS, ONLY_TIME, UNRELATED, route, world

# --- /route: the decision alone ---------------------------------------------------------------


async def test_route_is_a_dry_run_that_explains_candidates_and_calls_nothing() -> None:
    w = world()
    resp = await route(w.router, RouteRequest(question=BOTH_CLOCKS))
    assert resp.decision == "route"
    assert resp.method == "hybrid"
    assert [(c.rank, c.backend) for c in resp.candidates[:2]] == [(1, "time"), (2, "clock")]
    top = resp.candidates[0].scores
    assert top.dense > 0 and top.bm25 > 0 and top.hybrid == 1.0
    assert top.health == 1.0 and top.perf == 0.5
    assert top.composite == pytest.approx(0.5 * top.match + 0.3 * top.health + 0.2 * top.perf, abs=1e-4)
    assert w.executor.calls == []
    assert w.stats.recorded == []


async def test_route_reports_no_match_without_raising() -> None:
    resp = await route(world().router, RouteRequest(question=UNRELATED))
    assert resp.decision == "no_match"
    assert resp.candidates  # the closest ones are still listed


async def test_route_k_bounds_are_at_least_the_fanout() -> None:
    resp = await route(world().router, RouteRequest(question=BOTH_CLOCKS, k=1))
    # fallback, parallel and consensus may use 3 candidates, so the decision keeps at least 3
    assert len(resp.candidates) == 3


async def test_intent_override_is_reported_and_an_unknown_one_rejected() -> None:
    w = world()
    resp = await route(w.router, RouteRequest(question=BOTH_CLOCKS, intent="technical-analysis"))
    assert (resp.intent, resp.intent_source) == ("technical-analysis", "override")
    with pytest.raises(UnknownIntent):
        await route(w.router, RouteRequest(question=BOTH_CLOCKS, intent="astrology"))


async def test_backend_intent_bonus_lifts_the_declaring_backend() -> None:
    w = world(
        settings={"routing": {"intent_bonus": 1.0}},
        backend_options={"clock": {"intents": ["technical-analysis"]}},
    )
    resp = await route(w.router, RouteRequest(question=BOTH_CLOCKS, intent="technical-analysis"))
    assert resp.candidates[0].backend == "clock"
    assert resp.candidates[0].scores.intent_bonus == 1.0


async def test_query_vectors_are_embedded_once_per_question() -> None:
    w = world()
    await route(w.router, RouteRequest(question=ONLY_TIME))
    await route(w.router, RouteRequest(question=ONLY_TIME))
    assert w.embedded == [[ONLY_TIME]]


async def test_a_repeated_question_reuses_its_retrieval_until_the_index_changes() -> None:
    w = world()
    first = await route(w.router, RouteRequest(question=ONLY_TIME))
    again = await route(w.router, RouteRequest(question=ONLY_TIME))
    assert [c.capability for c in again.candidates] == [c.capability for c in first.candidates]
    # Health still counts on a cache hit: it is live state, not part of the cached analysis.
    w.stats.health["time"] = "down"
    down = await route(w.router, RouteRequest(question=ONLY_TIME))
    assert next(c for c in down.candidates if c.backend == "time").scores.health == 0.0
    # A new index (here: without the time server) drops the cached results.
    index = w.router.index
    assert index is not None
    catalogs = [c for c in index.texts.catalogs if c.backend != "time"]
    texts = CatalogTexts.build(catalogs)
    w.router.set_catalogs(catalogs, CatalogIndex(texts, embed_texts(texts.tool_dense),
                                                 embed_texts(texts.server_dense), w.router.settings.routing))
    after = await route(w.router, RouteRequest(question=ONLY_TIME))
    assert "time" not in {c.backend for c in after.candidates}
    assert w.embedded == [[ONLY_TIME]]
