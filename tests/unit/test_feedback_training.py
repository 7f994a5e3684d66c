"""benchmarks/feedback_training.py: the feedback a replay gives, and the questions left to measure on."""

from __future__ import annotations

from benchmarks.feedback_curve import Replay, replay_orders
from benchmarks.feedback_training import feedback, measure
from benchmarks.routing_accuracy import Query
from mcp_router.cli.train import export_triples
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.settings import RouterSettings
from router.values import Capability
from tests.unit.helpers import catalog, embed_texts

SERVERS = {
    "weather": ("forecast", "Weather forecast: rain, wind and temperature for a city."),
    "recipes": ("recipe", "Cooking recipes with ingredients for bread and cakes."),
    "flights": ("book_flight", "Book flights between airports."),
    "stocks": ("quote", "Stock market quotes and share prices."),
}
QUESTIONS = {
    "weather": ["will it rain in Paris", "wind in Oslo tomorrow", "temperature in Rome", "forecast for Lyon"],
    "recipes": ["a recipe for bread", "ingredients for a cake", "how to bake bread", "cake recipe please"],
    "flights": ["book a flight to Rome", "flights from Oslo", "airport to Paris flight", "book flights Lyon"],
    # Worded to land on the weather server: the feedback on it is a correction.
    "stocks": ["rain and wind in the city", "stock quote", "share price of ACME", "market quotes today"],
}


def replay() -> tuple[Replay, dict]:
    catalogs = [catalog(name, "", Capability(backend=name, name=tool, description=text))
                for name, (tool, text) in SERVERS.items()]
    texts = CatalogTexts.build(catalogs)
    settings = RouterSettings.model_validate({"routing": {"min_confidence": 0}})
    index = CatalogIndex(texts, embed_texts(texts.tool_dense), embed_texts(texts.server_dense), settings.routing)
    queries = [Query(text=q, gold_tools=[(SERVERS[s][0], {s})], gold_servers={s})
               for s, qs in QUESTIONS.items() for q in qs]
    vectors = list(embed_texts([q.text for q in queries]))
    return Replay(index, queries, vectors, settings), {c.backend: c for c in catalogs}


def test_each_fed_server_teaches_its_first_questions_and_the_rest_are_measured() -> None:
    r, catalogs = replay()
    _, order, unfed = replay_orders(r.queries, [3], 0.25)[0]
    assert len(unfed) == 1
    examples, fed_later, unfed_questions = feedback(r, catalogs, order, unfed, per_server=2)
    server_of = {i: next(iter(q.gold_servers)) for i, q in enumerate(r.queries)}
    assert sorted(server_of[i] for i in unfed_questions) == sorted([*unfed] * 4)
    taught = {e.question for e in examples}
    assert len(taught) == 2 * 3 and not taught & {r.queries[i].text for i in fed_later + unfed_questions}
    assert sorted(server_of[i] for i in fed_later) == sorted(s for s in SERVERS if s not in unfed for _ in range(2))
    # Every example carries the capability's document, so the training export has triples to write.
    assert all(e.document for e in examples)
    for e in examples:
        gold = next(q for q in r.queries if q.text == e.question).gold_servers
        assert (e.backend in gold) == (e.label == 1)


def test_a_correction_gives_the_gold_tool_and_measures_without_the_taught_questions(tmp_path) -> None:
    r, catalogs = replay()
    order = list(range(len(r.queries)))
    examples, fed_later, unfed_questions = feedback(r, catalogs, order, set(), per_server=1)
    wrong = [e for e in examples if e.label == -1]
    assert [e.question for e in wrong] == ["rain and wind in the city"]
    assert any(e.label == 1 and e.backend == "stocks" and e.question == wrong[0].question for e in examples)
    assert unfed_questions == [] and len(fed_later) == 12
    assert export_triples(examples, tmp_path)["triples"] == 4
    measured = measure(r, examples, fed_later, unfed_questions)
    assert 0 <= measured["fed_r1"] <= 1 and measured["unfed_by_server"] == {}
