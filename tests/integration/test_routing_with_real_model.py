"""The hybrid index with the real local embedding model (the default): the right server must rank first."""

from __future__ import annotations

import pytest

from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.retrieval.embeddings import LocalMiniLM
from router.settings import EmbeddingSettings, RoutingSettings
from router.values import Capability, Catalog


def tool(backend: str, name: str, description: str, *params: str) -> Capability:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in params}, "required": list(params)}
    return Capability(backend=backend, name=name, description=description, input_schema=schema)


CATALOGS = [
    Catalog(backend="calculator", version="1", description="Arithmetic and unit conversion", capabilities=(
        tool("calculator", "calculate", "Evaluate arithmetic: + - * / ^, sqrt, sin, log", "query"),
        tool("calculator", "convert_units", "Convert a quantity between units of length, mass, temperature",
             "query"))),
    Catalog(backend="time", version="1", description="Current time in any IANA time zone", capabilities=(
        tool("time", "get_current_time", "Get current time in a specific timezone", "timezone"),
        tool("time", "convert_time", "Convert time between timezones", "source_timezone", "time",
             "target_timezone"))),
    Catalog(backend="git", version="1", description="Read and search a git repository", capabilities=(
        tool("git", "git_log", "Show the commit logs of the repository", "repo_path"),
        tool("git", "git_diff", "Show changes between commits", "repo_path", "target"))),
    Catalog(backend="memory", version="1", description="A knowledge graph memory of entities and relations",
            capabilities=(
                tool("memory", "create_entities", "Create multiple new entities in the knowledge graph",
                     "entities"),
                tool("memory", "search_nodes", "Search for nodes in the knowledge graph", "query"))),
    Catalog(backend="weather", version="1", description="Weather forecasts and alerts", capabilities=(
        tool("weather", "get_forecast", "Get the weather forecast for a location", "latitude", "longitude"),
        tool("weather", "get_alerts", "Get weather alerts for a US state", "state"))),
]


@pytest.fixture(scope="module")
def index() -> tuple[CatalogIndex, LocalMiniLM]:
    model = LocalMiniLM(model=EmbeddingSettings().model)
    texts = CatalogTexts.build(CATALOGS)
    idx = CatalogIndex(texts, model.encode(list(texts.tool_dense)), model.encode(list(texts.server_dense)),
                       RoutingSettings())
    return idx, model


@pytest.mark.parametrize(("question", "server"), [
    ("What time is it in Tokyo?", "time"),
    ("How much is 17 squared minus 4?", "calculator"),
    ("Convert 30 degrees celsius to fahrenheit", "calculator"),
    ("Show me the latest commits in my repo", "git"),
    ("Will it rain in Paris tomorrow?", "weather"),
    ("Remember that Alice works at Acme", "memory"),
])
def test_the_right_server_ranks_first(index: tuple[CatalogIndex, LocalMiniLM], question: str, server: str) -> None:
    idx, model = index
    vector = model.encode([question])[0]
    assert idx.rank_servers(question, vector, 1)[0].backend == server
    top = idx.search(question, vector, 1)[0]
    assert top.capability.backend == server and top.hit.dense > 0.1


def test_dense_and_sparse_disagreeing_are_fused_not_overridden(index: tuple[CatalogIndex, LocalMiniLM]) -> None:
    idx, model = index
    question = "Will it rain in Paris tomorrow?"  # no word in common with the weather tools but "weather"-like
    vector = model.encode([question])[0]
    hits = idx.search(question, vector, 3)
    assert hits[0].hit.dense_norm == 1.0
    alpha = RoutingSettings().alpha
    assert all(abs(h.hit.hybrid - (alpha * h.hit.dense_norm + (1 - alpha) * h.hit.bm25_norm)) < 1e-9 for h in hits)
