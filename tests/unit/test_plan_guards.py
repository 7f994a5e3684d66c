"""The plan stage's guards against acting on a guess: a much weaker candidate in place of a best match that cannot
serve the question, a tool that may act called on a path taken from the question, a tool name several backends give
to different tools, and the pair a close call lists. (Which candidate is meant: test_settle.py.)"""

from __future__ import annotations

import pytest

from router.errors import AmbiguousRoute, ToolFailed
from router.models import QueryRequest
from router.request import Request
from router.values import Capability
from tests.unit.fake_executor import fail, ok
from tests.unit.helpers import catalog, small_catalogs
from tests.unit.router_world import answers, query, world


async def test_a_tool_named_without_its_backend_that_two_backends_offer_as_different_tools_is_asked_about() -> None:
    # Called, the file server's "delete" failed with a tool error and the mail server's "delete" ran instead.
    query_only = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    catalogs = [catalog("time", "files", Capability(backend="time", name="delete", description="Delete a file",
                                                    input_schema=query_only)),
                catalog("clock", "mail", Capability(backend="clock", name="delete", description="Delete an email",
                                                    input_schema=query_only)),
                *small_catalogs()[2:]]
    w = world(answers(time=fail("tool_failed", "no such file"), clock=ok("deleted")), catalogs=catalogs)
    with pytest.raises(AmbiguousRoute) as info:
        await query(w.router, QueryRequest(question="delete the file old-report.txt", tool="delete"))
    assert [c["backend"] for c in info.value.details["candidates"]] == ["time", "clock"]
    assert "name the backend" in info.value.message and w.executor.called == []
    with pytest.raises(ToolFailed):  # named with its backend: called, and its failure is not sent to the other
        await query(w.router, QueryRequest(question="delete the file old-report.txt", backend="time", tool="delete",
                                           fallback_on_override=True))
    assert w.executor.called == ["time"]


def test_a_close_call_lists_the_two_choices_it_compared_not_two_copies_of_one() -> None:
    from router.models import ScoreBreakdown
    from router.stages.plan import _too_close_pair
    from router.values import Analysis, Candidate, Capability, Decision

    def candidate(backend: str, name: str, composite: float) -> Candidate:
        return Candidate(Capability(backend=backend, name=name), ScoreBreakdown(composite=composite), True)

    ranked = (candidate("time1", "get_time", 0.9), candidate("time2", "get_time", 0.9),
              candidate("clock", "world_clock", 0.88))
    analysis = Analysis(question="q", vector=None, intent="general", intent_source="classifier")
    decision = Decision(analysis=analysis, method="hybrid", candidates=ranked, verdict="ambiguous", message="")
    assert [(c["backend"], c["rank"]) for c in _too_close_pair(decision)] == [("time1", 1), ("clock", 3)]


def test_a_much_weaker_candidate_is_not_called_in_place_of_a_best_match_that_cannot_serve_the_question() -> None:
    from router.errors import NoRelevantBackend as Declined
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    text = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    units = Capability(backend="calc", name="convert_units", read_only=True, input_schema=text,
                       description="Convert a quantity between units of length and mass")
    prices = Capability(backend="shop", name="find_price", read_only=True, input_schema=text,
                        description="Look up a product's price")
    question = "Convert 100 USD to EUR"
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")

    def planned(weaker: float) -> object:
        candidates = (Candidate(units, ScoreBreakdown(composite=0.9, confidence=0.8), True),
                      Candidate(prices, ScoreBreakdown(composite=weaker, confidence=0.2), True))
        decision = Decision(analysis=analysis, method="hybrid", candidates=candidates, verdict="route", message="")
        return plan(decision, Arguments(Request(question=question)), {}, RouterSettings())

    assert isinstance(planned(0.6).refusal, Declined)  # type: ignore[attr-defined]  # a guess at what was meant
    assert [c.capability.name for c in planned(0.85).calls] == ["find_price"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("question", ["Delete the file /tmp/old.txt", "Remove old logs from /var/log",
                                      "Copy into /backup the file /etc/hosts"])
def test_a_tool_that_may_act_is_not_called_on_a_path_taken_from_the_question(question: str) -> None:
    # Which path a change acts on, and in which role, is more than a path's shape tells: "from /var/log" names the
    # folder the logs are in, and deleting it would be an action on a guess. The derivation still counts the path,
    # so that a reader taking it is not put first instead ("Create the directory /srv/x" was a directory listing).
    from router.errors import ArgumentsRequired
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.arguments import derive_arguments
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    paths = {"type": "string", "description": "A file path"}
    change = Capability(backend="files", name="change", input_schema={
        "type": "object", "required": ["source"], "properties": {"source": paths, "destination": paths}})
    assert "source" in derive_arguments(change, question)[0]  # type: ignore[index]
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
    decision = Decision(analysis=analysis, method="hybrid", verdict="route", message="", candidates=(
        Candidate(change, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9), True),))
    planned = plan(decision, Arguments(Request(question=question)), {}, RouterSettings())
    assert not planned.calls and isinstance(planned.refusal, ArgumentsRequired)
    assert "which path a change acts on is the caller's to say" in planned.refusal.message
    # A tool that reads is called on it.
    reader = Capability(backend="files", name="show", input_schema=change.input_schema, read_only=True)
    read = "Show /tmp/old.txt"
    decision = Decision(analysis=Analysis(question=read, vector=None, intent="general", intent_source="classifier"),
                        method="hybrid", verdict="route", message="", candidates=(
        Candidate(reader, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9), True),))
    [call] = plan(decision, Arguments(Request(question=read)), {}, RouterSettings()).calls
    assert call.arguments == {"source": "/tmp/old.txt"}


