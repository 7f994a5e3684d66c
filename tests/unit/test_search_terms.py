"""What a search looks for. The memory server matches a query against its entities' names, types and observations
as a substring: given "Search memory for alice" whole, it finds nothing, and the answer says alice is not there."""

from __future__ import annotations

import pytest

from router.stages.arguments import derive_arguments
from router.stages.search_terms import own_words, search_terms
from router.values import Capability

SEARCH_NODES = Capability(backend="memory", name="search_nodes", read_only=True,
                          description="Search for nodes in the knowledge graph based on a query",
                          input_schema={"type": "object", "required": ["query"], "properties": {"query": {
                              "type": "string", "description": "The search query to match against entity names"}}})
SEARCH_USERS = Capability(backend="github", name="search_users", description="Search for users on GitHub",
                          input_schema={"type": "object", "required": ["q"], "properties": {"q": {"type": "string"}}})
WEB = Capability(backend="brave", name="brave_web_search",
                 description="Performs a web search using the Brave Search API",
                 input_schema={"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}})
ASK = Capability(backend="docs", name="ask", description="Answer a question from the documentation",
                 input_schema={"type": "object", "required": ["question"], "properties": {"question": {
                     "type": "string"}}})


@pytest.mark.parametrize(("capability", "question", "terms"), [
    (SEARCH_NODES, "Search memory for alice", "alice"), (SEARCH_NODES, "Search for alice in memory", "alice"),
    (SEARCH_NODES, "Please search the knowledge graph for Bob's employer", "Bob's employer"),
    (SEARCH_USERS, "Find GitHub users named linus", "linus"),
    (SEARCH_USERS, 'Search GitHub for "torvalds"', "torvalds"),
    (WEB, "Search the web for the latest Python release", "the latest Python release"),
    (WEB, "Find pizza places in Chicago", "pizza places in Chicago"),  # Chicago is no place the tool searches
    (WEB, "Look up the weather in Paris", "the weather in Paris"), (WEB, "Find me cheap flights", "cheap flights"),
    (WEB, 'Search for python -"monty python"', 'python -"monty python"'),  # a quote is all the terms or stays
    (WEB, 'Look up how to say "thank you" in Japanese', 'how to say "thank you" in Japanese'),
    (WEB, "Search for 'climate change'", "climate change"),
    (SEARCH_NODES, "Search for memory leaks in Node", "memory leaks in Node"),  # "node" is the tool's, not a place
])
def test_a_request_written_as_a_search_gives_what_it_looks_for(capability: Capability, question: str,
                                                                terms: str) -> None:
    args, source = derive_arguments(capability, question)
    assert (args, source) == ({next(iter(args)): terms}, f"search terms as {next(iter(args))!r}")


@pytest.mark.parametrize(("capability", "question"), [
    (SEARCH_NODES, "What do we know about alice?"),  # not written as a search
    (WEB, "Search the web"),  # nothing to look for but where
    (ASK, "Search the docs for retry settings"),  # a question parameter takes the question
    (SEARCH_NODES, "Find and delete the duplicate entries"),  # what it looks for is not written
    (WEB, "Find out if it rains tomorrow"), (WEB, "Search for " + "alice " * 60),  # longer than a search request
])
def test_a_question_not_written_as_a_search_or_for_a_question_parameter_stays_whole(capability: Capability,
                                                                                   question: str) -> None:
    args, source = derive_arguments(capability, question)
    assert args == {next(iter(args)): question} and source.startswith("question as")


def test_where_a_search_looks_is_left_out_only_when_the_tool_names_it() -> None:
    words, places = own_words("search_flights", "Search flights", "travel"), own_words("travel")
    assert search_terms("Search my bookmarks for flights to Rome", words, places) == "my bookmarks for flights to Rome"
    assert search_terms("Find hotels about the beach", words, places) == "hotels about the beach"
    assert search_terms("Search for flights to Rome", words, places) == "flights to Rome"
    assert search_terms("Search for Rome flights in travel", words, places) == "Rome flights"
    assert search_terms("Search for Rome in search", words, places) == "Rome in search"  # the tool's word, no place


@pytest.mark.parametrize(("question", "words"), [
    # "How does hedging work?": the caller's "work" stays a word the answer must be about (on the project's own
    # documentation, taken as one that only asks, it read the section on load testing, which mentions hedging).
    ("How does hedging work?", ["hedging", "work"]),
    # Which backend is to answer says nothing of what about ("Use the memory server to show everything").
    ("Use the memory server to show everything", ["memory"]),
])
def test_the_words_that_say_what_a_question_is_about(question: str, words: list[str]) -> None:
    from router.stages.search_terms import content_words

    assert content_words(question) == words
