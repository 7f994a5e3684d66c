"""The bundled example, in-process (no Ray): its real servers (the knowledge base on stdio), the local model, the
shipped confidence model. What a new user's first questions get: answers where a tool fits, a 422 naming the
tool when the question lacks its arguments, a question back when the right server is clear but not
which of its tools, and a refusal rather than a guess when nothing fits."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from benchmarks.example_questions import example_router
from router.core import Router
from router.errors import AmbiguousRoute, ArgumentsRequired, NoRelevantBackend, RouterError
from router.learning.decisions import feedback_examples
from router.models import FeedbackRequest, QueryRequest, RouteRequest
from tests.conftest import EXAMPLES
from tests.unit.router_world import query, route
from tests.unit.test_learning import LocalLearning

# One set of servers and one event loop for the whole module: starting them is the slow part.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def router(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Router]:
    if not (EXAMPLES / "node_modules" / "@modelcontextprotocol").is_dir():
        pytest.skip("the example's npm servers are not installed (make setup)")
    async with example_router(tmp_path_factory.mktemp("rag")) as r:
        yield r


@pytest.mark.parametrize(("question", "backend", "answer"), [
    ("add 2 and 40", "calculator", "42"),
    ("What is 6 times 7?", "calculator", "42"),
    ("What is 12 times (3 + 4)?", "calculator", "84"),
    # "divided" met the calculator only by a number of its description's examples: a divisor not among them
    # went to the unit converter, which answered with an error.
    ("What is 100 divided by 7?", "calculator", "14.2857"),
    ("How much is 250 divided by 5?", "calculator", "50"),
    # "times" drew the time server, and "17 * 23" gave the model nothing of a product: both were declined.
    ("What is 17 times 23?", "calculator", "391"), ("What is 17 * 23?", "calculator", "391"),
    ("Convert 5 km to miles", "calculator", "3.10686"),
    ("Echo back the message hello router", "everything", "hello router"),
])
async def test_a_question_a_tool_fits_is_answered_by_it(router: Router, question: str, backend: str,
                                                        answer: str) -> None:
    resp = await query(router, QueryRequest(question=question))
    assert resp.backend == backend and answer in resp.answer
    assert resp.routing is not None and resp.routing.confidence is not None
    assert resp.routing.confidence >= router.settings.routing.min_confidence


@pytest.mark.parametrize("question", ["Remember that my favourite colour is blue",
                                      "Store the fact that Alice works at Acme"])
async def test_a_memory_request_names_the_memory_server_and_asks_which_of_its_tools(router: Router,
                                                                                 question: str) -> None:
    # The memory server is configured for exactly this, but nothing in the question tells its nine
    # knowledge-graph tools apart: no tool is called (reading the graph would answer something else).
    with pytest.raises(AmbiguousRoute) as info:
        await query(router, QueryRequest(question=question))
    listed = info.value.details["candidates"]
    assert listed and {c["backend"] for c in listed} == {"memory"}
    assert "backend 'memory' fits" in info.value.message
    # The tools to choose from are those that could do it: read_graph may rank first, but only reads.
    assert not any(c["read_only"] for c in listed) and "read_graph (" not in info.value.message
    assert "add_observations" in {c["capability"] for c in listed}


async def test_asked_what_it_remembers_the_409_offers_the_memory_s_readers(router: Router) -> None:
    # The readers take nothing from the question, so none is called on this weak match; but they are what the
    # question asks for, and offering only the tools that store or delete would ask the wrong question.
    with pytest.raises(AmbiguousRoute) as info:
        await query(router, QueryRequest(question="What do you remember about Bob?"))
    listed = info.value.details["candidates"]
    assert listed and {c["backend"] for c in listed} == {"memory"}
    assert listed[0]["capability"] == "read_graph" and "read_graph (0." in info.value.message
    # The message prints as many decimals as it takes to tell a tool's confidence from the threshold.
    shown = re.findall(r"\((0\.\d+)\)", info.value.message)
    threshold = re.search(r"min_tool_confidence (0\.\d+)", info.value.message)
    assert threshold is not None and threshold.group(1) not in shown


async def test_one_feedback_on_that_409_teaches_the_tool_for_the_request_and_its_paraphrases(
        router: Router, tmp_path: Path) -> None:
    learning = LocalLearning(tmp_path / "feedback.sqlite", router.settings.learning,
                             router.settings.routing.min_confidence)
    router.learning = learning
    try:
        with pytest.raises(AmbiguousRoute) as asked:
            await query(router, QueryRequest(question="Remember that my favourite colour is blue"))
        request_id = asked.value.details["request_id"]
        learning.learn(feedback_examples(learning.decisions[request_id], FeedbackRequest(
            request_id=request_id, correct=False, backend="memory", tool="create_entities"), router.catalogs, None))
        # Now the tool is clear, and storing needs what only the caller (or an LLM) can give: a 422 naming it.
        for question in ("Remember that my favourite colour is blue",
                         "Please remember that my favourite colour is green"):
            with pytest.raises(ArgumentsRequired) as taught:
                await query(router, QueryRequest(question=question))
            assert (taught.value.details["backend"], taught.value.details["tool"]) == ("memory", "create_entities")
    finally:
        router.learning = None


async def test_a_time_question_without_a_place_is_the_time_where_the_server_runs(router: Router) -> None:
    # The server's `timezone` description says which zone to use when the user names none: its own. It was a 422.
    local = next(c for c in router.catalogs["time"].capabilities if c.name == "get_current_time")
    zone = re.search(r"Use '([^']+)' as local", local.input_schema["properties"]["timezone"]["description"])
    answered = await query(router, QueryRequest(question="What time is it?"))
    assert answered.capability == "get_current_time" and answered.routing.arguments == {"timezone": zone[1]}
    # A place no zone names is not replaced by the server's own: the 422 names the tool and what it needs.
    with pytest.raises(ArgumentsRequired) as info:
        await query(router, QueryRequest(question="What time is it in Springfield?"))
    assert (info.value.details["backend"], info.value.details["tool"]) == ("time", "get_current_time")
    assert "timezone" in info.value.details["input_schema"]["properties"]


async def test_a_question_nothing_fits_is_declined(router: Router) -> None:
    with pytest.raises(NoRelevantBackend) as info:
        await query(router, QueryRequest(question="Bake a sourdough bread recipe"))
    assert info.value.details["candidates"]


async def test_a_bare_percentage_is_not_answered_from_a_page_that_shares_its_number(router: Router) -> None:
    # "7% of 300" was answered by the FAQ entry "Are answers cached?" ("kept for 300 seconds"): its only word was
    # the number. Read as "7 percent of 300", "percent" is a word the entry does not say.
    shown = await route(router, RouteRequest(question="7% of 300"))
    assert "faq.jsonl: Are answers cached?" not in " ".join(shown.calls)


async def test_a_currency_conversion_is_declined_not_sent_to_the_unit_converter(router: Router) -> None:
    # The unit converter is the closest match, but nothing in its texts says it takes currencies: no tool
    # is called to fail (or to answer "100 = 100"), and the refusal says why.
    with pytest.raises(NoRelevantBackend) as info:
        await query(router, QueryRequest(question="Convert 100 USD to EUR"))
    assert "currency (USD, EUR)" in info.value.message and "convert_units" in info.value.message


async def test_a_request_to_change_something_is_not_answered_by_a_tool_that_only_reads(router: Router) -> None:
    # The memory server's read_graph (read-only by its annotations) ranks first for "Remember that ...": reading
    # the graph would answer a request to store something with a wrong answer. Asked as a question, it reads.
    # The memory's tools that may store it are close: they go first, and the answer asks which of them (it
    # said before that nothing that may change anything fits).
    shown = await route(router, RouteRequest(question="Remember that Bob likes tea"))
    reader = next(c for c in shown.candidates if c.capability == "read_graph")
    assert reader.read_only and reader.scores.composite == max(c.scores.composite for c in shown.candidates)
    assert not shown.candidates[0].read_only and shown.candidates[0].placed
    with pytest.raises(AmbiguousRoute) as info:
        await query(router, QueryRequest(question="Remember that Bob likes tea"))
    assert "asks to remember something" in info.value.message and "memory/tool/read_graph" in info.value.message
    listed = info.value.details["candidates"]
    assert listed and {c["backend"] for c in listed} == {"memory"} and not any(c["read_only"] for c in listed)
    assert "add_observations" in {c["capability"] for c in listed}
    answered = await query(router, QueryRequest(question="What is in the knowledge graph?"))
    assert (answered.backend, answered.capability) in (("memory", "read_graph"), ("memory", "knowledge-graph"))


async def test_asked_for_everything_in_memory_the_reader_answers(router: Router) -> None:
    # read_graph takes nothing from the question; "everything" says how much, not what about: it was a 404 naming
    # 'everything' as a word the reader's answer could not be about.
    answered = await query(router, QueryRequest(question="Show me everything in memory"))
    assert (answered.backend, answered.capability) == ("memory", "read_graph")


async def test_asked_to_list_what_is_in_memory_the_409_offers_readers_not_the_deleter(router: Router) -> None:
    # delete_entities is the closest match for "entities"; the 409 named it alone as the tool to call.
    with pytest.raises(AmbiguousRoute) as info:
        await query(router, QueryRequest(question="List all entities in memory"))
    listed = info.value.details["candidates"]
    assert listed and all(c["backend"] == "memory" and c["read_only"] for c in listed)
    assert "read_graph" in {c["capability"] for c in listed}
    assert "only asks ('list')" in info.value.message and "delete_entities, may change something" in info.value.message


async def test_a_question_that_only_asks_is_not_held_up_by_a_switch_it_resembles(router: Router) -> None:
    # "log" drew the everything server's logging switch first: a 409 about switching it, with the calculator,
    # likely enough on its own, second.
    resp = await query(router, QueryRequest(question="What is the log of 1000?"))
    assert (resp.backend, resp.capability) == ("calculator", "calculate")
    assert resp.routing is not None and resp.routing.candidates[0].placed


@pytest.mark.parametrize("question", ["Is logging enabled?", "What does the logging toggle do?"])
async def test_a_question_about_a_switch_does_not_flip_it(router: Router, question: str) -> None:
    # Both called toggle-simulated-logging (confidence 0.51 and 0.85), switching the server's logging.
    with pytest.raises(NoRelevantBackend, match="may change something: it is not called for a question"):
        await query(router, QueryRequest(question=question))


@pytest.mark.parametrize("question", ["Turn off the simulated logs", "Please enable simulated logging",
                                      "Turn the simulated logs off", "Now disable simulated logging"])
async def test_a_switch_that_toggles_is_not_flipped_for_a_request_for_one_way(router: Router, question: str) -> None:
    # Both called toggle-simulated-logging (confidence 0.87 and 0.89): with logging off, as the server starts,
    # "Turn off" turned it on.
    with pytest.raises(NoRelevantBackend, match="switches whichever way things are now"):
        await query(router, QueryRequest(question=question))
    toggle = await route(router, RouteRequest(question="Toggle the simulated logging"))
    assert toggle.calls == ["everything/toggle-simulated-logging"]
    for _ in range(2):  # named, it is the caller's choice (twice, to leave the switch as it was)
        named = await query(router, QueryRequest(question=question, backend="everything",
                                                 tool="toggle-simulated-logging"))
        assert named.capability == "toggle-simulated-logging"


async def test_a_time_converted_on_a_date_when_the_clocks_are_set_otherwise_is_not_converted_as_of_today(
        router: Router) -> None:
    # convert_time takes no date: "9am in London on March 20" was converted at today's offsets, an hour off when
    # New York's clocks have changed by then and London's not yet. A date with today's gap is converted.
    from datetime import UTC, date, datetime, timedelta

    from router.stages.timezones import gap_changes

    now = datetime.now(UTC)
    days = [now.date() + timedelta(days=n) for n in range(30, 360, 7)]
    zones = ["Europe/London", "America/New_York"]
    other = next(d for d in days if gap_changes(zones, "09:00", d, now))
    same = next(d for d in days if not gap_changes(zones, "09:00", d, now))

    def asked(day: date) -> QueryRequest:
        return QueryRequest(question=f"What time is it in New York when it is 9am in London on {day:%B} {day.day}?")

    with pytest.raises(NoRelevantBackend):
        await query(router, asked(other))
    shown = await route(router, RouteRequest(question=asked(other).question))
    assert any(c.ruled_out and "are set otherwise than today" in c.ruled_out for c in shown.candidates)
    resp = await query(router, asked(same))
    assert resp.capability == "convert_time"


@pytest.mark.parametrize("question", ["What was the time in Tokyo yesterday at noon?",
                                      "What time will it be in Tokyo tomorrow?",
                                      "What time is it in Tokyo in 30 minutes?",
                                      "What time does the sun set in Paris?"])
async def test_the_time_now_does_not_answer_a_question_about_another_time(router: Router, question: str) -> None:
    # get_current_time answered each with the time now; "What time is it in Tokyo?" still gets it.
    with pytest.raises(NoRelevantBackend) as info:
        await query(router, QueryRequest(question=question))
    assert "another time than now" in info.value.message
    assert (await query(router, QueryRequest(question="What time is it in Tokyo?"))).capability == "get_current_time"


@pytest.mark.parametrize(("question", "verb"), [("Set a timer for 5 minutes", "set"),
                                               ("Change the time zone to Europe/Paris", "change")])
async def test_a_timer_or_a_time_zone_is_not_set_by_reading_the_clock(router: Router, question: str, verb: str) -> None:
    # The timer was a 422 asking for get_current_time's time zone: a caller who gave one got the time, not a timer;
    # the time zone was answered with the current time in Paris.
    with pytest.raises(NoRelevantBackend) as info:
        await query(router, QueryRequest(question=question))
    assert f"asks to {verb} something" in info.value.message and "only reads" in info.value.message


async def test_a_call_that_would_leave_some_of_the_question_s_values_unused_is_not_made(router: Router) -> None:
    # convert_time fits "the time difference between Tokyo and Paris" best but needs a time the question does not
    # give; the current time of Tokyo, which the router called instead, answers half of it. The caller now hears
    # what convert_time needs.
    question = "What's the time difference between Tokyo and Paris?"
    with pytest.raises(ArgumentsRequired) as info:
        await query(router, QueryRequest(question=question))
    assert (info.value.details["tool"], info.value.details["missing"]) == ("convert_time", "time")
    answered = await query(router, QueryRequest(question="What time is it in Tokyo? Tokyo, please"))
    assert answered.capability == "get_current_time" and "Asia/Tokyo" in answered.answer


async def test_an_optional_parameter_takes_the_value_the_question_gives_it(router: Router) -> None:
    # get-resource-reference needs nothing (its resourceId defaults to 1): asked for resource 5, it answered with
    # resource 1. A second id is one value more than it takes: declined, not half answered.
    resp = await query(router, QueryRequest(question="Get the resource with id 5"))
    assert resp.capability == "get-resource-reference" and "Resource 5" in resp.answer
    assert resp.routing is not None and resp.routing.arguments == {"resourceId": 5}
    assert resp.routing.arguments_source == "extracted, optional: resourceId"
    with pytest.raises(NoRelevantBackend, match="also gives 6"):
        await query(router, QueryRequest(question="Get the resource with id 5 and 6"))


async def test_a_call_that_takes_nothing_from_the_question_is_not_made_for_words_it_is_not_about(
        router: Router) -> None:
    # The reference server's argument-free tools answer the same whatever was asked: "files" matches the description
    # of get-roots-list, and on that weak match the question's other words are what the caller wants, and nothing
    # that tool says is about them.
    question = "List the files in my home directory"
    first = (await route(router, RouteRequest(question=question))).candidates[0]
    assert first.capability == "get-roots-list" and first.scores.confidence >= 0.08  # it would have been called
    with pytest.raises(NoRelevantBackend) as info:
        await query(router, QueryRequest(question=question))
    assert "everything/tool/get-roots-list, takes nothing from the question" in info.value.message
    assert "about 'home', 'directory':" in info.value.message
    # Asked for what it does, such a tool answers on a match as weak; a caller who names the tool is not second-guessed.
    answered = await query(router, QueryRequest(question="What resources do you have?"))
    assert answered.capability == "get-resource-links"
    assert answered.routing is not None and answered.routing.confidence < 0.5
    named = await query(router, QueryRequest(question="List the files in my home directory", backend="everything",
                                             tool="get-roots-list"))
    assert named.capability == "get-roots-list"


async def test_a_tool_that_may_act_is_not_called_on_a_weak_match(router: Router) -> None:
    # The reference server's toggle-simulated-logging starts something, and nothing in the question makes it
    # likely enough to be meant: the router asks rather than acting.
    with pytest.raises(AmbiguousRoute) as info:
        await query(router, QueryRequest(question="How can I get more logs?"))
    assert "may change something" in info.value.message and "routing.min_action_confidence" in info.value.message
    assert info.value.details["candidates"][0]["capability"] == "toggle-simulated-logging"
    assert info.value.details["candidates"][0]["read_only"] is False
    named = await query(router, QueryRequest(question="How can I get more logs?", backend="everything",
                                             tool="toggle-simulated-logging"))
    assert named.capability == "toggle-simulated-logging"  # named by the caller, it is called


async def test_the_question_s_values_choose_the_conversion_and_the_breakdown_says_so(router: Router) -> None:
    resp = await query(router, QueryRequest(question="What time is it in New York when it is 9am in London?"))
    assert resp.capability == "convert_time"
    assert resp.routing is not None and resp.routing.arguments == {
        "source_timezone": "Europe/London", "time": "09:00", "target_timezone": "America/New_York"}
    first = resp.routing.candidates[0]
    assert first.capability == "convert_time" and first.rank == 1 and resp.routing.chosen == first
    # Retrieval alone scores the current time of one place higher; the breakdown names what put the other first.
    current = next(c for c in resp.routing.candidates if c.capability == "get_current_time")
    assert current.scores.composite > first.scores.composite and current.rank > first.rank
    assert first.placed is not None and "values" in first.placed


@pytest.mark.parametrize(("question", "section"), [
    # Each of these was declined while the knowledge base offered only its one search tool, whose description names
    # no topic ("How do I run it on a cluster?" came closest to the reference server's long-running operation).
    ("How do I run it on a cluster?", "operations.md: Running on a cluster"),
    ("Do I need an API key?", "faq.md: Do I need an API key to run the demo?"),
    ("What is the default request deadline?", "resilience.md: Deadlines and timeouts"),
    ("Can I use remote embeddings?", "embeddings.md: Remote embeddings"),
    # The example's documents said nothing of metrics or traces: "How do I see metrics?" called the calculator's unit
    # converter, "How do I enable tracing?" came closest to the reference server's logging switch.
    ("How do I see metrics?", "operations.md: Metrics and traces"),
    ("How do I enable tracing?", "operations.md: Metrics and traces"),
])
async def test_a_question_the_documentation_answers_reads_its_section(router: Router, question: str,
                                                                     section: str) -> None:
    resp = await query(router, QueryRequest(question=question))
    assert (resp.backend, resp.kind, resp.capability) == ("knowledge-base", "resource", section)
    heading = section.split(": ", 1)[1]
    assert resp.answer.startswith(f"# {heading}\n\n")


async def test_a_section_that_shares_none_of_the_question_s_words_is_not_read_for_it(router: Router) -> None:
    # The closest section is about hedging, but "work" is the caller's word, not its: a weak match to a read that
    # takes nothing from the question answers the same whatever was asked.
    with pytest.raises(NoRelevantBackend) as info:
        await query(router, QueryRequest(question="How does hedging work?"))
    assert "knowledge-base/resource/faq.jsonl: When does hedging send a second request?" in info.value.message
    assert "about 'work':" in info.value.message


@pytest.mark.parametrize("question", [
    "add 2 and 40",  # a call
    "What time is it in New York when it is 9am in London?",  # a call the question's values settle
    "How does hedging work?", "Write a poem about the sea",  # 404s the plan adds to a route on a weak match
    "Remember that Bob likes tea",  # a 409: the reader fits best, the tools that may store it are asked about
    "How can I get more logs?",  # a 409: a tool that may act, on a weak match
    "List all entities in memory",  # a 409: the closest may act, the question only asks: the readers are asked about
    "What time is it?",  # the server's own zone, as its description says when the user names none
    "What time is it in Springfield?",  # a 422
])
async def test_the_dry_run_shows_what_the_query_does(router: Router, question: str) -> None:
    # Before, the dry run was the decision alone: it showed get_current_time for the 9am question, and a route to an
    # unrelated FAQ entry for the poem, which the query then declined.
    shown = await route(router, RouteRequest(question=question))
    try:
        resp = await query(router, QueryRequest(question=question))
    except RouterError as refused:
        assert (shown.status, shown.error, shown.calls) == (refused.status_code, refused.code, [])
        assert shown.message == refused.message
        assert shown.decision == {404: "no_match", 409: "ambiguous"}.get(refused.status_code, "route")
    else:
        assert (shown.decision, shown.status, shown.error) == ("route", 200, None)
        assert resp.routing is not None
        assert (shown.arguments, shown.arguments_source) == (resp.routing.arguments, resp.routing.arguments_source)
        assert shown.calls[0] == f"{resp.backend}/{resp.capability}" == f"{shown.candidates[0].backend}/" \
                                                                         f"{shown.candidates[0].capability}"


async def test_the_dry_run_names_the_closest_match_the_query_passes_by(router: Router) -> None:
    # The time server's convert_time is closest, but the question gives no time zone; the unit converter, almost as
    # close, takes it. The dry run said "routed to time/convert_time" while listing the converter's call.
    question = "How many seconds are in an hour?"
    shown = await route(router, RouteRequest(question=question))
    resp = await query(router, QueryRequest(question=question))
    assert shown.calls == [f"{resp.backend}/{resp.capability}"] == ["calculator/convert_units"]
    assert shown.message.startswith("routed to calculator/convert_units: the closest, time/tool/convert_time, is not "
                                    "called, since it needs")
    assert shown.candidates[0].capability == "convert_time" and "which the question does not give" in (
        shown.candidates[0].ruled_out or "")


@pytest.mark.parametrize(("question", "first", "why"), [
    ("Convert 100 USD to EUR", "convert_units", "it takes no currency value, which the question gives"),
    ("Remember that Bob likes tea", "read_graph", "it only reads, and the question asks to remember something"),
    ("List the files in my home directory", "get-roots-list",
     "it takes nothing from the question, and on a match this weak it says nothing about 'home', 'directory'"),
])
async def test_the_dry_run_says_why_a_likely_candidate_would_not_be_called(router: Router, question: str, first: str,
                                                                          why: str) -> None:
    shown = await route(router, RouteRequest(question=question))
    assert max(shown.candidates, key=lambda c: c.scores.composite).capability == first  # the best match ...
    assert next(c for c in shown.candidates if c.capability == first).ruled_out == why  # ... and why it is not called
    assert shown.status in (404, 409) and not shown.calls
    answered = await route(router, RouteRequest(question="add 2 and 40"))
    assert answered.calls and not any(c.ruled_out for c in answered.candidates[:1])
