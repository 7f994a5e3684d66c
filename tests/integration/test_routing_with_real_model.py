"""The hybrid index with the real local embedding model (the default): the right server must rank first."""

from __future__ import annotations

from typing import Any

import pytest

from router.core import Router
from router.models import RouteRequest
from router.retrieval.catalog import CatalogIndex, CatalogTexts
from router.retrieval.embeddings import LocalMiniLM
from router.security.identity import Principal
from router.security.policy import Access, Policy
from router.settings import EmbeddingSettings, RouterSettings, RoutingSettings
from router.values import Capability, Catalog
from tests.unit.fake_executor import ScriptedExecutor
from tests.unit.router_world import Stats, route


def tool(backend: str, name: str, description: str, *params: str, read_only: bool = False) -> Capability:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in params}, "required": list(params)}
    return Capability(backend=backend, name=name, description=description, input_schema=schema, read_only=read_only)


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


def router_over(catalogs: list[Catalog], model: LocalMiniLM) -> Router:
    """A router on `catalogs` with the real model and a scripted executor (nothing is called)."""
    settings = RouterSettings.model_validate(
        {"backends": [{"name": c.backend, "kind": "mcp_stdio", "command": "srv"} for c in catalogs]})

    async def embed(texts: list[str]) -> Any:
        return model.encode(list(texts))

    router = Router(settings, executor=ScriptedExecutor({}), embed=embed,
                    stats=Stats(health={c.backend: "healthy" for c in catalogs}))
    texts = CatalogTexts.build(catalogs)
    router.set_catalogs(catalogs, CatalogIndex(texts, model.encode(list(texts.tool_dense)),
                                               model.encode(list(texts.server_dense)), settings.routing))
    return router


MAIL = Catalog(backend="mail", version="1", description="Send and manage email", capabilities=(
    tool("mail", "send_email", "Send an email message to one or more recipients.", "to", "subject", "body"),
    tool("mail", "delete_email", "Delete an email message from the mailbox.", "message_id"),
    tool("mail", "list_emails", "List the most recent email messages in the inbox.", read_only=True),
    tool("mail", "read_email", "Read the full content of one email message.", "message_id", read_only=True)))


async def test_a_caller_whose_policy_hides_part_of_the_catalog_is_never_more_sure_than_one_who_sees_it_all(
        index: tuple[CatalogIndex, LocalMiniLM]) -> None:
    """Among only what a policy leaves, a backend or tool stands out: a caller allowed only `send_email` who asked to
    delete a message was routed to send_email (the mail server fits, and its one tool left read as certain). Each
    confidence is held to what a caller who sees everything gets, so nothing is sent on that guess."""
    router = router_over([*CATALOGS, MAIL], index[1])

    def only(*allowed: str) -> Access:
        return Access(Principal("p", " ".join(allowed), "api_key"), Policy.model_validate({"allow": list(allowed)}))

    delete = RouteRequest(question="Delete the email message 42 from my mailbox")
    anyone = await route(router, delete)
    assert anyone.decision == "route" and anyone.candidates[0].capability == "delete_email"
    limited = await route(router, delete, only("mail/send_email", "time/*"))
    assert limited.decision != "route" and limited.status in (404, 409), limited.message
    assert limited.candidates[0].capability == "send_email"
    assert "delete_email" not in limited.model_dump_json()  # what outranked it stays hidden
    send = await route(router, RouteRequest(question="Send an email message to bob@example.com"),
                       only("mail/send_email", "time/*"))
    assert send.decision == "route" and send.candidates[0].capability == "send_email"

    questions = [delete.question, "Send an email message to bob@example.com", "Remember that Alice works at Acme",
                 "Convert 5 km to miles", "Show me the latest commits in my repo"]
    policies = [("mail/send_email", "time/*"), ("memory/*",), ("calculator/*",), ("git/*", "weather/*"),
                ("memory/create_entities", "calculator/calculate")]
    for question in questions:
        seen = {(c.backend, c.capability): c.scores for c in (await route(router, RouteRequest(question=question,
                                                                                                k=50))).candidates}
        for allowed in policies:
            for c in (await route(router, RouteRequest(question=question, k=50), only(*allowed))).candidates:
                mine, theirs = c.scores, seen[(c.backend, c.capability)]
                assert mine.confidence <= theirs.confidence and mine.tool_confidence <= theirs.tool_confidence, \
                    (question, allowed, c.capability, mine, theirs)


BROWSING = [
    Catalog(backend="playwright", version="1", description="Browser automation with Playwright", capabilities=(
        tool("playwright", "browser_navigate", "Navigate to a URL", "url"),
        tool("playwright", "browser_navigate_back", "Go back to the previous page in the history"),
        tool("playwright", "browser_tabs", "List, create, close, or select a browser tab.", "action"),
        tool("playwright", "browser_click", "Perform click on a web page", "element", "ref"))),
    Catalog(backend="fetch", version="1", description="Web content fetching", capabilities=(
        tool("fetch", "fetch", "Fetches a URL from the internet and optionally extracts its contents as markdown.",
             "url", read_only=True),)),
]


@pytest.mark.parametrize(("question", "meant"), [
    ("Navigate to https://news.ycombinator.com", "playwright/browser_navigate"),
    ("Go to example.com", "playwright/browser_navigate"),
    ("Summarize https://news.ycombinator.com", "fetch/fetch"),
    ("What does https://example.com/docs say?", "fetch/fetch"),
])
async def test_a_web_address_is_read_as_the_site_it_is_on_not_by_its_pieces(
        index: tuple[CatalogIndex, LocalMiniLM], question: str, meant: str) -> None:
    # The address's pieces outweighed the request's words: "Navigate to https://news.ycombinator.com" went to going
    # back a page, the summary to the knowledge graph.
    first = (await route(router_over([*CATALOGS, *BROWSING], index[1]), RouteRequest(question=question))).candidates[0]
    assert f"{first.backend}/{first.capability}" == meant