def test_a_reader_is_no_stand_in_for_a_tool_that_may_act_and_lacks_its_arguments() -> None:
    # "Create the directory /srv/x": the directory maker may not act on a path taken from the question, and the
    # lister, as relevant and able to take the path, listed it.
    from router.errors import ArgumentsRequired
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    path = {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}
    make = Capability(backend="files", name="create_directory", input_schema=path)
    listing = Capability(backend="files", name="list_directory", input_schema=path, read_only=True)
    question = "Create the directory /srv/x"
    decision = Decision(analysis=Analysis(question=question, vector=None, intent="general",
                                          intent_source="classifier"), method="hybrid", verdict="route", message="",
                        candidates=(Candidate(make, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9),
                                              True),
                                    Candidate(listing, ScoreBreakdown(composite=0.85, confidence=0.8,
                                                                      tool_confidence=0.9), True)))
    planned = plan(decision, Arguments(Request(question=question)), {}, RouterSettings())
    assert isinstance(planned.refusal, ArgumentsRequired) and planned.refusal.details["tool"] == "create_directory"


def test_a_time_converted_on_another_date_is_judged_on_derived_values_of_two_zones_and_every_date() -> None:
    from router.stages.serving import DATED, Arguments

    zone = {"type": "string", "description": "IANA timezone name"}
    convert = Capability(backend="time", name="convert_time", read_only=True, input_schema={
        "type": "object", "required": ["source_timezone", "time", "target_timezone"],
        "properties": {"source_timezone": zone, "time": {"type": "string", "description": "HH:MM"},
                       "target_timezone": zone}})

    def doubt(question: str, **kw: object) -> str | None:
        from datetime import UTC, datetime

        arguments = Arguments(Request(question=question, **kw))  # type: ignore[arg-type]
        arguments.now = datetime(2026, 11, 28, 12, tzinfo=UTC)
        return arguments.unserved(convert)

    assert doubt("What time is it in New York when it is 9am in London on March 20?") == DATED
    assert doubt("What time is it in New York when it is 9am in London on January 5, and on March 20?") == DATED
    assert doubt("What time is it in Paris when it is 9am in London on July 1?") is None  # their clocks move together
    # The caller's own arguments are its to give, and never break the plan.
    given = {"source_timezone": "europe/london", "time": "24:00", "target_timezone": "America/New_York"}
    assert doubt("Convert it for the meeting on March 20", arguments=given) is None
    # A tool that takes the date converts on it.
    dated = Capability(backend="time", name="convert_on", read_only=True, input_schema={
        **convert.input_schema, "properties": {**convert.input_schema["properties"],
                                               "when": {"type": "string", "format": "date"}}})
    arguments = Arguments(Request(question="What time is it in New York when it is 9am in London on March 20?"))
    assert arguments.unserved(dated) is None


def test_a_tool_that_may_act_is_not_called_on_an_array_of_paths_taken_from_the_question() -> None:
    # As a path: which files a change acts on is the caller's to say, several of them too.
    from router.errors import ArgumentsRequired
    from router.models import ScoreBreakdown
    from router.settings import RouterSettings
    from router.stages.arguments import derive_arguments
    from router.stages.plan import plan
    from router.stages.serving import Arguments
    from router.values import Analysis, Candidate, Decision

    question = "Delete /tmp/a.txt and /tmp/b.txt"
    remove = Capability(backend="files", name="delete_files", input_schema={"type": "object", "required": ["paths"],
                        "properties": {"paths": {"type": "array", "items": {"type": "string"},
                                                 "description": "The file paths to delete"}}})
    assert derive_arguments(remove, question)[0] == {"paths": ["/tmp/a.txt", "/tmp/b.txt"]}  # type: ignore[index]
    analysis = Analysis(question=question, vector=None, intent="general", intent_source="classifier")
    decision = Decision(analysis=analysis, method="hybrid", verdict="route", message="", candidates=(
        Candidate(remove, ScoreBreakdown(composite=0.9, confidence=0.9, tool_confidence=0.9), True),))
    planned = plan(decision, Arguments(Request(question=question)), {}, RouterSettings())
    assert not planned.calls and isinstance(planned.refusal, ArgumentsRequired)
