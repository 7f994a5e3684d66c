"""Catalogs of descriptions only: backends that list no tools are routed by their own documents."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from router.core import Router
from router.errors import BackendNotCallable
from router.models import QueryRequest, RouteRequest
from router.request import Request
from router.retrieval.catalog import CatalogIndex, CatalogTexts, server_level_capability
from router.settings import RouterSettings, RoutingSettings
from router.values import Catalog
from tests.unit.fake_executor import ScriptedExecutor, ok
from tests.unit.helpers import catalog, embed_texts, small_catalogs
from tests.unit.router_world import Stats, query, route

AGENTS = {
    "weather-agent": "Forecasts and current weather conditions: rain, temperature and wind for any city.",
    "recipes-agent": "Cooking recipes, ingredients and baking instructions for bread, cakes and dinners.",
    "travel-agent": "Books flights and hotels, plans trips and itineraries between cities.",
    "stocks-agent": "Stock market quotes, share prices and company earnings reports.",
}


def described(name: str, description: str) -> Catalog:
    return Catalog(backend=name, version="1", description=description, capabilities=())


def agents() -> list[Catalog]:
    return [described(n, d) for n, d in AGENTS.items()]


def index_of(catalogs: list[Catalog], flow_targets: dict[str, str] | None = None,
             settings: RoutingSettings | None = None) -> CatalogIndex:
    texts = CatalogTexts.build(catalogs, flow_targets)
    return CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense),
                        settings or RoutingSettings())


@pytest.mark.parametrize("method", ["flat", "two_level"])
@pytest.mark.parametrize(("question", "expected"), [
    ("will it rain in Paris tomorrow", "weather-agent"),
    ("a recipe for sourdough bread", "recipes-agent"),
    ("book a hotel and a flight to Rome", "travel-agent"),
    ("what is the share price of ACME", "stocks-agent"),
])
def test_servers_without_tools_are_ranked_by_their_own_descriptions(method: str, question: str,
                                                                   expected: str) -> None:
    index = index_of(agents())
    qvec = embed_texts([question])[0]
    servers = index.rank_servers(question, qvec, 3, method=method)
    assert servers and servers[0].backend == expected


def test_a_backend_with_neither_tools_nor_description_is_not_routable() -> None:
    assert server_level_capability(described("blank", "  ")) is None
    texts = CatalogTexts.build([described("blank", ""), *agents()])
    assert "blank" not in {c.backend for c in texts.capabilities}


def test_backends_with_tools_get_no_stand_in_and_keep_their_documents() -> None:
    cats = small_catalogs()
    assert CatalogTexts.build(cats).capabilities == tuple(c for cat in cats for c in cat.capabilities)


def test_a_described_backend_competes_with_tools_in_a_mixed_catalog() -> None:
    mixed = [*small_catalogs(), described("recipes-agent", AGENTS["recipes-agent"])]
    index = index_of(mixed)
    question = "a recipe for sourdough bread with a long proof"
    top = index.search(question, embed_texts([question])[0], 3)[0]
    assert top.capability.backend == "recipes-agent" and top.capability.server_level
    question = "What time is it in Tokyo?"
    assert index.search(question, embed_texts([question])[0], 3)[0].capability.backend == "time"


def router_for(catalogs: list[Catalog], flow_targets: dict[str, str] | None = None,
               backends: list[dict] | None = None) -> tuple[Router, ScriptedExecutor]:
    # The fake embeddings carry no meaning the confidence model could read: every match counts here.
    settings = RouterSettings.model_validate({"backends": backends or [
        {"name": c.backend, "kind": "mcp_stdio", "command": "srv"} for c in catalogs],
        "routing": {"min_confidence": 0.0}})

    async def embed(texts: list[str]) -> np.ndarray:
        return embed_texts(texts)

    executor = ScriptedExecutor({c.backend: ok(f"answer from {c.backend}") for c in catalogs})
    router = Router(settings, executor=executor, embed=embed, stats=Stats())
    router.set_catalogs(catalogs, index_of(catalogs, flow_targets, settings.routing))
    return router, executor


async def test_a_chosen_mcp_server_without_tools_is_refused_by_name_and_nothing_is_called() -> None:
    router, executor = router_for(agents())
    dry = await route(router, RouteRequest(question="will it rain in Paris tomorrow"))
    assert dry.decision == "route" and dry.candidates[0].backend == "weather-agent"
    with pytest.raises(BackendNotCallable) as raised:
        await query(router, QueryRequest(question="will it rain in Paris tomorrow"))
    assert "weather-agent" in raised.value.message and raised.value.status_code == 503
    assert raised.value.details["backend"] == "weather-agent"
    assert executor.calls == []


async def test_a_chosen_flow_backend_without_listed_flows_runs_its_configured_flow_on_the_question() -> None:
    # Flows that only answer say so (`read_only: true`): a flow otherwise counts as acting, which needs the
    # router to be surer than this question makes it.
    flows = dataclasses.replace(described("flows", "Flowise assistants: customer support answers about orders, "
                                                   "refunds and returns."), read_only=True)
    cats = [flows, *agents()]
    backends = [{"name": "flows", "kind": "flowise", "url": "http://127.0.0.1:1", "flows": [{"id": "abc-123"}],
                 "read_only": True},
                *({"name": n, "kind": "mcp_stdio", "command": "srv"} for n in AGENTS)]
    router, executor = router_for(cats, {"flows": "abc-123"}, backends)
    question = "how do I get a refund for my order"
    top = (await router.decide(Request(question=question))).candidates[0].capability
    assert (top.backend, top.kind, top.target) == ("flows", "flow", "abc-123")
    answer = await query(router, QueryRequest(question=question))
    assert answer.backend == "flows" and answer.answer == "answer from flows"
    call = executor.calls[0]
    assert call.backend == "flows" and call.context.question == question


async def test_a_callable_runner_up_is_preferred_to_a_described_server_that_cannot_be_called() -> None:
    echo = catalog("echo", "Echo service: repeats a message back about the weather.",
                   *small_catalogs()[-1].capabilities)
    cats = [described("weather-agent", AGENTS["weather-agent"]), echo]
    router, _ = router_for(cats)
    d = await router.decide(Request(question="echo the weather forecast message"))
    assert {c.capability.backend for c in d.candidates} == {"weather-agent", "echo"}
    answer = await query(router, QueryRequest(question="echo the weather forecast message"))
    assert answer.backend == "echo"


class HashingEncoder:
    """The benchmark's embedder interface (`encode`), on the tests' hashing embedding."""

    def encode(self, texts: list[str]) -> np.ndarray:
        return embed_texts(texts)


def test_the_accuracy_benchmark_reports_server_metrics_on_a_catalog_without_tools(tmp_path) -> None:
    import json

    from benchmarks.routing_accuracy import METHODS, load, metrics_for

    (tmp_path / "catalog.json").write_text(json.dumps(
        [{"name": n, "description": d, "tools": []} for n, d in AGENTS.items()]))
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in [
        {"query": "will it rain in Paris tomorrow", "gold_servers": ["weather-agent"]},
        {"query": "a recipe for sourdough bread", "server": "recipes-agent"},
        {"query": "book a hotel in Rome", "gold_servers": ["travel-agent"]},
    ]))
    catalogs, queries = load(tmp_path)
    settings = RoutingSettings()
    index = index_of(catalogs, settings=settings)
    for method in METHODS.values():
        result = metrics_for(index, queries, HashingEncoder(), method, settings)  # type: ignore[arg-type]
        assert result["server_R@1"] == 1.0 and result["ndcg@5"] == 1.0
        assert "tool_R@5" not in result


def test_the_alpha_oracle_counts_a_question_no_weight_answers_as_a_miss(tmp_path) -> None:
    import json

    from benchmarks.routing_accuracy import ALPHAS, alpha_oracle, load

    (tmp_path / "catalog.json").write_text(json.dumps(
        [{"name": n, "description": d, "tools": []} for n, d in AGENTS.items()]))
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in [
        {"query": "will it rain in Paris tomorrow", "gold_servers": ["weather-agent"]},
        {"query": "a recipe for sourdough bread", "gold_servers": ["recipes-agent"]},
        {"query": "book a hotel in Rome", "gold_servers": ["travel-agent"]},
        {"query": "will it snow in Oslo tomorrow", "gold_servers": ["recipes-agent"]},  # no weight finds this one
    ]))
    catalogs, queries = load(tmp_path)
    settings = RoutingSettings()
    oracle = alpha_oracle(index_of(catalogs, settings=settings), queries, HashingEncoder(), settings)
    assert oracle["server_R@1"]["best"] == oracle["server_R@1"]["oracle"] == 0.75
    assert oracle["server_R@1"]["best_alpha"] in ALPHAS and "tool_R@5" not in oracle
